"""The KV registration watcher (roles/motor_service/files/motor_kv_watcher.py) against a conductor on loopback that
keeps its registrations the way the Mooncake conductor does (dev/kv-indexer kvevent/event_manager.go: in memory,
keyed by instance id, tenant and DP rank; /services lists them with Go field names; a restart forgets them all)."""

from __future__ import annotations

import importlib.util
import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "motor_service" / "files" / "motor_kv_watcher.py"
_spec = importlib.util.spec_from_file_location("motor_kv_watcher", SCRIPT)
watcher_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(watcher_mod)

P0 = "tcp://10.0.0.1:5557"
P1 = "tcp://10.0.0.2:5558"


def coordinator_body(instance, rank, endpoint):
    """What PyMotor's coordinator posts (conductor_api_client.register_post) with a replay endpoint configured."""
    return {"endpoint": endpoint, "type": "vLLM", "modelname": "qwen3-8B", "block_size": 128,
            "instance_id": f"vllm-prefill-{instance}", "dp_rank": rank,
            "replay_endpoint": endpoint.replace(":555", ":666")}


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 (loopback)
        return json.loads(resp.read())


class Conductor:
    """Registrations in memory, as the Go conductor: POST /register, POST /unregister, GET /services, over
    HTTP/1.1 kept-alive connections (Go's server keeps them open); a restart closes them and forgets everything."""

    def __init__(self):
        self.services = {}
        self.posts = []
        self.connections = []
        self.coordinator_ready = True
        self.port = 0
        self.server = None
        self.up()

    def _handler(self):
        conductor = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                conductor.connections.append(self.connection)

            def log_message(self, *args):
                pass

            def _answer(self, status, body):
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                if self.path == "/readiness":  # the coordinator's, served here too for the tests
                    return self._answer(200, {"ready": conductor.coordinator_ready})
                if self.path != "/services":
                    return self._answer(404, {})
                listed = list(conductor.services.values())
                return self._answer(200, {"count": len(listed), "services": listed})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = (body["instance_id"], body.get("tenant_id") or "default", body["dp_rank"])
                if self.path == "/register":
                    conductor.posts.append(body)
                    conductor.services.setdefault(key, {
                        "Endpoint": body["endpoint"], "ReplayEndpoint": body.get("replay_endpoint", ""),
                        "Type": body["type"], "ModelName": body["modelname"], "LoraName": body.get("lora_name") or "",
                        "TenantID": key[1], "InstanceID": body["instance_id"], "BlockSize": body["block_size"],
                        "DPRank": body["dp_rank"], "AdditionalSalt": body.get("additionalsalt") or ""})
                    return self._answer(200, {"status": "registered successfully"})
                if self.path == "/unregister":
                    if conductor.services.pop(key, None) is None:
                        return self._answer(404, {})
                    return self._answer(200, {"status": "unregistered successfully"})
                return self._answer(404, {})

        return Handler

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def up(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self):
        """The process goes away: the listener and every open connection close; the registrations are gone."""
        self.server.shutdown()
        self.server.server_close()
        for connection in self.connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.connections.clear()
        self.services.clear()

    def restart(self):
        self.down()
        self.up()

    def register(self, body):
        post(self.url + "/register", body)
        self.posts.clear()  # only what the watcher posts counts

    def unregister(self, instance, rank):
        post(self.url + "/unregister", {"instance_id": f"vllm-prefill-{instance}", "dp_rank": rank})


@pytest.fixture()
def conductor():
    c = Conductor()
    yield c
    c.down()


def new_watcher(url, tmp_path, coordinator=None):
    return watcher_mod.Watcher({"conductor": url, "interval": 0.1, "state": str(tmp_path / "state.json"),
                                "coordinator": coordinator})


def test_healthy_conductor_is_only_read(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(1, 1, P1))
    watcher = new_watcher(conductor.url, tmp_path)
    assert [watcher.poll() for poll in range(3)] == [[], [], []]
    assert conductor.posts == []
    assert sorted(watcher.known) == [P0, P1]


def test_conductor_restart_between_polls_gets_the_coordinators_bodies_again(conductor, tmp_path):
    bodies = [coordinator_body(1, 0, P0), coordinator_body(1, 1, P1)]
    for body in bodies:
        conductor.register(body)
    watcher = new_watcher(conductor.url, tmp_path)
    watcher.poll()
    conductor.restart()  # faster than a poll: only the broken connection tells
    assert watcher.poll() == [P0, P1]
    assert sorted(conductor.posts, key=lambda b: b["dp_rank"]) == bodies
    assert watcher.poll() == [] and len(conductor.services) == 2


def test_unreachable_conductor_then_back_empty(conductor, tmp_path):
    conductor.register(coordinator_body(3, 0, P0))
    watcher = new_watcher(conductor.url, tmp_path)
    watcher.poll()
    conductor.down()
    assert watcher.poll() == [] and watcher.suspect and watcher.known
    assert watcher.poll() == []  # still down: nothing forgotten
    conductor.up()
    assert watcher.poll() == [P0]
    assert conductor.posts == [coordinator_body(3, 0, P0)]


def test_withdrawn_registrations_are_forgotten_not_restored(conductor, tmp_path):
    """The coordinator deletes instances while the conductor keeps running - one of two, then the last one (which
    looks like a restart to a count, not to the connection): none comes back, not even after a real restart."""
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(2, 0, P1))
    watcher = new_watcher(conductor.url, tmp_path)
    watcher.poll()
    conductor.unregister(2, 0)
    assert watcher.poll() == [] and sorted(watcher.known) == [P0]
    conductor.unregister(1, 0)
    assert watcher.poll() == [] and watcher.known == {} and conductor.services == {}
    conductor.register(coordinator_body(5, 0, P0))  # the instance back under a new id
    watcher.poll()
    conductor.restart()
    assert watcher.poll() == [P0]
    assert [b["instance_id"] for b in conductor.posts] == ["vllm-prefill-5"]


def test_the_newest_instance_of_an_endpoint_wins(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(4, 0, P0))  # instance 1 replaced (new node manager), same endpoint
    watcher = new_watcher(conductor.url, tmp_path)
    watcher.poll()
    assert watcher.known[P0]["InstanceID"] == "vllm-prefill-4"
    conductor.restart()
    assert watcher.poll() == [P0]
    assert conductor.posts == [coordinator_body(4, 0, P0)]


def test_restarted_watcher_restores_from_its_state_file(conductor, tmp_path):
    """The control host's Docker engine restarted: watcher and conductor come back; the conductor is empty."""
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(1, 1, P1))
    new_watcher(conductor.url, tmp_path).poll()
    assert json.loads((tmp_path / "state.json").read_text())[P0]["InstanceID"] == "vllm-prefill-1"
    conductor.restart()
    again = new_watcher(conductor.url, tmp_path)
    assert again.suspect
    assert again.poll() == [P0, P1] and len(conductor.services) == 2


def test_after_a_full_stop_and_start_the_coordinators_new_instances_win(conductor, tmp_path):
    """stop.yml then deploy.yml: watcher, conductor and engines all restart and the instances get new ids. The
    watcher waits until the coordinator is ready (it has registered its live instances by then) and restores
    nothing stale; the conductor restarting later still gets the new ids back."""
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(1, 1, P1))
    readiness = conductor.url + "/readiness"
    new_watcher(conductor.url, tmp_path, readiness).poll()
    conductor.restart()
    conductor.coordinator_ready = False
    watcher = new_watcher(conductor.url, tmp_path, readiness)
    assert watcher.poll() == [] and watcher.poll() == [] and conductor.posts == []  # not ready: nothing restored
    conductor.register(coordinator_body(2, 0, P0))
    conductor.register(coordinator_body(2, 1, P1))
    conductor.coordinator_ready = True
    assert watcher.poll() == [] and conductor.posts == []
    assert {ep: svc["InstanceID"] for ep, svc in watcher.known.items()} == {P0: "vllm-prefill-2", P1: "vllm-prefill-2"}
    conductor.restart()
    assert watcher.poll() == [P0, P1]
    assert [b["instance_id"] for b in conductor.posts] == ["vllm-prefill-2", "vllm-prefill-2"]


def test_a_ready_coordinator_lets_the_watcher_restore_at_once(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    watcher = new_watcher(conductor.url, tmp_path, conductor.url + "/readiness")
    watcher.poll()
    conductor.restart()
    assert watcher.poll() == [P0]


class Flaky:
    """The watcher's client, with its first POST failing as the conductor answers a subscription it cannot make."""

    def __init__(self, inner):
        self.inner, self.posts = inner, 0

    @property
    def broken(self):
        return self.inner.broken

    @broken.setter
    def broken(self, value):
        self.inner.broken = value

    def __call__(self, method, url, body):
        if method == "POST":
            self.posts += 1
            if self.posts == 1:
                raise OSError("HTTP 500: Failed to subscribe")
        return self.inner(method, url, body)


def test_failed_registration_is_retried(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    watcher = new_watcher(conductor.url, tmp_path)
    watcher.request = Flaky(watcher.request)
    watcher.poll()
    conductor.restart()
    assert watcher.poll() == [] and watcher.suspect and P0 in watcher.known
    assert watcher.poll() == [P0] and not watcher.suspect


def test_main_usage(capsys):
    assert watcher_mod.main(["motor_kv_watcher.py"]) == 2
    assert "usage" in capsys.readouterr().err


def test_sigterm_ends_the_watcher_at_once(conductor, tmp_path):
    """As PID 1 of its container the watcher must act on SIGTERM: `docker stop` then ends it with status 0 at once
    (status.yml and stop.yml expect "exited", not a SIGKILL after the stop timeout)."""
    config = tmp_path / "kv_watcher.json"
    config.write_text(json.dumps({"conductor": conductor.url, "interval": 0.2, "state": str(tmp_path / "s.json")}))
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert "watching the KV conductor" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 (loopback)
        return resp.status, resp.headers.get("Content-Type"), resp.read().decode()


def metric_values(text):
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}


def test_metrics_follow_the_conductors_registrations(conductor, tmp_path):
    """What Prometheus reads (the conductor exports no metrics): the endpoints listed at the last read, whether the
    conductor answered, and the ranks re-registered; served on the configured address only, /metrics only."""
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(1, 1, P1))
    watcher = new_watcher(conductor.url, tmp_path)
    port = free_port()
    server = watcher.serve_metrics("127.0.0.1", port)
    try:
        url = "http://127.0.0.1:%d/metrics" % port
        assert metric_values(scrape(url)[2])["motor_kv_conductor_up"] == 0  # not read yet
        watcher.poll()
        status, kind, text = scrape(url)
        assert status == 200 and kind.startswith("text/plain")
        assert "# TYPE motor_kv_conductor_registrations gauge" in text
        assert metric_values(text) == {"motor_kv_conductor_registrations": 2, "motor_kv_conductor_up": 1,
                                       "motor_kv_watcher_reregistrations_total": 0}
        conductor.unregister(1, 1)  # the coordinator withdrew one rank
        watcher.poll()
        assert metric_values(scrape(url)[2])["motor_kv_conductor_registrations"] == 1
        conductor.restart()
        watcher.poll()  # re-registers the one it knew
        assert metric_values(scrape(url)[2]) == {"motor_kv_conductor_registrations": 1, "motor_kv_conductor_up": 1,
                                                 "motor_kv_watcher_reregistrations_total": 1}
        conductor.down()
        watcher.poll()
        assert metric_values(scrape(url)[2])["motor_kv_conductor_up"] == 0
        with pytest.raises(urllib.error.HTTPError, match="404"):
            scrape("http://127.0.0.1:%d/services" % port)
        with pytest.raises(OSError):  # bound to the one address, not the wildcard
            scrape("http://127.0.0.2:%d/metrics" % port)
    finally:
        server.shutdown()
        server.server_close()


def test_main_serves_metrics_only_when_configured(conductor, tmp_path):
    port = free_port()
    config = tmp_path / "kv_watcher.json"
    config.write_text(json.dumps({"conductor": conductor.url, "interval": 0.2, "state": str(tmp_path / "s.json"),
                                  "metrics": {"host": "127.0.0.1", "port": port}}))
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert "serving metrics" in proc.stdout.readline()
        assert "motor_kv_conductor_registrations" in scrape("http://127.0.0.1:%d/metrics" % port)[2]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()


def test_metrics_that_cannot_bind_do_not_stop_the_watcher(conductor, tmp_path):
    """An address not on this host (or a port taken): logged, and the watcher repairs registrations on."""
    config = tmp_path / "kv_watcher.json"
    config.write_text(json.dumps({"conductor": conductor.url, "interval": 0.2, "state": str(tmp_path / "s.json"),
                                  "metrics": {"host": "192.0.2.1", "port": free_port()}}))
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert "cannot serve metrics" in proc.stdout.readline()
        assert "watching the KV conductor" in proc.stdout.readline()
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()
