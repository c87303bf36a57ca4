# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""KV registration watcher of a pymotor.ascend job: the container <job_id>-kv-watcher on the KV conductor's host.

Why: PyMotor's coordinator registers each prefill/union DP rank with the Mooncake conductor once, when the
controller hands it the instance (motor/coordinator/api_client/conductor_api_client.py), and the conductor keeps its
registrations in memory only. After a conductor crash (its restart policy brings it back empty) or a reboot of the
control host that starts the coordinator before the conductor listens, nothing registers the ranks again: KV-cache
affinity is silently gone.

What: every ``interval`` seconds it reads the conductor's ``GET /services`` over one kept-alive connection and
remembers, per KV-event endpoint, the registration the coordinator made (the conductor lists every field of it; a
job has its own conductor, so every registration is the job's). When the conductor may have restarted - the
connection broke (its process went away), it was unreachable, or this watcher itself restarted - it posts the
remembered registrations the conductor lacks to ``POST /register``: the same body the coordinator sent.
Registrations that vanish while the connection stays up are the coordinator's own withdrawals (an instance deleted)
and are forgotten, never re-registered. What it remembers survives its own restarts (a file in the container's own
filesystem, which lives as long as the container); it needs only the Python standard library.

Metrics: the conductor exports none (Mooncake's conductor-ctrl/main.go: "TODO support print metrics"), so with
``"metrics": {"host": <the conductor host's address>, "port": N}`` in its config the watcher serves ``GET /metrics``
(Prometheus text) there and nothing else: ``motor_kv_conductor_registrations`` (the KV-event endpoints the conductor
listed at the last read), ``motor_kv_conductor_up`` and ``motor_kv_watcher_reregistrations_total``. It binds that one
address, never the wildcard; without the key it listens on nothing.

Usage: ``python3 motor_kv_watcher.py <config.json>``; the config (written by the deploy from the plan):
``{"conductor": "http://<ip>:<port>", "coordinator": "http://<ip>:<port>/readiness" or null, "interval": 2,
"state": "/var/tmp/motor_kv_watcher.json", "metrics": {"host": ..., "port": ...} or absent}`` (nothing that
scaling changes: the watcher learns the ranks from the conductor).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
import urllib.request

DEFAULT_STATE = "/var/tmp/motor_kv_watcher.json"
TIMEOUT = 2.0  # seconds per request, as the coordinator's own conductor client


def log(message, **fields):
    print(json.dumps(dict({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "msg": message}, **fields), sort_keys=True),
          flush=True)


def register_body(service):
    """The POST /register body of a conductor /services entry (Go field names -> the JSON names of RegisterReq):
    what the coordinator sent (upstream conductor_api_client.register_post)."""
    body = {"endpoint": service.get("Endpoint", ""), "type": service.get("Type", ""),
            "modelname": service.get("ModelName", ""), "block_size": service.get("BlockSize", 0),
            "instance_id": service.get("InstanceID", ""), "dp_rank": service.get("DPRank", 0)}
    if service.get("ReplayEndpoint"):
        body["replay_endpoint"] = service["ReplayEndpoint"]
    if service.get("TenantID") and service["TenantID"] != "default":
        body["tenant_id"] = service["TenantID"]
    if service.get("LoraName"):
        body["lora_name"] = service["LoraName"]
    if service.get("AdditionalSalt"):
        body["additionalsalt"] = service["AdditionalSalt"]
    return body


def instance_number(service):
    """The controller's instance id in ``vllm-prefill-<id>`` (ids grow: the larger one is the newer instance)."""
    tail = str(service.get("InstanceID", "")).rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


class Watcher:
    """One poll at a time (``poll``); ``run`` loops. ``request(method, url, body)`` -> parsed JSON or raises OSError;
    its ``broken`` attribute, when true, says the connection broke since the last call (the watcher resets it)."""

    def __init__(self, config, request=None):
        self.base = str(config["conductor"]).rstrip("/")
        self.interval = float(config.get("interval") or 2)
        self.state_path = config.get("state") or DEFAULT_STATE
        # the coordinator's /readiness (plain http; empty: do not wait for it): restore only once it is ready
        self.coordinator = config.get("coordinator") or ""
        self.waiting = False
        self.ready_polls = 0  # consecutive polls the coordinator said ready (it registers just after it says so)
        self.request = request or KeptAlive(self.base)
        self.known = {}  # endpoint -> the /services entry the coordinator registered for it
        self.suspect = False  # the conductor may have lost registrations (it restarted, or this watcher did)
        self.reachable = None
        self.listed = 0  # endpoints the conductor listed at the last read
        self.reregistered = 0
        self._load()

    def _load(self):
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except (OSError, ValueError):
            return
        if isinstance(saved, dict):
            self.known = {ep: svc for ep, svc in saved.items() if isinstance(svc, dict)}
            # restarted (a crash, or the control host's Docker engine restarted): the conductor may be new too
            self.suspect = bool(self.known)
            log("registrations remembered", count=len(self.known), state=self.state_path)

    def _save(self):
        tmp = self.state_path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(self.known, handle, sort_keys=True)
            os.replace(tmp, self.state_path)
        except OSError as exc:
            log("cannot save the registrations", state=self.state_path, error=str(exc))

    def poll(self):
        """Read /services once, learn, and re-register what the conductor lost. Returns the endpoints registered."""
        try:
            answer = self.request("GET", self.base + "/services", None)
            services = answer.get("services") or [] if isinstance(answer, dict) else []
        except (OSError, ValueError) as exc:
            if self.reachable is not False:
                log("conductor unreachable", url=self.base, error=str(exc))
            self.reachable, self.suspect, self.listed = False, True, 0
            return []
        if getattr(self.request, "broken", False):
            self.request.broken = False
            self.suspect = True
            log("the connection to the conductor broke: it may have restarted", url=self.base)
        if self.reachable is False:
            log("conductor answers again", url=self.base)
        self.reachable = True
        listed = {}
        for service in services:
            endpoint = service.get("Endpoint")
            if endpoint and instance_number(service) >= instance_number(listed.get(endpoint, {})):
                listed[endpoint] = service
        self.listed = len(listed)
        lost = sorted(ep for ep in self.known if ep not in listed)
        if lost and not self.suspect:  # gone from a conductor that kept running: the coordinator withdrew them
            for endpoint in lost:
                log("registration withdrawn, forgotten", endpoint=endpoint,
                    instance_id=self.known[endpoint].get("InstanceID"), dp_rank=self.known[endpoint].get("DPRank"))
            lost = []
        self.ready_polls = self.ready_polls + 1 if self._coordinator_ready() else 0
        if lost and self.coordinator and self.ready_polls < 2:
            # the coordinator registers the instances it is handed when it starts (and new ones get new ids: after a
            # full stop and start what is remembered is stale); once it is ready, what is still lacking is restored
            if not self.waiting:
                log("the conductor lacks registrations: waiting until the coordinator is ready", lost=lost)
            self.waiting = True
            known = dict(listed, **{endpoint: self.known[endpoint] for endpoint in lost})
            if known != self.known:
                self.known = known
                self._save()
            return []
        self.waiting = False
        registered, failed = [], []
        for endpoint in lost:
            body = register_body(self.known[endpoint])
            try:
                self.request("POST", self.base + "/register", body)
            except (OSError, ValueError) as exc:
                log("re-registration failed, the next poll retries", request=body, error=str(exc))
                failed.append(endpoint)
                continue
            log("re-registered a DP rank the conductor had lost", request=body)
            listed[endpoint] = self.known[endpoint]
            registered.append(endpoint)
        self.listed = len(listed)
        self.reregistered += len(registered)
        known = dict(listed, **{endpoint: self.known[endpoint] for endpoint in failed})
        self.suspect = bool(failed)
        if known != self.known:
            self.known = known
            self._save()
        return registered

    def _coordinator_ready(self):
        if not self.coordinator:
            return True
        try:
            with urllib.request.urlopen(self.coordinator, timeout=TIMEOUT) as resp:  # nosec B310: the plan's URL
                body = json.loads(resp.read() or b"{}")
        except (OSError, ValueError):
            return False
        return isinstance(body, dict) and body.get("ready") is True

    def metrics_text(self):
        """The Prometheus text of what the last poll saw."""
        lines = []
        for name, kind, doc, value in (
                ("motor_kv_conductor_registrations", "gauge",
                 "KV-event endpoints the KV conductor listed (GET /services) at the watcher's last read.", self.listed),
                ("motor_kv_conductor_up", "gauge", "1 when the watcher's last read of the KV conductor succeeded.",
                 int(bool(self.reachable))),
                ("motor_kv_watcher_reregistrations_total", "counter",
                 "DP ranks the watcher registered again after the conductor lost them.", self.reregistered)):
            lines += ["# HELP %s %s" % (name, doc), "# TYPE %s %s" % (name, kind), "%s %d" % (name, value)]
        return "\n".join(lines) + "\n"

    def serve_metrics(self, host, port):
        """``GET /metrics`` on ``host:port`` in a daemon thread (only that path; nothing is read from a request)."""
        watcher = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = watcher.metrics_text().encode() if self.path.split("?")[0] == "/metrics" else b"not found\n"
                self.send_response(200 if body != b"not found\n" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes every few seconds: no access log
                pass

        server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
        log("serving metrics", address="%s:%s" % (host, port))
        return server

    def run(self):
        log("watching the KV conductor", url=self.base, interval=self.interval)
        while True:
            self.poll()
            time.sleep(self.interval)


class KeptAlive:
    """HTTP/1.1 client of the conductor on one kept-alive connection (Go's server keeps it open). When a request on
    an open connection finds it closed, the conductor's process went away: ``broken`` is set and the request is
    sent again on a new connection."""

    def __init__(self, base, timeout=TIMEOUT):
        parts = urllib.parse.urlsplit(base)
        self.host, self.port, self.timeout = parts.hostname, parts.port or 80, timeout
        self.conn = None
        self.broken = False

    def _close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def __call__(self, method, url, body):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        path = urllib.parse.urlsplit(url).path or "/"
        for attempt in (1, 2):
            reused = self.conn is not None
            if not reused:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self._close()
                if reused and attempt == 1:
                    self.broken = True
                    continue
                raise OSError(str(exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                raise OSError(str(exc)) from exc
            if resp.status != 200:
                raise OSError("HTTP %s: %s" % (resp.status, raw[:300].decode(errors="replace")))
            return json.loads(raw) if raw.strip() else {}
        raise OSError("no answer")


def main(argv):
    if len(argv) != 2:
        print("usage: motor_kv_watcher.py <config.json>", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    # PID 1 of its container: without a handler SIGTERM is ignored and `docker stop` waits out its timeout
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    watcher = Watcher(config)
    metrics = config.get("metrics") or {}
    if metrics.get("host") and metrics.get("port"):
        try:
            watcher.serve_metrics(metrics["host"], metrics["port"])
        except OSError as exc:  # the metrics never cost the repair: it watches on without them
            log("cannot serve metrics, watching without them", address="%s:%s" % (metrics["host"], metrics["port"]),
                error=str(exc))
    watcher.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
