"""Memfabric config store stand-in (python3 -m memfabric_hybrid.launch_ascend_mf_store, PyMotor's mf_store role).

Listens on the address of ASCEND_MF_STORE_URL (tcp://<ip>:<port>, which PyMotor's mf_store.sh builds from POD_IP and
ASCEND_MF_STORE_PORT): a wrong POD_IP or a port in use fails at start. SGLang engines with the ascend transfer
backend connect to it at start-up (motor_sim.sglang_engine) and fail when it does not answer. Protocol (stand-in
only): one line ``HELLO <role> <ip>`` -> ``OK <n>`` (n: engines seen so far).
"""

from __future__ import annotations

import os
import re
import socketserver
import sys
import threading

from motor_sim.common import fail, install_fault_knobs, log, log_received, wait_forever

COMPONENT = "mf_store"
URL = re.compile(r"^(?:tcp://)?(?P<host>[^:/]+):(?P<port>\d+)$")


def parse_url(url: str) -> tuple[str, int]:
    match = URL.match(url or "")
    if not match:
        fail(COMPONENT, f"ASCEND_MF_STORE_URL {url!r} is not tcp://<ip>:<port>")
    return match.group("host"), int(match.group("port"))


class Store(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, address):
        super().__init__(address, Handler)
        self.clients: set[str] = set()
        self.lock = threading.Lock()


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(4096).decode(errors="replace").strip()
        parts = line.split()
        if len(parts) != 3 or parts[0] != "HELLO":
            self.wfile.write(b"ERR expected: HELLO <role> <ip>\n")
            return
        with self.server.lock:
            self.server.clients.add(f"{parts[1]}@{parts[2]}")
            count = len(self.server.clients)
        log(COMPONENT, "client registered", role=parts[1], ip=parts[2], clients=count)
        self.wfile.write(f"OK {count}\n".encode())


def main() -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    host, port = parse_url(os.environ.get("ASCEND_MF_STORE_URL", ""))
    try:
        server = Store((host, port))
    except OSError as exc:
        fail(COMPONENT, f"cannot listen on {host}:{port}: {exc}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(COMPONENT, f"config store listening on {host}:{port}")
    wait_forever()


if __name__ == "__main__":
    sys.exit(main())
