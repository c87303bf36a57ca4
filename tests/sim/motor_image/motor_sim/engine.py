"""engine_server stand-in: one per DP rank, spawned by the node manager.

OpenAI API, vLLM's POST /tokenize, POST /reset_prefix_cache (VLLM_SERVER_DEV_MODE=1 only) and GET /metrics
(prefix-cache counters, running/waiting gauges) on --port, GET /status and
GET /metrics on --mgmt-port (PyMotor's engine_server), KV events (PUB on endpoint port + dp_rank,
replay ROUTER on replay port + dp_rank) when the engine section enables kv-events-config. It checks
the NPUs it was given (ASCEND_RT_VISIBLE_DEVICES: logical ids over the container's /dev/davinci<N>) and the model directory.
With engine_type sglang in its section it runs the SGLang stand-in instead (motor_sim/sglang.py).
Its time and cache follow the performance model of motor_sim/perf.py (bounded LRU prefix cache, one prefill at a
time growing with the uncached prompt tokens, decode time per output token, a limited number of running requests);
the model and its numbers are in that module's docstring. The answer is not streamed (the whole completion once).
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

from motor_sim.common import (
    cfg_get,
    configure_tls,
    container_npus,
    engine_section,
    fail,
    install_fault_knobs,
    load_user_config,
    log,
    log_received,
    serve,
    wait_forever,
)
from motor_sim import sglang
from motor_sim.kv_events import KvEventPublisher
from motor_sim.perf import EngineModel
from motor_sim.tokenizer import Tokenizer

COMPONENT = "engine"
DEFAULT_BLOCK_SIZE = 128


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="engine_server")
    p.add_argument("--dp-rank", type=int, required=True)
    p.add_argument("--instance-id", required=True)
    p.add_argument("--role", choices=["prefill", "decode", "union", "encode"], required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mgmt-port", type=int, required=True)
    p.add_argument("--master-dp-ip", required=True)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--config-path", required=True)
    # what upstream's node manager adds in a single container (daemon.py:135-139; endpoint.py parse_cli_args)
    p.add_argument("--kv-port", type=int)
    p.add_argument("--dp-rpc-port", type=int)
    p.add_argument("--lookup-rpc-port", type=int)
    return p.parse_args(argv)


def check_devices(engine_config: dict) -> list[str]:
    """The NPUs of this rank (tp * pp of them): ASCEND_RT_VISIBLE_DEVICES holds logical ids, 0..n-1 over the
    devices the container was given (a container with /dev/davinci4..7 has logical 0..3), as the CANN runtime reads
    it; an id beyond the container's devices fails like an invalid device id on a real host."""
    visible = [d for d in os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",") if d]
    need = int(cfg_get(engine_config, "tensor_parallel_size", 1)) * int(cfg_get(engine_config, "pipeline_parallel_size", 1))
    npus = container_npus()
    bad = [d for d in visible if not d.isdigit() or int(d) >= len(npus)]
    if len(visible) != need or bad:
        fail(COMPONENT, f"NPU check failed: ASCEND_RT_VISIBLE_DEVICES={','.join(visible)!r} needs {need} logical "
                        f"device id(s) (tp*pp) below {len(npus)} (the container's devices {npus}); invalid: {bad}")
    return [npus[int(d)] for d in visible]


class Engine:
    def __init__(self, args: argparse.Namespace, engine_config: dict):
        self.args = args
        self.model = cfg_get(engine_config, "served_model_name") or cfg_get(engine_config, "model")
        try:
            self.tokenizer = Tokenizer(cfg_get(engine_config, "model", ""))
        except FileNotFoundError as exc:
            fail(COMPONENT, str(exc))
        self.perf = EngineModel(engine_config, int(cfg_get(engine_config, "block_size", DEFAULT_BLOCK_SIZE)))
        self.publisher = self._publisher(cfg_get(engine_config, "kv_events_config") or {})
        self.status = "initial"
        self.max_model_len = int(cfg_get(engine_config, "max_model_len", 2048))

    def _publisher(self, events_cfg: dict) -> KvEventPublisher | None:
        if not events_cfg.get("enable_kv_cache_events") or events_cfg.get("publisher", "zmq") != "zmq":
            return None
        return KvEventPublisher(COMPONENT, events_cfg.get("endpoint", "tcp://*:5557"), events_cfg.get("replay_endpoint"),
                                events_cfg.get("topic", ""), self.args.dp_rank)

    def routes(self) -> dict:
        return {("POST", "/v1/chat/completions"): self.complete, ("POST", "/v1/completions"): self.complete,
                ("POST", "/tokenize"): self.tokenize, ("GET", "/metrics"): self.metrics,
                ("POST", "/reset_prefix_cache"): self.reset_prefix_cache,
                ("GET", "/v1/models"): lambda *_: (200, {"object": "list", "data": [{"id": self.model}]})}

    def mgmt_routes(self) -> dict:
        return {("GET", "/status"): lambda *_: (200, {"status": self.status}), ("GET", "/metrics"): self.metrics}

    def tokenize(self, body: dict, _handler) -> tuple:
        """vLLM's POST /tokenize: {"count", "max_model_len", "tokens"} of a prompt or of rendered chat messages."""
        tokens = self.tokenizer.encode_request(body)
        return 200, {"count": len(tokens), "max_model_len": self.max_model_len, "tokens": tokens, "token_strs": None}

    def metrics(self, *_) -> tuple:
        """vLLM's prefix-cache counters and scheduler gauges in Prometheus text (motor_sim/perf.py)."""
        return 200, "\n".join(self.perf.metrics(f'{{engine="0",model_name="{self.model}"}}')) + "\n"

    def reset_prefix_cache(self, *_) -> tuple:
        status, body, events = self.perf.reset()
        self._publish(events)
        return status, body

    def _publish(self, events: list) -> None:
        if events and self.publisher:
            self.publisher.publish(events)

    def complete(self, body: dict, _handler) -> tuple:
        tokens = self.tokenizer.encode_request(body)
        output = self.perf.output_tokens(body)
        remote = bool((body.get("kv_transfer_params") or {}).get("do_remote_prefill")) and self.args.role == "decode"
        with self.perf.slot():
            cached, events = self.perf.prefill(tokens, remote=remote)
            self._publish(events)
            for _step in self.perf.decode_steps(output):
                pass
        a = self.args
        answer = f"stand-in {a.role} instance {a.instance_id} dp {a.dp_rank}: {len(tokens)} prompt tokens"
        result = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": output, "total_tokens": len(tokens) + output,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        }
        if a.role == "prefill":
            # What vLLM's PD connectors hand back for the decode step.
            result["kv_transfer_params"] = {"remote_engine_id": a.instance_id, "remote_host": a.host,
                                            "remote_dp_rank": a.dp_rank, "do_remote_prefill": True}
        return 200, result


def main(argv: list[str] | None = None) -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    args = parse_args(argv)
    user_config = load_user_config(args.config_path)
    configure_tls(COMPONENT, user_config)
    engine = engine_section(user_config, args.role)
    engine_config = engine.get("engine_config") or {}
    if engine.get("engine_type") == "sglang":  # PyMotor's SGLangConfig / SGLangEngine path
        sglang.run(args, engine_config, Tokenizer)
        return
    devices = check_devices(engine_config)
    mooncake = os.environ.get("MOONCAKE_CONFIG_PATH")
    if mooncake and not os.path.isfile(mooncake):  # PyMotor's gen_kv_pool_config exports it even when it failed
        fail(COMPONENT, f"Mooncake store config MOONCAKE_CONFIG_PATH={mooncake} does not exist")
    log(COMPONENT, "NPUs found", devices=devices, dp_rank=args.dp_rank, instance_id=args.instance_id)
    engine = Engine(args, engine_config)
    serve(f"{COMPONENT}-{args.dp_rank}", args.port, engine.routes(), host=args.host, tls="infer")
    serve(f"{COMPONENT}-{args.dp_rank}-mgmt", args.mgmt_port, engine.mgmt_routes(), host=args.host, tls="mgmt")
    load = float(os.environ.get("MOTOR_SIM_LOAD_SECONDS") or 0)  # a model load: /status says initial meanwhile
    if load > 0:
        log(COMPONENT, "loading the model", seconds=load)
        time.sleep(load)
    engine.status = "normal"
    log(COMPONENT, "engine ready", role=args.role, dp_rank=args.dp_rank, port=args.port, mgmt_port=args.mgmt_port)
    wait_forever()


if __name__ == "__main__":
    main()
