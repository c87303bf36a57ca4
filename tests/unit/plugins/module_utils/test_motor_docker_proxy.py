"""module_utils/motor_docker_proxy.py: the allow-list of the per-host healer's Docker calls, and the proxy itself
between the collection's Docker client (motor_docker.py, as the healer uses it) and a fake Docker engine on a unix
socket (what reaches the engine, what comes back, chunked answers, refusals)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import stat
import tempfile
import threading

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_docker_proxy as proxy
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import DockerClient, DockerError

JOB = "job-a"
RULES = proxy.allow_list(JOB)


def refused(method, target, headers=None):
    return proxy.refusal(method, target, headers or {}, RULES)


@pytest.mark.parametrize("method, target", [
    ("GET", "/version"),
    ("GET", "/v1.43/version"),
    ("GET", "/v1.40/containers/json?all=1&filters=%7B%22label%22%3A+%5B%22io.pymotor.job%3Djob-a%22%5D%7D"),
    ("GET", "/v1.43/containers/job-a-coordinator/json"),
    ("POST", "/v1.43/containers/job-a-p0-0/restart?t=10"),
    ("POST", "/v1.43/containers/job-a-p0-0/start"),
    ("POST", "/containers/job-a-controller/start"),
])
def test_the_healers_calls_pass(method, target):
    assert refused(method, target) is None


@pytest.mark.parametrize("method, target", [
    ("GET", "/_ping"),
    ("GET", "/images/json"),
    ("GET", "/info"),
    ("GET", "/events"),
    ("POST", "/v1.43/containers/create?name=job-a-evil"),
    ("POST", "/v1.43/containers/job-a-p0-0/exec"),
    ("POST", "/v1.43/exec/abc/start"),
    ("POST", "/v1.43/containers/job-a-p0-0/kill"),
    ("POST", "/v1.43/containers/job-a-p0-0/update"),
    ("DELETE", "/v1.43/containers/job-a-p0-0"),
    ("GET", "/v1.43/containers/job-a-p0-0/archive?path=/"),
    ("GET", "/v1.43/containers/job-a-p0-0/logs"),
    ("PUT", "/v1.43/containers/job-a-p0-0/archive?path=/"),
    ("POST", "/v1.43/containers/job-a-p0-0/json"),  # the right path with another method
    ("GET", "/v1.43/containers/job-b-p0-0/json"),  # another job's container
    ("POST", "/v1.43/containers/other/restart"),
    ("POST", "/v1.43/containers/job-a-x%2F..%2F..%2Fcreate/start"),  # encoded slashes are no name
    ("POST", "/v1.43/containers/job-a-x/../create/start"),
    ("GET", "/v1.43/containers/job-a-x/json/"),
    ("GET", "/v2.0/version"),
    ("GET", "/x/v1.43/version"),
    ("POST", "/v1.43/swarm/init"),
    ("POST", "/v1.43/build"),
])
def test_anything_else_is_refused(method, target):
    assert "is not one of the per-host healer's calls" in refused(method, target)


def test_a_body_or_an_upgrade_is_refused_even_on_an_allowed_path():
    start = "/v1.43/containers/job-a-p0-0/start"
    assert refused("POST", start, {"content-length": ["0"]}) is None
    assert "body is not allowed" in refused("POST", start, {"content-length": ["120"]})
    assert "body is not allowed" in refused("POST", start, {"content-length": ["0", "5"]})
    assert "body is not allowed" in refused("POST", start, {"transfer-encoding": ["chunked"]})
    assert "upgrade is not allowed" in refused("POST", start, {"upgrade": ["tcp"], "connection": ["Upgrade"]})


def test_a_malformed_request_head_is_no_request():
    assert proxy.parse_head(b"GET /version HTTP/1.1\r\nHost: docker")[:2] == ("GET", "/version")
    for head in (b"GET /version", b"GET http://x/version HTTP/1.1", b"GET /version HTTP/2\r\nHost: x",
                 b"GET /version HTTP/1.1\r\n folded: header", b"GET  /version HTTP/1.1"):
        with pytest.raises(ValueError):
            proxy.parse_head(head)


def test_docker_gets_only_the_request_line_and_the_proxys_own_headers():
    assert proxy.forwarded("POST", "/v1.43/containers/job-a-x/restart?t=10") == (
        b"POST /v1.43/containers/job-a-x/restart?t=10 HTTP/1.1\r\nHost: docker\r\nUser-Agent: motor-docker-proxy\r\n"
        b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    assert b"Content-Length" not in proxy.forwarded("GET", "/version")


class FakeDocker(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A Docker engine stand-in: records each request head; /containers/json answers chunked (as Docker streams a
    long list), the rest with a Content-Length; POSTs 204."""
    daemon_threads = True

    def __init__(self, path):
        self.seen = []
        socketserver.UnixStreamServer.__init__(self, path, FakeDockerHandler)


class FakeDockerHandler(socketserver.BaseRequestHandler):
    def handle(self):
        head = proxy.read_head(self.request)
        self.server.seen.append(head.decode())
        method, target = head.decode().split(" ")[:2]
        path = target.split("?")[0]
        if method == "POST":
            self.request.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        elif path == "/version":
            body = json.dumps({"ApiVersion": "1.43"}).encode()
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                                 b"Connection: close\r\n\r\n%s" % (len(body), body))
        elif path.endswith("/containers/json"):
            body = json.dumps([{"Names": ["/job-a-p%d-0" % i]} for i in range(300)]).encode()
            chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)]
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                                 b"Connection: close\r\n\r\n")
            for chunk in chunks:
                self.request.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.request.sendall(b"0\r\n\r\n")
        else:
            body = json.dumps({"Name": "/" + path.split("/")[-2], "State": {"Status": "running"}}).encode()
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.fixture()
def served():
    """(proxy socket path, fake Docker) with both serving in threads (a short directory: unix socket paths are
    limited to 107 bytes)."""
    folder = tempfile.mkdtemp(prefix="proxy", dir="/tmp")
    os.mkdir(os.path.join(folder, "shared"))
    listen = os.path.join(folder, "shared", "docker.sock")
    docker = FakeDocker(os.path.join(folder, "docker.sock"))
    server = proxy.Server(listen, os.path.join(folder, "docker.sock"), JOB)
    for s in (docker, server):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield listen, docker
    for s in (docker, server):
        s.shutdown()
        s.server_close()
    shutil.rmtree(folder)


def test_the_healers_client_works_through_the_proxy_and_a_call_outside_the_list_gets_403(served, capsys):
    path, docker = served
    client = DockerClient("unix://" + path)
    assert client.version() == "1.43"
    names = [c["Names"][0] for c in client.job_containers(JOB)]  # a chunked answer, copied through whole
    assert len(names) == 300 and names[-1] == "/job-a-p299-0"
    assert client.inspect_container("job-a-p0-0")["State"]["Status"] == "running"
    assert client.post("/containers/{0}/restart", "job-a-p0-0", params={"t": "10"}) == 204
    with pytest.raises(DockerError) as refusal:
        client.get_json("/images/json")
    assert refusal.value.status == 403 and "GET /v1.43/images/json is not one of the per-host healer's calls" in str(
        refusal.value)
    with pytest.raises(DockerError) as other_job:
        client.post("/containers/{0}/restart", "job-b-p0-0")
    assert other_job.value.status == 403
    # Docker saw the four passed calls only, each rebuilt by the proxy
    assert [h.split("\r\n")[0] for h in docker.seen] == [
        "GET /version HTTP/1.1",
        "GET /v1.43/containers/json?all=1&filters=%7B%22label%22%3A+%5B%22io.pymotor.job%3Djob-a%22%5D%7D HTTP/1.1",
        "GET /v1.43/containers/job-a-p0-0/json HTTP/1.1",
        "POST /v1.43/containers/job-a-p0-0/restart?t=10 HTTP/1.1"]
    assert all("pymotor.ascend" not in h and "Connection: close" in h for h in docker.seen)
    assert "refused GET /v1.43/images/json" in capsys.readouterr().out


def test_a_second_request_on_a_kept_alive_connection_never_reaches_docker(served):
    path, docker = served
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(b"GET /version HTTP/1.1\r\nHost: docker\r\nConnection: keep-alive\r\n\r\n"
                     b"POST /v1.43/containers/create HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n")
        data = b""
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK") and b"1.43" in data and b"HTTP/1.1" not in data[10:]
    assert [h.split("\r\n")[0] for h in docker.seen] == ["GET /version HTTP/1.1"]


def test_the_served_socket_is_its_owners_only(served):
    assert stat.S_IMODE(os.stat(served[0]).st_mode) == 0o600
