"""mooncake_master stand-in: accepts TCP connections on its RPC port and serves GET /metrics on
the metrics port. Flags as the real master's (gflags style); an unknown flag aborts, as gflags does."""

from __future__ import annotations

import argparse
import socketserver
import sys
import threading

from motor_sim.common import fail, install_fault_knobs, log, log_received, serve, wait_forever

COMPONENT = "mooncake_master"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mooncake_master", allow_abbrev=False)
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--rpc_port", type=int, default=0)
    p.add_argument("--rpc_address", default="0.0.0.0")
    p.add_argument("--metrics_port", type=int, default=9003)
    p.add_argument("--enable_metric_reporting", default="true")
    p.add_argument("--eviction_ratio", type=float, default=0.05)
    p.add_argument("--eviction_high_watermark_ratio", type=float, default=0.95)
    p.add_argument("--default_kv_lease_ttl", type=int, default=5000)
    p.add_argument("--client_ttl", type=int, default=10)
    p.add_argument("--enable_offload", default="false")
    p.add_argument("--rpc_thread_num", type=int, default=4)
    args, unknown = p.parse_known_args(argv)
    if unknown:
        fail(COMPONENT, f"unknown command line flag(s) {unknown}")
    for name in ("eviction_ratio", "eviction_high_watermark_ratio"):
        if not 0 <= getattr(args, name) <= 1:
            fail(COMPONENT, f"--{name} must be within [0, 1]")
    return args


class _Rpc(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        log(COMPONENT, "RPC connection", client=self.client_address[0])


class _RpcServer(socketserver.ThreadingTCPServer):
    # Like the real master: a restarted/recreated pool binds its port again at once, even while the connections
    # of its previous life are in TIME_WAIT (without it the bind fails and the restart policy has to retry).
    allow_reuse_address = True
    daemon_threads = True


def main(argv: list[str] | None = None) -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    args = parse_args(argv if argv is not None else sys.argv[1:])
    port = args.rpc_port or args.port
    try:
        rpc = _RpcServer((args.rpc_address, port), _Rpc)
    except OSError as exc:
        fail(COMPONENT, f"cannot listen on {args.rpc_address}:{port}: {exc}")
    log(COMPONENT, f"master RPC listening on {args.rpc_address}:{port}", **vars(args))
    serve(f"{COMPONENT}-metrics", args.metrics_port,
          {("GET", "/metrics"): lambda *_: (200, "master_key_count 0\n")}, host="0.0.0.0")
    threading.Thread(target=rpc.serve_forever, daemon=True).start()
    wait_forever()


if __name__ == "__main__":
    main()
