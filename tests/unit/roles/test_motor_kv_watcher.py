"""The KV registration watcher (roles/motor_service/files/motor_kv_watcher.py) against a conductor on loopback that
keeps its registrations the way the Mooncake conductor does (dev/kv-indexer kvevent/event_manager.go: in memory,
keyed by instance id, tenant and DP rank; /services lists them with Go field names; a restart forgets them all)."""

from __future__ import annotations

import importlib.util
import json
import threading
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


class Conductor:
    """Registrations in memory, as the Go conductor: POST /register, POST /unregister, GET /services."""

    def __init__(self):
        self.services = {}
        self.posts = []
        conductor = self

        class Handler(BaseHTTPRequestHandler):
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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def register(self, body):
        watcher_mod.http_request("POST", self.url + "/register", body)
        self.posts.clear()  # only what the watcher posts counts

    def restart(self):
        self.services.clear()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def conductor():
    c = Conductor()
    yield c
    c.stop()


def new_watcher(url, tmp_path, endpoints=(P0, P1)):
    return watcher_mod.Watcher({"conductor": url, "interval": 0.1, "endpoints": list(endpoints),
                                "state": str(tmp_path / "state.json")})


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
    conductor.restart()
    assert watcher.poll() == [P0, P1]
    assert sorted(conductor.posts, key=lambda b: b["dp_rank"]) == bodies
    assert watcher.poll() == [] and len(conductor.services) == 2


def test_unreachable_conductor_then_back_empty(tmp_path):
    first = Conductor()
    first.register(coordinator_body(3, 0, P0))
    watcher = new_watcher(first.url, tmp_path, endpoints=[P0])
    watcher.poll()
    first.stop()
    assert watcher.poll() == [] and watcher.suspect
    second = Conductor()  # the conductor back, empty (a new port stands for the same service here)
    try:
        watcher.base = second.url
        assert watcher.poll() == [P0]
        assert second.posts == [coordinator_body(3, 0, P0)]
    finally:
        second.stop()


def test_withdrawn_registration_is_forgotten_not_restored(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(2, 0, P1))
    watcher = new_watcher(conductor.url, tmp_path)
    watcher.poll()
    # the coordinator deletes instance 2 while the conductor stays up
    watcher_mod.http_request("POST", conductor.url + "/unregister", {"instance_id": "vllm-prefill-2", "dp_rank": 0})
    assert watcher.poll() == [] and sorted(watcher.known) == [P0]
    conductor.restart()
    assert watcher.poll() == [P0]
    assert [b["instance_id"] for b in conductor.posts] == ["vllm-prefill-1"]


def test_unplanned_endpoints_are_ignored_and_the_newest_instance_wins(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    conductor.register(coordinator_body(4, 0, P0))  # instance 1 replaced (new node manager), same endpoint
    conductor.register(coordinator_body(9, 0, "tcp://10.9.9.9:5557"))  # not this job's
    watcher = new_watcher(conductor.url, tmp_path, endpoints=[P0])
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


def test_failed_registration_is_retried(conductor, tmp_path):
    conductor.register(coordinator_body(1, 0, P0))
    watcher = new_watcher(conductor.url, tmp_path, endpoints=[P0])
    watcher.poll()
    conductor.restart()
    calls = []

    def flaky(method, url, body):
        calls.append(method)
        if method == "POST" and calls.count("POST") == 1:
            raise OSError("HTTP 500: Failed to subscribe")
        return watcher_mod.http_request(method, url, body)

    watcher.request = flaky
    assert watcher.poll() == [] and watcher.suspect and P0 in watcher.known
    assert watcher.poll() == [P0] and not watcher.suspect


def test_main_usage(capsys):
    assert watcher_mod.main(["motor_kv_watcher.py"]) == 2
    assert "usage" in capsys.readouterr().err
