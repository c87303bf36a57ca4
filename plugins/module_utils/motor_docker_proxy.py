# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The Docker socket proxy of a pymotor.ascend job's per-host healer (standard library only; no Ansible import).

It runs in the job's ``<job_id>-sockproxy-<host>`` container (``reconcile/host_healer.py``), the only container of
the job with the host's Docker socket, and serves the healer (``motor_host_healer.py``) a unix socket in a directory
that only the two mount. It passes the calls the healer makes and nothing else (``allow_list``): the method, and the
path with an optional Engine API version prefix (``/v1.NN``), the container names being the job's
(``<job_id>-...``); a request body, an upgrade or anything else is answered ``403`` with a JSON ``message`` (what
Docker's own errors carry, so the healer's client shows it) and one line on stdout (``docker logs``).

Each passed request goes to Docker on a connection of its own, rebuilt from its request line (``Host``,
``Content-Length: 0`` for a POST, ``Connection: close``: no header of the client's reaches Docker), and Docker's
answer is copied back byte for byte as it comes (chunked bodies included) until Docker closes it; then the client's
connection is closed too, so a second request on a kept-alive connection is never passed unchecked (the healer's
client makes one connection per request anyway).

Usage: ``python3 motor_docker_proxy.py <docker_proxy.json>`` (``job_id``, ``upstream``: the host's Docker socket,
``listen``: the socket it serves).
"""

from __future__ import annotations

import json
import os
import re
import socket
import socketserver
import sys
import threading
from datetime import datetime, timezone

API_VERSION = r"(?:/v1\.[0-9]{1,3})?"
MAX_HEAD = 16384  # bytes of a request line and its headers
CLIENT_TIMEOUT = 30  # seconds to send a request
UPSTREAM_TIMEOUT = 300  # seconds Docker may take to answer (a restart waits up to 10 s for the container to stop)
MAX_CONNECTIONS = 16

# The healer's calls (motor_host_healer.py and motor_docker.py): (method, path pattern); {name} is a container of the
# job. The version negotiation (GET /version, unversioned), the job's containers by label (GET /containers/json),
# one inspection (GET /containers/<name>/json), and its two actions (POST /containers/<name>/restart and /start).
HEALER_CALLS = (
    ("GET", "/version"),
    ("GET", "/containers/json"),
    ("GET", "/containers/{name}/json"),
    ("POST", "/containers/{name}/restart"),
    ("POST", "/containers/{name}/start"),
)


def allow_list(job_id):
    """``[(method, compiled path pattern)]`` of the healer's calls for job ``job_id``."""
    name = re.escape(job_id) + r"-[A-Za-z0-9_.-]+"
    return [(method, re.compile("^" + API_VERSION + re.escape(path).replace(re.escape("{name}"), name) + "$"))
            for method, path in HEALER_CALLS]


def parse_head(data):
    """(method, target, version, {lower-case header: [values]}) of a request head (bytes without the blank line);
    raises ValueError when it is not an HTTP/1.x request."""
    lines = data.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1") or not parts[1].startswith("/"):
        raise ValueError("not an HTTP/1.x request line: %r" % lines[0][:200])
    headers = {}
    for line in lines[1:]:
        if not line or line[0] in " \t" or ":" not in line:  # no folded or malformed header lines
            raise ValueError("malformed header line: %r" % line[:200])
        key, value = line.split(":", 1)
        headers.setdefault(key.strip().lower(), []).append(value.strip())
    return parts[0], parts[1], parts[2], headers


def refusal(method, target, headers, rules):
    """Why the request is refused, or None when it is one of the healer's calls."""
    path = target.split("?", 1)[0]
    if not any(method == allowed and pattern.match(path) for allowed, pattern in rules):
        return "%s %s is not one of the per-host healer's calls" % (method, path[:200])
    if "transfer-encoding" in headers or any(v != "0" for v in headers.get("content-length") or []):
        return "%s %s: a request body is not allowed" % (method, path[:200])
    if "upgrade" in headers:
        return "%s %s: a protocol upgrade is not allowed" % (method, path[:200])
    return None


def forwarded(method, target):
    """The request Docker gets: the request line and the proxy's own headers (one request, then Docker closes)."""
    head = "%s %s HTTP/1.1\r\nHost: docker\r\nUser-Agent: motor-docker-proxy\r\n" % (method, target)
    if method == "POST":
        head += "Content-Length: 0\r\n"
    return (head + "Connection: close\r\n\r\n").encode("latin-1")


def answer(status, reason, message):
    """A complete HTTP/1.1 response with a JSON body ``{"message": ...}``, the connection closed after it."""
    body = json.dumps({"message": message}).encode("utf-8")
    return ("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, reason, len(body))).encode("latin-1") + body


def say(text, stream=None):
    stream = stream or sys.stdout
    stream.write("%s motor-docker-proxy: %s\n" % (datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), text))
    stream.flush()


def read_head(sock):
    """The request head (up to the blank line), or None when the client sent none within the limits."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            return None
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\r\n\r\n", 1)[0]


class Handler(socketserver.BaseRequestHandler):
    """One client connection: one request, checked, passed or refused; then closed."""

    def handle(self):
        server = self.server
        if not server.slots.acquire(blocking=False):
            self.request.sendall(answer(503, "Service Unavailable", "motor-docker-proxy: too many connections"))
            return
        try:
            self.request.settimeout(CLIENT_TIMEOUT)
            try:
                head = read_head(self.request)
                if head is None:
                    return
                method, target, _version, headers = parse_head(head)
            except ValueError as exc:
                self.request.sendall(answer(400, "Bad Request", "motor-docker-proxy: %s" % exc))
                return
            except OSError:
                return
            why = refusal(method, target, headers, server.rules)
            if why:
                say("refused %s" % why)
                self.request.sendall(answer(403, "Forbidden", "motor-docker-proxy: refused: %s (the allow-list: "
                                            "docs/design.md, the per-host healer's Docker socket)" % why))
                return
            self.relay(method, target)
        finally:
            server.slots.release()

    def relay(self, method, target):
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.settimeout(UPSTREAM_TIMEOUT)
        try:
            try:
                upstream.connect(self.server.upstream)
            except OSError as exc:
                self.request.sendall(answer(502, "Bad Gateway", "motor-docker-proxy: cannot reach Docker at %s: %s"
                                            % (self.server.upstream, exc)))
                return
            upstream.sendall(forwarded(method, target))
            self.request.settimeout(UPSTREAM_TIMEOUT)
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                self.request.sendall(chunk)
        except OSError:
            pass  # either side went away: the client sees its connection closed
        finally:
            upstream.close()


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, listen, upstream, job_id):
        self.upstream = upstream
        self.rules = allow_list(job_id)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        if os.path.exists(listen) or os.path.islink(listen):
            os.unlink(listen)  # a stale socket of a previous run
        old = os.umask(0o177)  # the socket 0600: its owner (root) only
        try:
            socketserver.UnixStreamServer.__init__(self, listen, Handler)
        finally:
            os.umask(old)


def main(argv):
    if len(argv) != 2:
        say("usage: motor_docker_proxy.py <docker_proxy.json>", sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    server = Server(config["listen"], config["upstream"], config["job_id"])
    say("serving %s for the per-host healer of job %s: %s" % (
        config["listen"], config["job_id"], ", ".join("%s %s" % call for call in HEALER_CALLS)))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
