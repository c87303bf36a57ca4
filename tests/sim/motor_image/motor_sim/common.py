"""Shared helpers: logging what a service received, user_config access, tiny JSON HTTP, faults."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import ssl
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A route returns (status, JSON body) or (status, JSON body, extra headers).
Route = Callable[[dict, "JsonHandler"], tuple]


def log(component: str, message: str, **fields: Any) -> None:
    suffix = f" {json.dumps(fields, sort_keys=True, default=str)}" if fields else ""
    print(f"[{component}] {message}{suffix}", flush=True)


def fail(component: str, message: str) -> None:
    """Exit 1 with a clear message: the container dies, like the real component would."""
    log(component, f"ERROR: {message}")
    sys.exit(1)


def log_received(component: str) -> None:
    """Log argv, environment and config path so tests can assert on what a service was given."""
    log(component, "argv", argv=sys.argv)
    log(component, "env", **dict(sorted(os.environ.items())))
    log(component, "config", USER_CONFIG_PATH=os.environ.get("USER_CONFIG_PATH"))


def load_user_config(path: str | None = None) -> dict:
    """PyMotor's components: a missing config file is a warning, the defaults apply ({} here)."""
    path = path or os.environ.get("USER_CONFIG_PATH", "")
    if not os.path.exists(path):
        print(f"[config] WARNING: Configuration file does not exist, using default configuration: {path}", flush=True)
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot read user_config {path!r}: {exc}") from exc


def cfg_get(section: dict, key: str, default: Any = None) -> Any:
    """engine_config accepts hyphen and underscore spellings of a key, like PyMotor."""
    for name in (key, key.replace("_", "-"), key.replace("-", "_")):
        if name in section:
            return section[name]
    return default


def section(user_config: dict, *path: str) -> dict:
    node: Any = user_config
    for key in path:
        node = (node.get(key) or {}) if isinstance(node, dict) else {}
    return node if isinstance(node, dict) else {}


def engine_section(user_config: dict, role: str) -> dict:
    return section(user_config, f"motor_engine_{role}_config")


def instance_pods(user_config: dict, role: str) -> int:
    key = {"prefill": "p", "decode": "d", "union": "hybrid"}[role]
    return int(section(user_config, "motor_deploy_config").get(f"single_{key}_instance_pod_num") or 1)


def controller_port(user_config: dict) -> int:
    return int(section(user_config, "motor_controller_config", "api_config").get("controller_api_port") or 1026)


def coordinator_ports(user_config: dict) -> tuple[int, int, int]:
    api = section(user_config, "motor_coordinator_config", "api_config")
    return (int(api.get("coordinator_api_infer_port") or 1025), int(api.get("coordinator_api_mgmt_port") or 1026),
            int(api.get("coordinator_obs_port") or 1027))


def bind_host() -> str:
    """Services bind POD_IP like PyMotor (so a wrong POD_IP fails loudly), else all interfaces."""
    return os.environ.get("POD_IP") or "0.0.0.0"


class JsonHandler(BaseHTTPRequestHandler):
    routes: dict[tuple[str, str], Route] = {}
    component = "http"

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        route = self.routes.get((method, path))
        if route is None:
            known = any(p == path for _, p in self.routes)
            self._send(405 if known else 404, {"detail": "Method Not Allowed" if known else "Not Found"})
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._send(400, {"detail": "invalid JSON"})
            return
        if path not in QUIET_PATHS:
            log(self.component, f"request {method} {path}", body=body, client=self.client_address[0])
        reply = route(body, self)
        if reply is None:  # the route wrote its own answer (a stream)
            return
        status, payload, *extra = reply
        self._send(status, payload, extra[0] if extra else {})

    def _send(self, status: int, payload: Any, headers: dict | None = None) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def log_message(self, *args) -> None:  # requests are logged by _dispatch instead
        pass


# Polled endpoints: logging every call would drown the interesting lines.
QUIET_PATHS = {"/controller/heartbeat", "/status", "/readiness", "/node-manager/status", "/metrics"}


# The TLS sections of motor_deploy_config.tls_config that are on ("mgmt", "infer"), set by configure_tls: like
# PyMotor, mgmt_tls_config covers the controller API, the coordinator's management port, the node manager and the
# engines' management ports; infer_tls_config the coordinator's inference port and the engines' service ports.
TLS: dict[str, dict] = {}


def configure_tls(component: str, user_config: dict) -> None:
    tls = section(user_config, "motor_deploy_config", "tls_config")
    for kind in ("mgmt", "infer"):
        cfg = tls.get(f"{kind}_tls_config") or {}
        if cfg.get("enable_tls") is True:
            TLS[kind] = cfg
    if TLS:
        log(component, "TLS on", sections=sorted(TLS))


def scheme(kind: str) -> str:
    return "https" if TLS.get(kind) else "http"


def server_context(component: str, cfg: dict) -> ssl.SSLContext:
    """PyMotor's CertUtil.create_ssl_context: cert, key and CA must exist, else the server does not start."""
    files = [cfg.get("cert_file"), cfg.get("key_file"), cfg.get("ca_file")]
    if not all(files) or not all(os.path.exists(f) for f in files):
        fail(component, f"Failed to create ssl context: certificate files do not exist: cert={files[0]}, "
                        f"key={files[1]}, ca={files[2]}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile=cfg["cert_file"], keyfile=cfg["key_file"], password=key_password(cfg))
    context.load_verify_locations(cafile=cfg["ca_file"])
    return context


def key_password(cfg: dict) -> str | None:
    """An encrypted key's password: passwd_file's stripped text when the file exists (PyMotor's
    PasswordDecryptor.decrypt, password_utils.py:45-47, used by cert_util.py:797-805); else none."""
    path = cfg.get("passwd_file")
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return fh.read().strip() or None


def client_context(cfg: dict) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=cfg.get("ca_file") or None)
    if cfg.get("cert_file") and cfg.get("key_file"):
        context.load_cert_chain(cfg["cert_file"], cfg["key_file"], password=key_password(cfg))
    return context


def serve(component: str, port: int, routes: dict[tuple[str, str], Route], host: str | None = None,
          tls: str | None = None) -> ThreadingHTTPServer:
    """Serve ``routes``; over https when the TLS section ``tls`` ("mgmt" or "infer") is on."""
    handler = type(f"{component}Handler", (JsonHandler,), {"routes": routes, "component": component})
    host = host or bind_host()
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        fail(component, f"cannot listen on {host}:{port}: {exc}")
    if tls and TLS.get(tls):
        server.socket = server_context(component, TLS[tls]).wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(component, f"listening on {host}:{port}" + (" (https)" if tls and TLS.get(tls) else ""))
    return server


def http_json(method: str, url: str, body: Any = None, timeout: float = 2.0, tls: str = "mgmt") -> tuple[int, Any]:
    """(status, parsed body); status 0 when the peer could not be reached. An https URL is verified against the
    CA of the TLS section ``tls`` and presents its cert/key."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    context = client_context(TLS.get(tls) or {}) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, _parse(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _parse(exc.read())
    except (OSError, ValueError) as exc:
        return 0, str(exc)


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


# Survives a restart of the container (its own filesystem), not a re-creation.
CRASH_MARKER = "/tmp/motor-sim-crashed"


def install_fault_knobs(component: str) -> None:
    """MOTOR_SIM_CRASH_AFTER=<s>: exit 1 after that many seconds; with MOTOR_SIM_CRASH_ONCE=1 only in the first
    life of the container (a restarted container keeps running). SIGTERM ends the process cleanly."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    crash_after = os.environ.get("MOTOR_SIM_CRASH_AFTER")
    crash_once = os.environ.get("MOTOR_SIM_CRASH_ONCE") == "1"
    if crash_after and not (crash_once and os.path.exists(CRASH_MARKER)):
        def crash() -> None:
            if crash_once:
                try:  # the first process of the container to crash claims the one crash
                    os.close(os.open(CRASH_MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                except FileExistsError:
                    return
            log(component, f"MOTOR_SIM_CRASH_AFTER={crash_after}: crashing now")
            os._exit(1)
        timer = threading.Timer(float(crash_after), crash)
        timer.daemon = True
        timer.start()


def once_knob(name: str, marker: str) -> str:
    """The value of the fault knob ``name`` in the container's first life only: the first call claims ``marker`` (in
    the container's /tmp, which a restart keeps and a new container has not); "" when unset or already claimed."""
    value = os.environ.get(name, "")
    if not value:
        return ""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return ""
    return value


def wait_forever() -> None:
    threading.Event().wait()


def container_npus() -> list[str]:
    """The /dev/davinci<N> nodes of the container in the order the runtime numbers them (logical id = index)."""
    found = (re.fullmatch(r"/dev/davinci(\d+)", p) for p in glob.glob("/dev/davinci*"))
    return [f"/dev/davinci{n}" for n in sorted(int(m.group(1)) for m in found if m)]
