"""Fake inference engine for the conformance image: the one part of a real PyMotor image that cannot run here.

The REAL node manager (motor.node_manager) spawns it as ``engine_server`` (this package's script sits ahead of the
wheel's console script on PATH) with its exact command line. It answers what the real control plane calls:
- mgmt port: GET /status (drives readiness), GET /metrics (vLLM-named prefix-cache counters), GET /health;
  a busy engine: ``MOTOR_SIM_METRICS_SECONDS=<s>`` in its environment, or ``<s>`` written to ``METRICS_DELAY_FILE``
  inside one running engine's container (re-read at every request), makes its /metrics (both ports) answer s seconds
  late while it serves (upstream's collector gives an engine 2 s);
- business port: OpenAI chat/completions (streaming too), /tokenize, /v1/models, /health, /metrics,
  POST /reset_prefix_cache (only with VLLM_SERVER_DEV_MODE=1, as vLLM);
- time and cache: the stand-in's performance model (tests/sim/motor_image/motor_sim/perf.py: bounded LRU prefix
  cache publishing BlockStored/BlockRemoved, one prefill at a time growing with the uncached prompt tokens, decode
  time per output token, a limited number of running requests, the rest waiting; knobs MOTOR_SIM_* from the
  engine's environment, i.e. env.json's engine sections). Not NPU numbers;
- P/D: a decode request carrying ``kv_transfer_params.metaserver`` makes this engine POST the hand-off to the
  coordinator's metaserver (vLLM's connector does it on a real D), which drives the prefill leg on a P engine;
- KV events: vLLM's array-shaped msgpack over ZMQ PUB (+ replay ROUTER), reusing the stand-in engine's publisher
  (tests/sim/motor_image/motor_sim/kv_events.py), so the real Mooncake conductor indexes what this engine caches.
Tokens come from the model directory's tokenizer (transformers AutoTokenizer + chat template), as vLLM's do, so the
real coordinator (which loads the same tokenizer for KV-cache affinity) computes the same block hashes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from motor_sim.common import cfg_get, engine_section, load_user_config
from motor_sim.kv_events import KvEventPublisher
from motor_sim.perf import EngineModel

DEFAULT_BLOCK_SIZE = 128
METRICS_DELAY_FILE = "/tmp/motor_sim_metrics_seconds"


def metrics_delay() -> float:
    """Seconds this engine's /metrics answers late: the file's number, else MOTOR_SIM_METRICS_SECONDS, else 0."""
    try:
        with open(METRICS_DELAY_FILE) as handle:
            return float(handle.read().strip() or 0)
    except (OSError, ValueError):
        return float(os.environ.get("MOTOR_SIM_METRICS_SECONDS") or 0)


def log(message: str, **fields) -> None:
    suffix = f" {json.dumps(fields, sort_keys=True, default=str)}" if fields else ""
    print(f"[conformance-engine] {message}{suffix}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The node manager's command line (motor/node_manager/core/daemon.py); an unknown option is an error."""
    p = argparse.ArgumentParser(prog="engine_server")
    for name in ("--dp-rank", "--port", "--mgmt-port"):
        p.add_argument(name, type=int, required=True)
    for name in ("--instance-id", "--host", "--master-dp-ip", "--config-path"):
        p.add_argument(name, required=True)
    p.add_argument("--role", choices=["prefill", "decode", "union", "encode"], required=True)
    p.add_argument("--node-rank", type=int, default=0)
    for name in ("--kv-port", "--dp-rpc-port", "--lookup-rpc-port"):
        p.add_argument(name, type=int)
    p.add_argument("--d2d-peer-ips")
    return p.parse_args(argv)


class Engine:
    def __init__(self, args: argparse.Namespace, engine_config: dict):
        self.args = args
        model_dir = cfg_get(engine_config, "model", "")
        self.model = cfg_get(engine_config, "served_model_name") or model_dir
        # transformers imports slowly: only engines load it.
        from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)  # fails like vLLM without a tokenizer
        self.perf = EngineModel(engine_config, int(cfg_get(engine_config, "block_size", DEFAULT_BLOCK_SIZE)))
        events = cfg_get(engine_config, "kv_events_config") or {}
        if isinstance(events, str):
            events = json.loads(events)
        self.publisher = None
        if events.get("enable_kv_cache_events") and events.get("publisher", "zmq") == "zmq":
            self.publisher = KvEventPublisher("conformance-engine", events.get("endpoint", "tcp://*:5557"),
                                              events.get("replay_endpoint"), events.get("topic", ""), args.dp_rank)
        self.status = "initial"

    def tokens(self, body: dict) -> list[int]:
        if "messages" in body:
            ids = self.tokenizer.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=True)
            return list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # transformers 5 returns a BatchEncoding
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):
            return [int(t) for t in prompt] if prompt and isinstance(prompt[0], int) else \
                self.tokenizer.encode("".join(prompt), add_special_tokens=False)
        return self.tokenizer.encode(str(prompt), add_special_tokens=False)

    def metrics(self) -> str:
        return "\n".join(self.perf.metrics(f'{{model_name="{self.model}",engine="{self.args.dp_rank}"}}')) + "\n"

    def publish(self, events: list) -> None:
        if events and self.publisher:
            self.publisher.publish(events)

    def complete(self, path: str, body: dict, request_id: str, emit=None) -> dict:
        """One completion; a decode leg first hands off to the coordinator's metaserver (the prefill leg).
        ``emit(tokens)`` is called as each chunk of output tokens is produced (streaming)."""
        kv = body.get("kv_transfer_params") or {}
        chat = path.endswith("/chat/completions")
        vllm_id = f"chatcmpl-{request_id}" if chat else f"cmpl-{request_id}-0"
        prefill = None
        if self.args.role == "decode" and kv.get("do_remote_prefill") and kv.get("metaserver"):
            handoff = {"request_id": vllm_id, "do_remote_decode": True, "do_remote_prefill": False,
                       "remote_engine_id": f"{self.args.instance_id}-{self.args.dp_rank}",
                       "remote_host": self.args.host, "remote_port": self.args.port}
            req = urllib.request.Request(kv["metaserver"], data=json.dumps(handoff).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "X-Request-Id": request_id})
            with urllib.request.urlopen(req, timeout=60) as resp:
                prefill = json.loads(resp.read() or b"{}")
            log("metaserver hand-off answered", request_id=request_id, metaserver=kv["metaserver"])
        tokens = self.tokens(body)
        with self.perf.slot():
            cached, events = self.perf.prefill(tokens, remote=prefill is not None)
            self.publish(events)
            output = self.perf.output_tokens(body)
            steps = self.perf.decode_steps(output)
            first = next(steps)
            if emit is not None:
                emit(first)
                for step in steps:
                    emit(step)
            else:
                for _step in steps:
                    pass
        a = self.args
        text = f"conformance {a.role} instance {a.instance_id} dp {a.dp_rank}: {len(tokens)} prompt tokens"
        usage = {"prompt_tokens": len(tokens), "completion_tokens": output, "total_tokens": len(tokens) + output,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        choice = {"index": 0, "finish_reason": "stop", "logprobs": None}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        result = {"id": vllm_id, "object": "chat.completion" if chat else "text_completion",
                  "created": int(time.time()), "model": body.get("model") or self.model, "choices": [choice],
                  "usage": usage}
        if a.role == "prefill":
            result["kv_transfer_params"] = {"do_remote_prefill": True, "do_remote_decode": False,
                                            "remote_engine_id": f"{a.instance_id}-{a.dp_rank}",
                                            "remote_host": a.host, "remote_port": a.port,
                                            "remote_block_ids": [], "request_id": vllm_id}
        if prefill is not None:
            log("decode after prefill", prefill_id=prefill.get("id"))
        return result


def handler_for(engine: Engine, mgmt: bool):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload, content_type: str = "application/json") -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            path = self.path.split("?", 1)[0]
            if path == "/status" and mgmt:
                self._send(200, {"status": engine.status})
            elif path == "/metrics":
                delay = metrics_delay()
                if delay > 0:
                    time.sleep(delay)
                self._send(200, engine.metrics(), "text/plain; version=0.0.4")
            elif path == "/health":
                self._send(200 if engine.status == "normal" else 503, "")
            elif path == "/v1/models" and not mgmt:
                self._send(200, {"object": "list", "data": [{"id": engine.model, "object": "model"}]})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(400, {"detail": "invalid JSON"})
                return
            if mgmt:
                self._send(404, {"detail": "Not Found"})
            elif path == "/tokenize":
                tokens = engine.tokens(body)
                self._send(200, {"tokens": tokens, "count": len(tokens), "max_model_len": 32768})
            elif path == "/reset_prefix_cache":
                status, answer, events = engine.perf.reset()
                engine.publish(events)
                self._send(status, answer)
            elif path in ("/v1/chat/completions", "/v1/completions"):
                rid = self.headers.get("X-Request-Id") or uuid.uuid4().hex
                log("request", path=path, request_id=rid, kv_transfer_params=body.get("kv_transfer_params"),
                    max_tokens=body.get("max_tokens"), stream=body.get("stream"))
                chat = path.endswith("/chat/completions")
                stream = _Stream(self, chat, rid, body, engine.model) if body.get("stream") else None
                try:
                    result = engine.complete(path, body, rid, emit=stream.emit if stream else None)
                except OSError as exc:  # the metaserver hand-off failed: the request fails, as on vLLM
                    self._send(500, {"error": {"message": f"remote prefill failed: {exc}"}})
                    return
                if stream:
                    stream.finish(result)
                else:
                    self._send(200, result)
            else:
                self._send(404, {"detail": "Not Found"})

        def log_message(self, *args) -> None:
            pass

    return Handler


class _Stream:
    """vLLM's server-sent events: a chunk per emitted piece of output, the finish reason, with
    ``stream_options.include_usage`` a last chunk carrying the usage, then ``[DONE]``."""

    def __init__(self, handler, chat: bool, request_id: str, body: dict, model: str):
        self.handler, self.chat, self.body, self.model = handler, chat, body, model
        self.id = f"chatcmpl-{request_id}" if chat else f"cmpl-{request_id}-0"
        self.started = False

    def _chunk(self, choices: list, **extra) -> None:
        data = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": int(time.time()), "model": self.body.get("model") or self.model, "choices": choices, **extra}
        self.handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.handler.wfile.flush()

    def emit(self, tokens: int) -> None:
        if not self.started:
            self.handler.send_response(200)
            self.handler.send_header("Content-Type", "text/event-stream")
            self.handler.send_header("Connection", "close")
            self.handler.end_headers()
            self.started = True
        text = " tok" * tokens
        piece = {"delta": {"content": text}} if self.chat else {"text": text}
        self._chunk([{"index": 0, "logprobs": None, "finish_reason": None, **piece}])

    def finish(self, result: dict) -> None:
        choice = dict(result["choices"][0])
        if self.chat:
            choice["delta"] = {"content": ""}
            choice.pop("message", None)
        else:
            choice["text"] = ""
        extra = {k: result[k] for k in ("kv_transfer_params",) if k in result}
        self._chunk([choice], **extra)
        if (self.body.get("stream_options") or {}).get("include_usage"):
            self._chunk([], usage=result["usage"])
        self.handler.wfile.write(b"data: [DONE]\n\n")
        self.handler.close_connection = True


def serve(host: str, port: int, handler) -> None:
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    log("argv", argv=sys.argv)
    engine_config = engine_section(load_user_config(args.config_path), args.role).get("engine_config") or {}
    engine = Engine(args, engine_config)
    serve(args.host, args.port, handler_for(engine, mgmt=False))
    serve(args.host, args.mgmt_port, handler_for(engine, mgmt=True))
    load = float(os.environ.get("MOTOR_SIM_LOAD_SECONDS") or 0)  # a model load: /status says initial meanwhile
    if load > 0:
        log("loading the model", seconds=load)
        time.sleep(load)
    engine.status = "normal"
    log("engine ready", role=args.role, dp_rank=args.dp_rank, port=args.port, mgmt_port=args.mgmt_port)
    threading.Event().wait()


if __name__ == "__main__":
    main()
