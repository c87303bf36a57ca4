"""Coordinator stand-in (python3 -m motor.coordinator.main).

Ports from motor_coordinator_config.api_config: inference 1025 (OpenAI /v1/chat/completions),
management 1026 (/readiness, /instances/refresh), observability 1027 (/metrics; ?type=dp: every engine metric of the
instances it routes to, labelled with dp_rank, role, instance_id and pod_ip, as upstream's metrics collector).
Ready when the controller pushed the instances the mode needs: P and D, only P (degraded), or U.
With scheduler_type kv_cache_affinity and KV_CONDUCTOR_SERVICE set it loads the tokenizer from the
model directory, registers every prefill (or union) DP rank with the conductor (POST /register,
as PyMotor's conductor_api_client) and routes each request to the prefill endpoint that the
conductor's POST /query reports with the longest match (PyMotor's "unified" score), falling back
to round robin. SGLang jobs (engine_type sglang) get PyMotor's PD dual dispatch (prefill and decode at once,
with the bootstrap host/port/room). Like the real coordinator, responses say nothing about the instance that served them
(X-Request-Id only): that shows in the conductor's /query and the engines' prefix-cache counters.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import random
import threading
import time
import uuid

from motor_sim.common import (
    cfg_get,
    configure_tls,
    coordinator_ports,
    engine_section,
    fail,
    http_json,
    install_fault_knobs,
    load_user_config,
    log,
    log_received,
    scheme,
    section,
    serve,
    wait_forever,
)
from motor_sim.tokenizer import Tokenizer

COMPONENT = "coordinator"
UNAVAILABLE = (503, {"detail": "Service is not available"})


# PyMotor's PrefillKvEventConfig defaults (motor/config/coordinator.py)
KV_EVENT_DEFAULTS = {"http_server_port": 13333, "block_size": 128, "endpoint": "", "replay_endpoint": "",
                     "engine_type": "vLLM", "model_path": ""}


# APIKeyConfig.skip_paths' default (motor/config/coordinator.py:66-79 _default_skip_paths)
DEFAULT_SKIP_PATHS = {"/", "/startup", "/readiness", "/liveness", "/metrics", "/instances/refresh", "/docs",
                      "/redoc", "/openapi.json", "/favicon.ico"}


class ApiKeyCheck:
    """Upstream's InferenceServer.verify_api_key (motor/coordinator/api_server/inference_server.py:208-229), which
    only the inference routes call (353-382; not /v1/models): nothing when enable_api_key is off or the path is in
    skip_paths; 401 without the header_name header; the key is the header value without key_prefix (when it starts
    with it); accepted when it is one of valid_keys as written (224) or matches one in PBKDF2 form
    "salt:iterations:hash" (226, common/http/key_encryption.py PBKDF2KeyEncryption.verify_key); 403 otherwise."""

    def __init__(self, user_config: dict):
        cfg = section(user_config, "motor_coordinator_config", "api_key_config")
        self.enabled = bool(cfg.get("enable_api_key", False))
        self.valid_keys = list(cfg.get("valid_keys") or [])
        self.header_name = cfg.get("header_name", "Authorization")
        self.key_prefix = cfg.get("key_prefix", "Bearer ")
        # set as written (update_config_from_dict, coordinator.py:396-403: setattr, so encryption_algorithm from the
        # file is never applied: PBKDF2_SHA256, set up by __post_init__ with the defaults, is what verifies)
        self.skip_paths = set(cfg["skip_paths"] if "skip_paths" in cfg else DEFAULT_SKIP_PATHS)
        if self.enabled:
            log(COMPONENT, "API key authentication on", keys=len(self.valid_keys), header_name=self.header_name)

    @staticmethod
    def _pbkdf2_match(plain: str, stored: str) -> bool:
        parts = str(stored).split(":", 2)
        if not plain or len(parts) != 3:
            return False
        try:
            derived = hashlib.pbkdf2_hmac("sha256", plain.encode("utf-8"), parts[0].encode("utf-8"), int(parts[1]),
                                          dklen=32)
        except ValueError:
            return False
        return hmac.compare_digest(derived.hex(), parts[2])

    def refusal(self, handler) -> tuple | None:
        """None when the request may pass, else upstream's answer (status, body, headers)."""
        if not self.enabled or handler.path.split("?", 1)[0] in self.skip_paths:
            return None
        authorization = handler.headers.get(self.header_name)
        if not authorization:
            log(COMPONENT, "API Key validation failed: missing Authorization header")
            return 401, {"detail": "Missing Authorization header"}, {"WWW-Authenticate": "Bearer"}
        api_key = authorization
        if self.key_prefix and authorization.startswith(self.key_prefix):
            api_key = authorization[len(self.key_prefix):]
        if api_key in self.valid_keys or any(self._pbkdf2_match(api_key, key) for key in self.valid_keys):
            return None
        log(COMPONENT, "API Key validation failed: invalid key")
        return 403, {"detail": "Invalid API Key"}


def kv_event_config(user_config: dict) -> dict:
    """prefill_kv_event_config as PyMotor's coordinator reads it: the dataclass defaults, then
    motor_coordinator_config.prefill_kv_event_config, REPLACED whole by config_utils._update_prefill_kv_event_config
    when motor_engine_prefill_config.engine_config has the raw key "kv-events-config" (hyphens only: "kv_events_config"
    is not read; block size from the raw "block-size" only; kv_conductor_config.http_server_port must exist, else the
    derivation is dropped with a warning). Union-only configs have no prefill section: the explicit section stays."""
    cfg = dict(section(user_config, "motor_coordinator_config", "prefill_kv_event_config"))
    try:
        prefill = user_config["motor_engine_prefill_config"]
        engine = prefill["engine_config"]
        events = engine.get("kv-events-config")
        if isinstance(events, dict):
            model_path = cfg_get(engine, "model_path") or cfg_get(engine, "model") or \
                (prefill.get("model_config") or {}).get("model_path") or ""
            cfg = {"endpoint": events.get("endpoint", ""), "replay_endpoint": events.get("replay_endpoint", ""),
                   "block_size": engine.get("block-size", 128),
                   "http_server_port": user_config["kv_conductor_config"]["http_server_port"], "model_path": model_path}
        else:
            log(COMPONENT, "kv_events_config is None")
    except (KeyError, TypeError, AttributeError) as exc:
        log(COMPONENT, f"Failed to get prefill config: {exc!r}")
    out = {**KV_EVENT_DEFAULTS, **{k: v for k, v in cfg.items() if k in KV_EVENT_DEFAULTS}}
    out["block_size"] = int(out["block_size"])
    # stand-in only: the model name the conductor is queried with (the real one takes the instance's model_name)
    role = "prefill" if engine_section(user_config, "prefill") else "union"
    out["model_name"] = cfg_get(engine_section(user_config, role).get("engine_config") or {}, "served_model_name")
    return out


def conductor_endpoint(template: str | None, ip: str, dp_rank: int) -> str | None:
    """tcp://*:5557 -> tcp://<ip>:<5557+dp_rank>; other shapes are skipped, like PyMotor."""
    if not template or "*:" not in template:
        return None
    prefix, port = template.split("*:", 1)
    return f"{prefix}{ip}:{int(port) + dp_rank}"


class Conductor:
    """Client of the Mooncake conductor: registration of P/U ranks and prefix queries. Like PyMotor's coordinator
    (instance_manager._add_instances -> conductor_api_client.register_post) it registers each rank of an instance
    once, when the instance is added, with a 2 s timeout: a failed registration is logged and never retried."""

    def __init__(self, service: str, cfg: dict):
        self.cfg = cfg
        self.base = f"http://{service}:{cfg['http_server_port']}"
        self.registered: dict[tuple, dict] = {}  # (instance id, dp_rank) -> /register body (sent once)
        self.lock = threading.Lock()

    @staticmethod
    def instance_id(instance: dict) -> str:
        return f"vllm-prefill-{instance['id']}"

    def sync(self, instances: list[dict]) -> None:
        """Register the ranks of added P/U instances, unregister those of deleted ones."""
        wanted = {}
        for inst in instances:
            if inst["role"] not in ("prefill", "union"):
                continue
            for ep in inst["endpoints"]:
                body = self._register_body(inst, ep)
                if body:
                    wanted[(body["instance_id"], ep["dp_rank"])] = body
        with self.lock:
            gone = [key for key in self.registered if key not in wanted]
            for key in gone:
                del self.registered[key]
            added = {k: v for k, v in wanted.items() if k not in self.registered}
            self.registered.update(added)
        for instance_id, dp_rank in gone:
            status, body = http_json("POST", f"{self.base}/unregister", {"instance_id": instance_id, "dp_rank": dp_rank})
            log(COMPONENT, "conductor unregister", instance_id=instance_id, dp_rank=dp_rank, status=status, response=body)
        for body in added.values():
            status, resp = http_json("POST", f"{self.base}/register", body, timeout=2)
            log(COMPONENT, "conductor register" if status == 200 else "conductor register failed (not retried)",
                request=body, status=status, response=resp)

    def _register_body(self, inst: dict, ep: dict) -> dict | None:
        endpoint = conductor_endpoint(self.cfg.get("endpoint"), ep["ip"], ep["dp_rank"])
        if endpoint is None:
            log(COMPONENT, "kv-events endpoint is not of the form tcp://*:<port>; registration skipped",
                endpoint=self.cfg.get("endpoint"))
            return None
        body = {"endpoint": endpoint, "type": "vLLM", "modelname": inst["model_name"],
                "block_size": self.cfg["block_size"], "instance_id": self.instance_id(inst), "dp_rank": ep["dp_rank"]}
        replay = conductor_endpoint(self.cfg.get("replay_endpoint"), ep["ip"], ep["dp_rank"])
        if replay:
            body["replay_endpoint"] = replay
        return body

    def query(self, model: str, tokens: list[int]) -> dict:
        """{instance id: {dp_rank: matched tokens}}; {} on any failure (0.2 s timeout, like PyMotor)."""
        status, body = http_json("POST", f"{self.base}/query",
                                 {"model": model, "block_size": self.cfg["block_size"], "token_ids": tokens}, timeout=0.2)
        if status != 200 or not isinstance(body, dict):
            log(COMPONENT, "conductor query failed", status=status, response=body)
            return {}
        hits = body.get("default") or {}
        return {inst: {int(rank): n for rank, n in (hit.get("DP") or {}).items()} for inst, hit in hits.items()}


# upstream's InsEventMsg (motor/common/resources/http_msg_spec.py:132-140) and the required fields of its Instance
# (motor/common/resources/instance.py:140-143)
INSTANCE_REQUIRED = {"job_name": str, "model_name": str, "id": int, "role": str}


def refresh_problem(body) -> str:
    """Why upstream's management server refuses a /instances/refresh body ("" when it parses)."""
    if not isinstance(body, dict) or not body:
        return "Request body cannot be empty"
    if body.get("event") not in ("add", "del", "set"):
        return f"event: not one of add, del, set ({body.get('event')!r})"
    if not isinstance(body.get("instances"), list):
        return "instances: a list is required"
    for n, inst in enumerate(body["instances"]):
        if not isinstance(inst, dict):
            return f"instances.{n}: not an object"
        for key, kind in INSTANCE_REQUIRED.items():
            value = inst.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                return f"instances.{n}.{key}: field required ({kind.__name__})"
    return ""


class Coordinator:
    def __init__(self, user_config: dict):
        self.user_config = user_config
        self.infer_port, self.mgmt_port, self.obs_port = coordinator_ports(user_config)
        sched = section(user_config, "motor_coordinator_config", "scheduler_config")
        self.scheduler_type = sched.get("scheduler_type", "load_balance")
        self.overlap_credit = float(sched.get("kv_affinity_overlap_credit", 1.0))
        self.load_weight = float(sched.get("kv_affinity_load_weight", 1.0))
        self.prefill_scale = float(sched.get("kv_affinity_prefill_load_scale", 1.0))
        self.never_ready = os.environ.get("MOTOR_SIM_NEVER_READY") == "1"
        self.api_keys = ApiKeyCheck(user_config)
        # upstream's transport retries (motor/config/coordinator.py ExceptionConfig; router/strategies/pd_hybrid.py,
        # pd_separate.py): a failed forward is scheduled again, retry_delay * 2**attempt s later
        retries = section(user_config, "motor_coordinator_config", "exception_config")
        self.max_retry = int(retries.get("transport_max_retry") or retries.get("max_retry", 5))
        self.retry_delay = float(retries.get("retry_delay", 0.2))
        # SGLang (engine_type of the prefill section): PyMotor's PD dual dispatch with the bootstrap protocol
        self.dual_dispatch = (engine_section(user_config, "prefill").get("engine_type") == "sglang")
        self.bootstrap_port = os.environ.get("DISAGGREGATION_BOOTSTRAP_PORT", "")
        self.instances: list[dict] = []
        self.inflight: dict[tuple, int] = {}  # (instance id, dp_rank) -> requests in flight
        self.rr = {role: itertools.count() for role in ("prefill", "decode", "union")}
        self.lock = threading.Lock()
        self.conductor, self.tokenizer, self.kv_cfg = None, None, None
        prometheus = section(user_config, "motor_coordinator_config", "prometheus_metrics_config")
        self.metrics_every = float(prometheus.get("reuse_time") or 3)
        self.dp_metrics = ""
        service = os.environ.get("KV_CONDUCTOR_SERVICE", "")
        if self.scheduler_type == "kv_cache_affinity" and service:
            self._enable_affinity(service)

    def _enable_affinity(self, service: str) -> None:
        self.kv_cfg = kv_event_config(self.user_config)
        try:
            self.tokenizer = Tokenizer(self.kv_cfg["model_path"] or "")
        except FileNotFoundError as exc:
            fail(COMPONENT, f"cannot load tokenizer for kv_cache_affinity: {exc}")
        self.conductor = Conductor(service, self.kv_cfg)
        log(COMPONENT, "kv_cache_affinity enabled", conductor=self.conductor.base, prefill_kv_event_config=self.kv_cfg,
            tokenizer=f"{self.kv_cfg['model_path']} (stand-in: UTF-8 bytes)")

    # ------------------------------------------------------------------ management
    def by_role(self, role: str) -> list[dict]:
        with self.lock:
            return [i for i in self.instances if i["role"] == role]

    def ready(self) -> bool:
        if self.never_ready:
            return False
        return bool(self.by_role("prefill") or self.by_role("union"))

    def readiness(self, *_) -> tuple:
        ready = self.ready()
        message = "ready" if ready else "required instances are not ready" + (
            " (MOTOR_SIM_NEVER_READY=1)" if self.never_ready else "")
        return 200, {"status": "ok", "message": message, "ready": ready}

    def refresh(self, body: dict, _handler) -> tuple:
        """Upstream's refresh_instances (motor/coordinator/domain/instance_manager.py): "add" adds (or replaces) the
        given instances by id, "del" removes them, "set" makes the given list the whole set."""
        problem = refresh_problem(body)
        if problem:  # upstream: InsEventMsg(**body) fails -> 400 (management_server.py:350-358)
            return 400, {"detail": f"Invalid request format: {problem}"}
        given, event = body["instances"], body["event"]
        with self.lock:
            ids = {i["id"] for i in given}
            kept = [] if event == "set" else [i for i in self.instances if i["id"] not in ids]
            instances = kept + ([] if event == "del" else given)
            changed = instances != self.instances
            self.instances = instances
        if changed:
            log(COMPONENT, "instances refreshed", event=event,
                instances=[(i["role"], i["id"], len(i["endpoints"])) for i in instances])
        if self.conductor:
            threading.Thread(target=self.conductor.sync, args=(instances,), daemon=True).start()
        return 200, {"status": "ok"}

    def mgmt_routes(self) -> dict:
        ok = lambda *_: (200, {"status": "ok"})  # noqa: E731
        return {("GET", "/readiness"): self.readiness, ("GET", "/startup"): ok, ("GET", "/liveness"): ok,
                ("POST", "/instances/refresh"): self.refresh,
                ("GET", "/instances"): lambda *_: (200, {"instances": self.instances, "ready": self.ready()})}

    # ------------------------------------------------------------------ inference
    def endpoints(self, role: str) -> list[tuple[dict, dict]]:
        return [(inst, ep) for inst in self.by_role(role) for ep in inst["endpoints"]]

    def pick_round_robin(self, role: str) -> tuple[dict, dict] | None:
        candidates = self.endpoints(role)
        return candidates[next(self.rr[role]) % len(candidates)] if candidates else None

    def pick_prefill(self, role: str, tokens: list[int]) -> tuple[tuple[dict, dict] | None, str, int]:
        """(instance, endpoint), route name, matched tokens. PyMotor's unified score:
        max(0, isl - overlap_credit * matched) * prefill_load_scale + load_weight * load, lowest wins."""
        if self.conductor is None or len(tokens) < self.kv_cfg["block_size"]:
            return self.pick_round_robin(role), "round_robin", 0
        hits = self.conductor.query(self.kv_cfg["model_name"], tokens)
        if not hits:
            return self.pick_round_robin(role), "round_robin", 0
        isl, scored = len(tokens), []
        for inst, ep in self.endpoints(role):
            matched = min(hits.get(Conductor.instance_id(inst), {}).get(ep["dp_rank"], 0), isl)
            load = self.inflight.get((inst["id"], ep["dp_rank"]), 0)
            score = max(0.0, isl - self.overlap_credit * matched) * self.prefill_scale + self.load_weight * load
            scored.append((score, (inst, ep), matched))
        if not scored:
            return self.pick_round_robin(role), "round_robin", 0
        best = min(score for score, _, _ in scored)
        # Ties (e.g. nothing cached anywhere) rotate, so cold prompts spread over the instances.
        tied = [entry for entry in scored if entry[0] == best]
        _, target, matched = tied[next(self.rr[role]) % len(tied)]
        return target, "kv_cache_affinity", matched

    def forward(self, target: tuple[dict, dict], body: dict, path: str = "/v1/chat/completions") -> tuple[int, dict]:
        inst, ep = target
        key = (inst["id"], ep["dp_rank"])
        with self.lock:
            self.inflight[key] = self.inflight.get(key, 0) + 1
        try:
            return http_json("POST", f"{scheme('infer')}://{ep['ip']}:{ep['port']}{path}", body,
                             timeout=30, tls="infer")
        finally:
            with self.lock:
                self.inflight[key] -= 1

    def completions(self, body: dict, handler) -> tuple | None:
        return self.chat(body, handler, path="/v1/completions")

    def chat(self, body: dict, handler, path: str = "/v1/chat/completions") -> tuple | None:
        """PD separation: prefill (max_tokens 1) then decode. With "stream": server-sent events as upstream's
        coordinator answers them: the first token once the prefill leg is done, the decode's text, a usage chunk
        when stream_options.include_usage is set, [DONE] (the stand-in engines answer whole)."""
        if not self.ready():
            return UNAVAILABLE
        stream = SseReply(handler, body) if body.get("stream") else None
        body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        for attempt in range(max(self.max_retry, 1)):
            answer = self.route(body, stream, path)
            # A stream already started cannot be sent again; anything else failed is scheduled again.
            if answer is None or answer[0] == 200 or attempt + 1 >= self.max_retry or (stream and stream.started):
                return answer
            time.sleep(self.retry_delay * 2 ** attempt)
        return UNAVAILABLE

    def route(self, body: dict, stream, path: str) -> tuple | None:
        """One attempt of a request: schedule, forward."""
        first_role = "prefill" if self.by_role("prefill") else "union"
        pd_split = first_role == "prefill" and bool(self.by_role("decode"))
        tokens = self.tokenizer.encode_request(body) if self.tokenizer else []
        target, route, matched = self.pick_prefill(first_role, tokens)
        if target is None:
            return UNAVAILABLE
        if pd_split and self.dual_dispatch:
            return self.dual(target, body)
        # PD separation: prefill computes the KV cache (max_tokens 1), decode continues from it.
        first_body = {**body, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}} if pd_split else body
        status, result = self.forward(target, first_body, path)
        if status != 200:
            return 502, {"detail": f"{first_role} endpoint failed", "status": status, "response": result}
        decode = self.pick_round_robin("decode") if pd_split else None
        if decode:
            if stream:
                stream.chunk(_answer_text(result)[:1] or " ")
            status, result = self.forward(decode, {**body, "kv_transfer_params": result.get("kv_transfer_params")},
                                          path)
            if status != 200:
                failure = {"detail": "decode endpoint failed", "status": status, "response": result}
                return stream.fail(failure) if stream and stream.started else (502, failure)
        prefill_id = Conductor.instance_id(target[0])
        info = {"route": route, "matched_tokens": matched, "prompt_tokens": len(tokens),
                "prefill_instance": prefill_id, "prefill_endpoint": f"{target[1]['ip']}:{target[1]['port']}",
                "prefill_dp_rank": target[1]["dp_rank"],
                "decode_instance": f"vllm-decode-{decode[0]['id']}" if decode else None}
        log(COMPONENT, "request routed", **info)
        if stream:
            return stream.finish(result)
        return 200, result, {"X-Request-Id": uuid.uuid4().hex}

    def dual(self, prefill: tuple[dict, dict], body: dict) -> tuple:
        """PyMotor's SeparatePDDualDispatchRouter: the request, with bootstrap_host (the prefill endpoint's ip),
        bootstrap_port (DISAGGREGATION_BOOTSTRAP_PORT, "" when unset) and a random bootstrap_room, goes to the
        prefill and the decode engine at once; the client gets the decode's answer."""
        decode = self.pick_round_robin("decode")
        if decode is None:
            return UNAVAILABLE
        req = {**body, "bootstrap_host": prefill[1]["ip"], "bootstrap_port": self.bootstrap_port,
               "bootstrap_room": random.randint(0, 2 ** 63 - 1)}
        p_result = {}
        p_thread = threading.Thread(target=lambda: p_result.update(zip(("status", "body"), self.forward(prefill, req))),
                                    daemon=True)
        p_thread.start()
        status, result = self.forward(decode, req)
        p_thread.join(timeout=30)
        if status != 200:
            return 502, {"detail": "decode endpoint failed", "status": status, "response": result,
                         "prefill": p_result}
        if p_result.get("status") != 200:  # PyMotor cancels the request when the prefill fails
            return 502, {"detail": "prefill endpoint failed", "status": p_result.get("status"),
                         "response": p_result.get("body")}
        log(COMPONENT, "request routed", route="pd_dual_dispatch", prefill_instance=prefill[0]["id"],
            prefill_endpoint=f"{prefill[1]['ip']}:{prefill[1]['port']}", decode_instance=decode[0]["id"],
            bootstrap_port=self.bootstrap_port, prefill_status=p_result.get("status"))
        return 200, result, {"X-Request-Id": uuid.uuid4().hex}

    def authenticated(self, route):
        """``route`` behind upstream's API key check (the inference routes call it first)."""
        def checked(body: dict, handler):
            return self.api_keys.refusal(handler) or route(body, handler)
        return checked

    def infer_routes(self) -> dict:
        model = lambda *_: (200, {"object": "list", "data": [{"id": i["model_name"]} for i in self.instances[:1]]})  # noqa: E731
        return {("POST", "/v1/chat/completions"): self.authenticated(self.chat),
                ("POST", "/v1/completions"): self.authenticated(self.completions),
                ("GET", "/v1/models"): model}

    def collect_metrics(self) -> str:
        """Upstream's MetricsCollector pass (motor/coordinator/metrics/metrics_collector.py:355-372, 551-608,
        759-780): every endpoint's management /metrics of every instance held; an instance any of whose endpoints
        does not answer is left out; each sample gets dp_rank, role, instance_id and pod_ip first."""
        lines = []
        with self.lock:
            instances = list(self.instances)
        for inst in instances:
            own = []
            for ep in inst["endpoints"]:
                status, text = http_json("GET", f"{scheme('mgmt')}://{ep['ip']}:{ep['mgmt_port']}/metrics", timeout=2)
                if status != 200 or not isinstance(text, str) or not text.strip():
                    own = None
                    break
                dims = f'dp_rank="{ep["dp_rank"]}",role="{inst["role"]}",instance_id="{inst["id"]}",pod_ip="{ep["ip"]}"'
                for line in text.splitlines():
                    if line and not line.startswith("#") and "{" in line:
                        name, rest = line.split("{", 1)
                        own.append(f"{name}{{{dims},{rest}")
            lines += own or []
        return "\n".join(lines) + ("\n" if lines else "")

    def metrics_loop(self) -> None:
        while True:
            self.dp_metrics = self.collect_metrics()
            time.sleep(self.metrics_every)

    def metrics(self, _body, handler) -> tuple:
        if "type=dp" in handler.path:
            return 200, self.dp_metrics
        return 200, f"motor_coordinator_ready {int(self.ready())}\n"

    def obs_routes(self) -> dict:
        return {("GET", "/metrics"): self.metrics}


def _answer_text(result: dict) -> str:
    choice = (result.get("choices") or [{}])[0]
    return choice.get("text") or (choice.get("message") or {}).get("content") or ""


class SseReply:
    """An OpenAI stream (text/event-stream) written straight to the client; headers go with the first chunk."""

    def __init__(self, handler, body: dict):
        self.handler, self.started, self.chat = handler, False, "messages" in body
        self.usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def _event(self, data) -> None:
        if not self.started:
            self.started = True
            self.handler.send_response(200)
            self.handler.send_header("Content-Type", "text/event-stream")
            self.handler.send_header("X-Request-Id", uuid.uuid4().hex)
            self.handler.send_header("Connection", "close")
            self.handler.end_headers()
            self.handler.close_connection = True
        text = data if isinstance(data, str) else json.dumps(data)
        self.handler.wfile.write(f"data: {text}\n\n".encode())
        self.handler.wfile.flush()

    def chunk(self, text: str) -> None:
        choice = {"index": 0, "delta": {"content": text}} if self.chat else {"index": 0, "text": text}
        self._event({"object": "chat.completion.chunk" if self.chat else "text_completion", "choices": [choice]})

    def fail(self, error: dict) -> None:
        self._event({"error": error})
        self._event("[DONE]")

    def finish(self, result: dict) -> None:
        text = _answer_text(result)
        self.chunk(text[1:] if self.started else text)
        if self.usage and result.get("usage"):
            self._event({"object": "chat.completion.chunk" if self.chat else "text_completion", "choices": [],
                         "usage": result["usage"]})
        self._event("[DONE]")


def main() -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    user_config = load_user_config()
    configure_tls(COMPONENT, user_config)
    coordinator = Coordinator(user_config)
    serve(f"{COMPONENT}-mgmt", coordinator.mgmt_port, coordinator.mgmt_routes(), tls="mgmt")
    serve(f"{COMPONENT}-obs", coordinator.obs_port, coordinator.obs_routes())
    threading.Thread(target=coordinator.metrics_loop, daemon=True, name="metrics").start()
    serve(f"{COMPONENT}-infer", coordinator.infer_port, coordinator.infer_routes(), tls="infer")
    wait_forever()


if __name__ == "__main__":
    main()
