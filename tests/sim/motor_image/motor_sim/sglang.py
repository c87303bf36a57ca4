"""SGLang engine stand-in: what engine_server does for ``engine_type: "sglang"`` (PyMotor's SGLangConfig/SGLangEngine).

Command line, as PyMotor builds it (motor/engine_server/core/sglang/sglang_config.py): every engine_config key but
``engine_type`` and ``kv_transfer_config`` becomes ``--<key with hyphens> <value>`` (``true`` -> the bare flag,
``false`` -> nothing, dicts as JSON), plus ``--host``, ``--port`` and ``--disaggregation-mode prefill|decode|null``;
then SGLang's own parser (ServerArgs) reads it. The stand-in parses it with the subset of SGLang's options below and
fails like that parser on an unknown option (``unrecognized arguments``), a value given to a flag, a non-number where
SGLang wants one, and a missing ``--model-path``.

Start-up checks, each ending the engine (and so the node manager and its container) like the real one:
- the NPUs: ``tp-size x pp-size`` (x ``dp-size`` without ``enable-dp-attention``) devices from ``base-gpu-id`` on,
  step ``gpu-id-step`` (logical ids over the container's ``/dev/davinci<N>``), or the ASCEND_RT_VISIBLE_DEVICES the node manager set with
  multi endpoints;
- the model directory and its tokenizer;
- disaggregation prefill: binds ``disaggregation-bootstrap-port`` (default 8998) on the host (HTTP ``GET /route``);
- ``disaggregation-transfer-backend ascend`` (prefill and decode): registers with the memfabric config store at
  ASCEND_MF_STORE_URL (retried for MF_STORE_WAIT s).

Requests (PyMotor's PD dual dispatch sends each to a prefill and a decode engine at once, with ``bootstrap_host``,
``bootstrap_port``, ``bootstrap_room``): prefill and decode refuse a request without them (400); decode asks the
prefill's bootstrap server at ``bootstrap_host:bootstrap_port`` and answers 500 when it is not there.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid

from motor_sim.common import cfg_get, container_npus, fail, http_json, log, serve, wait_forever

COMPONENT = "sglang"
DEFAULT_BOOTSTRAP_PORT = 8998
MF_STORE_WAIT = float(os.environ.get("MOTOR_SIM_MF_STORE_WAIT", "60"))

# SGLang ServerArgs options (a subset: the ones PyMotor's examples and common deployments use) by kind.
FLAGS = {
    "trust-remote-code", "skip-tokenizer-init", "skip-server-warmup", "is-embedding", "enable-multimodal",
    "enable-dp-attention", "enable-dp-lm-head", "enable-two-batch-overlap", "enable-torch-compile",
    "disable-radix-cache", "disable-cuda-graph", "disable-cuda-graph-padding", "disable-overlap-schedule",
    "enable-mixed-chunk", "enable-metrics", "enable-metrics-for-all-schedulers", "log-requests", "show-time-cost",
    "enable-hierarchical-cache", "enable-cache-report", "enable-lora", "allow-auto-truncate", "enable-memory-saver",
    "enable-eplb", "enable-nan-detection", "enable-p2p-check", "stream-output", "delete-ckpt-after-loading",
    "enable-return-hidden-states", "enable-custom-logit-processor", "disable-custom-all-reduce",
    "enable-tokenizer-batch-encode", "disable-outlines-disk-cache", "disable-chunked-prefix-cache",
    "disable-shared-experts-fusion", "enable-deterministic-inference", "enable-prefill-context-parallel",
    "sleep-on-idle", "enable-request-time-stats-logging", "enable-profile-cuda-graph", "disable-fast-image-processor",
    "enable-deepep-moe", "enable-ep-moe",
}
INTS = {
    "port", "tp-size", "tensor-parallel-size", "dp-size", "data-parallel-size", "pp-size", "pipeline-parallel-size",
    "ep-size", "expert-parallel-size", "base-gpu-id", "gpu-id-step", "disaggregation-bootstrap-port",
    "max-running-requests", "max-queued-requests", "max-total-tokens", "chunked-prefill-size", "max-prefill-tokens",
    "context-length", "page-size", "nnodes", "node-rank", "random-seed", "cuda-graph-max-bs", "stream-interval",
    "tokenizer-worker-num", "context-parallel-size", "disaggregation-decode-tp", "disaggregation-decode-dp",
    "disaggregation-prefill-pp", "num-reserved-decode-tokens", "max-micro-batch-size", "moe-dense-tp-size",
    "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens", "max-lora-rank",
    "max-loras-per-batch", "ep-num-redundant-experts", "torch-compile-max-bs", "hicache-size", "decode-log-interval",
    "watchdog-timeout", "dist-timeout", "num-continuous-decode-steps", "triton-attention-num-kv-splits",
}
FLOATS = {"mem-fraction-static", "schedule-conservativeness", "hicache-ratio", "swa-full-tokens-ratio"}
VALUES = {
    "model-path", "model", "tokenizer-path", "tokenizer-mode", "load-format", "model-loader-extra-config", "revision",
    "model-impl", "host", "dtype", "quantization", "quantization-param-path", "kv-cache-dtype", "schedule-policy",
    "device", "served-model-name", "chat-template", "completion-template", "reasoning-parser", "tool-call-parser",
    "load-balance-method", "dist-init-addr", "json-model-override-args", "preferred-sampling-params",
    "attention-backend", "prefill-attention-backend", "decode-attention-backend", "sampling-backend",
    "grammar-backend", "speculative-algorithm", "speculative-draft-model-path", "moe-a2a-backend",
    "moe-runner-backend", "deepep-mode", "init-expert-location", "eplb-algorithm", "hicache-write-policy",
    "hicache-storage-backend", "disaggregation-mode", "disaggregation-transfer-backend", "disaggregation-ib-device",
    "kv-events-config", "api-key", "file-storage-path", "download-dir", "log-level", "log-level-http",
    "crash-dump-folder", "torchao-config", "lora-backend", "mamba-ssm-dtype", "cuda-graph-bs", "lora-paths",
    "lora-target-modules", "warmups",
}
ALIASES = {"tensor-parallel-size": "tp-size", "data-parallel-size": "dp-size", "pipeline-parallel-size": "pp-size",
           "expert-parallel-size": "ep-size", "model": "model-path"}
MODES = ("prefill", "decode", "null")


def command_line(engine_config: dict, role: str, host: str, port: int) -> list[str]:
    """PyMotor's SGLangConfig._get_param_list: engine_config + host, port, disaggregation-mode, as CLI arguments."""
    flat = dict(engine_config)
    flat["host"], flat["port"] = host, port
    flat["disaggregation_mode"] = {"prefill": "prefill", "decode": "decode"}.get(role, "null")
    argv = []
    for key, value in flat.items():
        if key in ("engine_type", "kv_transfer_config"):
            continue
        key = key.replace("_", "-")
        if isinstance(value, bool):
            if value:
                argv.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                argv += [f"--{key}", *map(str, value)]
        elif isinstance(value, dict):
            argv += [f"--{key}", json.dumps(value)]
        else:
            argv += [f"--{key}", str(value)]
    return argv


def parse(argv: list[str]) -> dict:
    """SGLang's parser, stand-in subset: {option: value} (flags True); fail() like argparse on bad input."""
    args, unknown, i = {}, [], 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--"):
            unknown.append(token)
            i += 1
            continue
        name = token[2:]
        if name in FLAGS:
            args[ALIASES.get(name, name)] = True
            i += 1
            continue
        if name not in INTS | FLOATS | VALUES:
            unknown.append(token)
            i += 1
            continue
        values = []
        i += 1
        while i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        if not values:
            fail(COMPONENT, f"serve: error: argument {token}: expected one argument")
        if name not in ("lora-paths", "lora-target-modules", "cuda-graph-bs", "warmups") and len(values) > 1:
            unknown.extend(values[1:])
        value = values[0]
        try:
            value = int(value) if name in INTS else float(value) if name in FLOATS else value
        except ValueError:
            kind = "int" if name in INTS else "float"
            fail(COMPONENT, f"serve: error: argument {token}: invalid {kind} value: {value!r}")
        args[ALIASES.get(name, name)] = value
    if unknown:
        fail(COMPONENT, f"serve: error: unrecognized arguments: {' '.join(unknown)}")
    if "model-path" not in args:
        fail(COMPONENT, "serve: error: the following arguments are required: --model-path")
    if args.get("disaggregation-mode", "null") not in MODES:
        fail(COMPONENT, f"serve: error: argument --disaggregation-mode: invalid choice: {args['disaggregation-mode']!r}")
    return args


def npus_needed(args: dict) -> int:
    tp, pp, dp = args.get("tp-size", 1), args.get("pp-size", 1), args.get("dp-size", 1)
    return tp * pp * (1 if args.get("enable-dp-attention") else dp)


def engine_npus(engine_config: dict) -> int:
    """NPUs one SGLang server uses, from the engine_config (the node manager sizes its check with it)."""
    sizes = {k: int(cfg_get(engine_config, k.replace("-", "_"), 1)) for k in ("tp-size", "pp-size", "dp-size")}
    sizes["enable-dp-attention"] = cfg_get(engine_config, "enable_dp_attention") is True
    return npus_needed(sizes)


def check_devices(args: dict) -> list[str]:
    """The NPUs of this server: logical ids (0..n-1 over the container's /dev/davinci<N>, as the CANN runtime
    numbers them) from ``base-gpu-id`` on, or the ASCEND_RT_VISIBLE_DEVICES the node manager set with multi
    endpoints; an id beyond the container's devices fails like an invalid device id on a real host."""
    need = npus_needed(args)
    visible = [d for d in os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",") if d]
    if visible:  # multi endpoints: the node manager picked this server's NPUs
        ids = visible
    else:
        base, step = args.get("base-gpu-id", 0), args.get("gpu-id-step", 1)
        ids = [str(base + i * step) for i in range(need)]
    npus = container_npus()
    bad = [d for d in ids if not d.isdigit() or int(d) >= len(npus)]
    if len(ids) != need or bad:
        fail(COMPONENT, f"NPU check failed: {need} device(s) needed (tp x pp{'' if args.get('enable-dp-attention') else ' x dp'}"
                        f"), logical ids {ids} over the container's devices {npus}; invalid: {bad}")
    return [npus[int(d)] for d in ids]


def register_mf_store(role: str, ip: str) -> None:
    """Memfabric (ascend transfer backend) needs its config store: ASCEND_MF_STORE_URL must answer."""
    url = os.environ.get("ASCEND_MF_STORE_URL", "")
    match = re.match(r"^(?:tcp://)?([^:/]+):(\d+)$", url)
    if not match:
        fail(COMPONENT, f"disaggregation-transfer-backend ascend needs ASCEND_MF_STORE_URL=tcp://<ip>:<port>, got {url!r}")
    deadline, last = time.monotonic() + MF_STORE_WAIT, ""
    while True:
        try:
            with socket.create_connection((match.group(1), int(match.group(2))), timeout=2) as conn:
                conn.sendall(f"HELLO {role} {ip}\n".encode())
                answer = conn.makefile().readline().strip()
            if answer.startswith("OK"):
                log(COMPONENT, "registered with the memfabric config store", url=url, answer=answer)
                return
            last = answer
        except OSError as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            fail(COMPONENT, f"memfabric config store {url} did not answer within {MF_STORE_WAIT:.0f} s: {last}")
        time.sleep(1)


class SGLangServer:
    def __init__(self, cli, args: dict, tokenizer):
        self.cli, self.args, self.tokenizer = cli, args, tokenizer
        self.model = args.get("served-model-name") or args["model-path"]
        self.mode = args.get("disaggregation-mode", "null")
        self.status = "initial"
        self.requests = 0

    def routes(self) -> dict:
        return {("POST", "/v1/chat/completions"): self.complete, ("POST", "/v1/completions"): self.complete,
                ("GET", "/v1/models"): lambda *_: (200, {"object": "list", "data": [{"id": self.model}]}),
                ("GET", "/metrics"): self.metrics}

    def mgmt_routes(self) -> dict:
        return {("GET", "/status"): lambda *_: (200, {"status": self.status}), ("GET", "/metrics"): self.metrics}

    def bootstrap_routes(self) -> dict:
        ip = os.environ.get("SGLANG_HOST_IP") or self.cli.host
        info = {"rank_ip": ip, "rank_port": self.cli.port, "dp_rank": self.cli.dp_rank, "model": self.model}
        return {("GET", "/route"): lambda *_: (200, info), ("GET", "/health"): lambda *_: (200, {"status": "ok"})}

    def metrics(self, *_) -> tuple:
        return 200, f'sglang:num_requests_total{{model_name="{self.model}"}} {float(self.requests)}\n'

    def complete(self, body: dict, _handler) -> tuple:
        if self.mode != "null":
            missing = [k for k in ("bootstrap_host", "bootstrap_port", "bootstrap_room") if body.get(k) in (None, "")]
            if missing:
                return 400, {"object": "error", "message": f"disaggregation mode {self.mode}: request without "
                             f"{', '.join(missing)} (PD dual dispatch sets them)"}
        if self.mode == "decode":
            url = f"http://{body['bootstrap_host']}:{body['bootstrap_port']}/route"
            status, route = http_json("GET", url, timeout=2)
            if status != 200:
                return 500, {"object": "error", "message": f"KV receiver: prefill bootstrap server {url} unreachable "
                             f"(HTTP {status}: {route})"}
        tokens = self.tokenizer.encode_request(body)
        self.requests += 1
        answer = (f"stand-in sglang {self.cli.role} instance {self.cli.instance_id} dp {self.cli.dp_rank}: "
                  f"{len(tokens)} prompt tokens")
        return 200, {
            "id": uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()), "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
        }


def run(cli, engine_config: dict, tokenizer_class) -> None:
    """engine_server for engine_type sglang; ``cli`` is engine_server's parsed command line."""
    argv = command_line(engine_config, cli.role, cli.host, cli.port)
    log(COMPONENT, "engine server sglang arg_list", arg_list=argv)
    args = parse(argv)
    devices = check_devices(args)
    log(COMPONENT, "NPUs found", devices=devices, dp_rank=cli.dp_rank, instance_id=cli.instance_id)
    try:
        tokenizer = tokenizer_class(args["model-path"])
    except FileNotFoundError as exc:
        fail(COMPONENT, str(exc))
    server = SGLangServer(cli, args, tokenizer)
    if server.mode != "null" and args.get("disaggregation-transfer-backend", "mooncake") == "ascend":
        register_mf_store(cli.role, os.environ.get("SGLANG_HOST_IP") or cli.host)
    if server.mode == "prefill":
        serve(f"{COMPONENT}-bootstrap", args.get("disaggregation-bootstrap-port", DEFAULT_BOOTSTRAP_PORT),
              server.bootstrap_routes(), host=cli.host)
    serve(f"{COMPONENT}-{cli.dp_rank}", cli.port, server.routes(), host=cli.host, tls="infer")
    serve(f"{COMPONENT}-{cli.dp_rank}-mgmt", cli.mgmt_port, server.mgmt_routes(), host=cli.host, tls="mgmt")
    server.status = "normal"
    log(COMPONENT, "engine ready", role=cli.role, mode=server.mode, dp_rank=cli.dp_rank, port=cli.port,
        mgmt_port=cli.mgmt_port)
    wait_forever()
