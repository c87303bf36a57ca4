"""The fixture Mooncake conductor, built from the fixture repository like upstream, behaves like
the real dev/kv-indexer conductor (../shared/reference/conductor.md): HTTP API shapes, ZMQ
subscription to an array-shaped vLLM publisher, rejection of map-shaped events, config handling.

The conductor runs in a --net=host container (the builder image, which has libzmq); the vLLM-like
publisher is pyzmq in this process, bound on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path

import docker
import msgpack
import pytest
import requests
import zmq

import build_conductor
from support import wait_for

pytestmark = pytest.mark.docker

BLOCK = 4
MODEL = "qwen3-8B"
NAME_PREFIX = "pymotor-condtest-"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



class Publisher:
    """vLLM's ZmqEventPublisher in miniature: PUB + replay ROUTER, 3-frame messages."""

    def __init__(self, ctx: zmq.Context):
        self.pub = ctx.socket(zmq.PUB)
        self.router = ctx.socket(zmq.ROUTER)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.seq = 0

    def send(self, events: list, dp_rank: int = 0, topic: bytes = b"kv-events") -> None:
        payload = msgpack.packb([time.time(), events, dp_rank], use_bin_type=True)
        self.pub.send_multipart([topic, self.seq.to_bytes(8, "big"), payload])
        self.seq += 1

    def close(self) -> None:
        self.pub.close(0)
        self.router.close(0)


def block_stored(tokens: list[int], parent: int | None, first_hash: int, medium: str = "GPU",
                 block_size: int = BLOCK) -> list:
    hashes = [first_hash + i for i in range(len(tokens) // block_size)]  # >= 2**32: msgpack uint64
    return ["BlockStored", hashes, parent, tokens, block_size, None, medium, None]


@pytest.fixture(scope="module")
def conductor_image() -> tuple[str, Path]:
    """The builder image (it has libzmq) and the freshly built fixture binary to mount in."""
    binary = build_conductor.ensure_conductor_binary()
    return build_conductor.ensure_builder_image(build_conductor.go_tarball()), binary


@pytest.fixture(scope="module")
def dclient():
    return docker.from_env()


@pytest.fixture
def run_conductor(conductor_image, dclient, tmp_path):
    image, binary = conductor_image
    started = []

    def run(config: str | None, env: dict | None = None):
        volumes = {str(binary): {"bind": "/usr/local/bin/mooncake_conductor", "mode": "ro"}}
        environment = dict(env or {})
        if config is not None:
            (tmp_path / "conductor_config.json").write_text(config)
            volumes[str(tmp_path)] = {"bind": "/cfg", "mode": "ro"}
            environment["CONDUCTOR_CONFIG_PATH"] = "/cfg/conductor_config.json"
        container = dclient.containers.run(
            image, ["mooncake_conductor", "--ignored-flag"], detach=True, network_mode="host",
            name=NAME_PREFIX + uuid.uuid4().hex[:8], volumes=volumes, environment=environment)
        started.append(container)
        return container

    yield run
    for container in started:
        container.remove(force=True)


def logs(container) -> str:
    return container.logs().decode()


@pytest.fixture
def conductor(run_conductor):
    port = free_port()
    container = run_conductor(json.dumps({"http_server_port": port}), {"CONDUCTOR_LOG_LEVEL": "debug"})
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: _answers(base), what="conductor HTTP")
    return base, container


def _answers(base: str) -> bool:
    try:
        return requests.get(base + "/services", timeout=1).status_code == 200
    except requests.ConnectionError:
        return False


@pytest.fixture
def publisher():
    ctx = zmq.Context()
    pub = Publisher(ctx)
    yield pub
    pub.close()
    ctx.term()


def register_body(pub: Publisher, instance: str = "vllm-prefill-0", dp_rank: int = 0) -> dict:
    return {"endpoint": f"tcp://127.0.0.1:{pub.port}", "replay_endpoint": f"tcp://127.0.0.1:{pub.replay_port}",
            "type": "vLLM", "modelname": MODEL, "block_size": BLOCK, "instance_id": instance, "dp_rank": dp_rank}


def query(base: str, tokens: list[int], **extra) -> dict:
    resp = requests.post(base + "/query", json={"model": MODEL, "block_size": BLOCK, "token_ids": tokens, **extra},
                         timeout=2)
    assert resp.status_code == 200, resp.text
    return resp.json()


def publish_until_indexed(base: str, pub: Publisher, events: list, probe: list[int], expect: int) -> dict:
    """SUB connects asynchronously (slow joiner): resend until the conductor has indexed it."""
    def indexed():
        pub.send(events)
        time.sleep(0.2)
        hit = query(base, probe)["default"]["vllm-prefill-0"]
        return hit if hit["longest_matched"] >= expect else None
    return wait_for(indexed, what="events indexed")


def test_register_query_services_unregister(conductor, publisher):
    base, container = conductor

    missing_replay = {k: v for k, v in register_body(publisher).items() if k != "replay_endpoint"}
    resp = requests.post(base + "/register", json=missing_replay, timeout=2)
    assert resp.status_code == 500 and resp.text.startswith("Failed to subscribe"), resp.text
    resp = requests.post(base + "/register", json={**register_body(publisher), "endpoint": ""}, timeout=2)
    assert (resp.status_code, resp.text.strip()) == (500, "Failed to subscribe: endpoint is required")
    assert requests.post(base + "/register", data="{nope", timeout=2).status_code == 400

    for _ in range(2):  # registering twice is fine and creates no duplicate
        resp = requests.post(base + "/register", json=register_body(publisher), timeout=2)
        assert resp.status_code == 200
        assert resp.json() == {"instance_id": "vllm-prefill-0", "status": "registered successfully"}
    services = requests.get(base + "/services", timeout=2).json()
    assert services["count"] == 1
    assert services["services"][0] == {
        "Endpoint": f"tcp://127.0.0.1:{publisher.port}", "ReplayEndpoint": f"tcp://127.0.0.1:{publisher.replay_port}",
        "Type": "vLLM", "ModelName": MODEL, "LoraName": "", "TenantID": "default", "InstanceID": "vllm-prefill-0",
        "BlockSize": BLOCK, "DPRank": 0, "AdditionalSalt": ""}

    prompt = list(range(100, 116))  # 4 full blocks
    hit = publish_until_indexed(base, publisher, [block_stored(prompt, None, 2**40)], prompt, 16)
    assert hit == {"longest_matched": 16, "DP": {"0": 16}, "GPU": 16, "CPU": 0, "DISK": 0}

    # A prompt sharing 3 blocks, then diverging: the walk stops at the first miss.
    assert query(base, prompt[:12] + [7, 7, 7, 7, 7])["default"]["vllm-prefill-0"]["longest_matched"] == 12
    # Contexts must match: another model or block size, or a foreign tenant, finds nothing.
    assert query(base, prompt, model="other")["default"]["vllm-prefill-0"]["longest_matched"] == 0
    assert query(base, prompt, block_size=8)["default"]["vllm-prefill-0"]["longest_matched"] == 0
    assert query(base, prompt, tenant_id="nobody") == {}

    # Blocks chained onto the stored parent, on lowercase "cpu": counted as CPU.
    tail = list(range(200, 204))
    publish_until_indexed(base, publisher, [block_stored(tail, 2**40 + 3, 2**41, medium="cpu")], prompt + tail, 20)
    assert query(base, prompt + tail)["default"]["vllm-prefill-0"]["CPU"] == 4

    # A block size other than the registered one is dropped with a WARN.
    publisher.send([block_stored(list(range(300, 308)), None, 2**42, block_size=8)])
    wait_for(lambda: "Block size mismatch" in logs(container), what="block size WARN")

    # BlockRemoved of the first block breaks the prefix walk.
    publisher.send([["BlockRemoved", [2**40], "GPU"]])
    wait_for(lambda: query(base, prompt)["default"]["vllm-prefill-0"]["longest_matched"] == 0, what="removal")

    view = requests.get(base + "/global_view", timeout=2).json()
    assert view["context_count"] == 1 and view["model_contexts"][0]["instance_id"] == "vllm-prefill-0"

    assert requests.get(base + "/register", timeout=2).status_code == 405
    assert requests.post(base + "/services", timeout=2).status_code == 405
    assert requests.get(base + "/nope", timeout=2).status_code == 404

    body = {"instance_id": "vllm-prefill-0", "dp_rank": 0}
    resp = requests.post(base + "/unregister", json=body, timeout=2)
    assert resp.json() == {"removed_instances": ["vllm-prefill-0|default|0"], "status": "unregistered successfully"}
    resp = requests.post(base + "/unregister", json=body, timeout=2)
    assert (resp.status_code, resp.text.strip()) == (404, "service not found: vllm-prefill-0|default|0")
    assert requests.get(base + "/services", timeout=2).json() == {"count": 0, "services": []}
    # Well-formed traffic never drops the subscription (e.g. on EINTR from Go's runtime signals).
    assert "Failed to process message" not in logs(container)


def test_map_shaped_events_are_rejected_and_client_reconnects(conductor, publisher):
    base, container = conductor
    assert requests.post(base + "/register", json=register_body(publisher), timeout=2).status_code == 200
    map_event = {"type": "BlockStored", "block_hashes": [2**40], "parent_block_hash": None,
                 "token_ids": [1, 2, 3, 4], "block_size": BLOCK, "medium": "GPU"}

    def rejected():
        publisher.send([map_event])
        time.sleep(0.2)
        return "event at index 0 is not a slice" in logs(container)
    wait_for(rejected, what="map-shaped event rejection")
    wait_for(lambda: "Reconnected to publisher" in logs(container), what="reconnect")
    assert query(base, [1, 2, 3, 4])["default"]["vllm-prefill-0"]["longest_matched"] == 0


def test_static_config_quirks(run_conductor):
    port = free_port()
    static = {"http_server_port": port, "kvevent_instance": {
        "mooncake_master": {"type": "Mooncake", "endpoint": "tcp://127.0.0.1:50088", "modelname": MODEL},
        "bogus": {"type": "sglang", "endpoint": "tcp://127.0.0.1:1"}}}
    container = run_conductor(json.dumps(static))
    wait_for(lambda: "HTTP server listening" in logs(container), what="startup")
    out = logs(container)
    assert f'msg="HTTP server listening" port={port}' in out
    assert "Unknown service type" in out
    # No replay_endpoint: the DEALER connect fails, the process keeps running.
    assert "Subscriptions success=0 failed=1" in out
    wait_for(lambda: _answers(f"http://127.0.0.1:{port}"), what="HTTP")


@pytest.mark.parametrize(("config", "expected"), [
    (None, 'msg="HTTP server listening" port=13333'),  # no file: WARN, default port
    ('{"kvevent_instance": {}}', 'msg="HTTP server listening" port=0'),  # no port key: port 0
])
def test_config_defaults(run_conductor, config, expected):
    env = {"CONDUCTOR_CONFIG_PATH": "/nonexistent/conductor.json"} if config is None else {}
    container = run_conductor(config, env)
    wait_for(lambda: expected in logs(container), what=expected)
    if config is None:
        assert "Config file not found" in logs(container)


def test_malformed_config_exits_1(run_conductor):
    container = run_conductor('{"http_server_port": ')
    assert container.wait(timeout=20)["StatusCode"] == 1
    assert "Failed to load config" in logs(container)
