# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The collection's own Docker Engine API client: the Python standard library only (http.client, socket, ssl), so
nothing has to be installed on (often air-gapped) Ascend hosts. It talks to the engine over its unix socket, or over
tcp with or without TLS (docker_host, tls, validate_certs, ca_path, client_cert, client_key, tls_hostname), and
uses only the public, versioned Engine API (https://docs.docker.com/reference/api/engine/).

Failures are exceptions the modules report their own way: DockerUnavailable (the engine cannot be reached or read),
DockerError (the engine answered with an error; NotFound for 404)."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import ssl
import struct
from urllib.parse import quote, urlencode, urlsplit

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
# The oldest Engine API version the modules' calls need (Docker 19.03); "auto" asks the engine for its own.
MIN_API_VERSION = "1.40"
# The connection options (motor_arguments.DOCKER_CONNECTION_ARGS): DockerClient's keyword arguments.
CONNECTION_OPTIONS = ("docker_host", "tls", "validate_certs", "ca_path", "client_cert", "client_key", "tls_hostname",
                      "api_version", "timeout")


class DockerUnavailable(Exception):
    """The Docker engine could not be reached or read."""


class DockerError(Exception):
    """The Docker engine answered with an error status."""

    def __init__(self, status, message):
        super(DockerError, self).__init__("%s (HTTP %s)" % (message, status))
        self.status = status
        self.message = message


class NotFound(DockerError):
    """404: no such container, image, ..."""


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the Engine's default endpoint)."""

    def __init__(self, path, timeout):
        super(UnixHTTPConnection, self).__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class TLSConnection(http.client.HTTPConnection):
    """HTTPS to a tcp endpoint, the certificate checked against ``server_hostname`` (tls_hostname, else the host)."""

    def __init__(self, host, port, timeout, context, server_hostname):
        super(TLSConnection, self).__init__(host, port, timeout=timeout)
        self.context = context
        self.server_hostname = server_hostname

    def connect(self):
        super(TLSConnection, self).connect()
        self.sock = self.context.wrap_socket(self.sock, server_hostname=self.server_hostname)


def key_password(passwd_file):
    """The password of an encrypted private key: the stripped text of ``passwd_file`` when it exists, as PyMotor
    reads its ``tls_config`` ``passwd_file`` (``password_utils.py:45-47``, ``cert_util.py:797-805``); else None."""
    if not passwd_file or not os.path.exists(passwd_file):
        return None
    with open(passwd_file, encoding="utf-8") as handle:
        return handle.read().strip() or None


def ssl_context(validate_certs=True, ca_path=None, client_cert=None, client_key=None, key_password_file=None):
    """The TLS context of a tcp endpoint: the server verified against ca_path (or the system CAs) unless
    validate_certs is false; a client certificate when given (Docker's --tlsverify setup), its key decrypted with
    the password of ``key_password_file``."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_path or None)
    if not validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if client_cert:
        password = key_password(key_password_file) or ""  # never None: OpenSSL would ask a terminal for one
        context.load_cert_chain(client_cert, client_key or None, password=lambda: password)
    return context


def _cert_path_default(params):
    """DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem) as the Docker CLI reads it, for the paths not given."""
    folder = os.environ.get("DOCKER_CERT_PATH")
    out = dict(params)
    if folder:
        for key, name in (("ca_path", "ca.pem"), ("client_cert", "cert.pem"), ("client_key", "key.pem")):
            if not out.get(key) and os.path.isfile(os.path.join(folder, name)):
                out[key] = os.path.join(folder, name)
    return out


def demux_stream(data, raw=False):
    """(stdout, stderr) bytes of a logs/attach stream: 8-byte frame headers (stream, 0, 0, 0, size) unless the
    container has a TTY (``raw``, or data that does not start with a frame header)."""
    if raw or len(data) < 8 or data[0] not in (0, 1, 2) or data[1:4] != b"\0\0\0":
        return data, b""
    out = {1: [], 2: []}
    pos = 0
    while pos + 8 <= len(data):
        kind, size = struct.unpack(">BxxxL", data[pos:pos + 8])
        out[2 if kind == 2 else 1].append(data[pos + 8:pos + 8 + size])
        pos += 8 + size
    return b"".join(out[1]), b"".join(out[2])


class DockerClient(object):
    """A small Engine API client. One HTTP connection per request (thread-safe; an instance may be shared)."""

    def __init__(self, docker_host=DEFAULT_DOCKER_HOST, tls=False, validate_certs=True, ca_path=None,
                 client_cert=None, client_key=None, tls_hostname=None, api_version="auto", timeout=60):
        self.docker_host = docker_host or DEFAULT_DOCKER_HOST
        parts = urlsplit(self.docker_host)
        self.scheme = parts.scheme
        if parts.scheme in ("unix", "http+unix"):
            self.socket_path = parts.path or "/var/run/docker.sock"
        elif parts.scheme in ("tcp", "http", "https"):
            if not parts.hostname:
                raise DockerUnavailable("docker_host %s has no host name" % self.docker_host)
            self.host, self.port = parts.hostname, parts.port or (2376 if tls or parts.scheme == "https" else 2375)
        else:
            raise DockerUnavailable("docker_host %s: only unix://, tcp://, http:// and https:// are supported"
                                    % self.docker_host)
        self.tls = bool(tls) or parts.scheme == "https" or bool(client_cert)
        self.tls_hostname = tls_hostname
        self.timeout = timeout
        self.context = None
        if self.tls and parts.scheme not in ("unix", "http+unix"):
            try:
                self.context = ssl_context(validate_certs, ca_path, client_cert, client_key)
            except (OSError, ssl.SSLError) as exc:
                raise DockerUnavailable("cannot load the TLS files for %s: %s" % (self.docker_host, exc))
        self.api_version = None if api_version in (None, "", "auto") else str(api_version).lstrip("v")

    @classmethod
    def from_params(cls, params):
        """A client from a module's parameters (its connection options)."""
        params = _cert_path_default(params)
        return cls(**dict((key, params.get(key)) for key in CONNECTION_OPTIONS if params.get(key) is not None))

    def clone(self):
        """A client to the same engine (the negotiated API version kept), for another thread."""
        other = object.__new__(DockerClient)
        other.__dict__.update(self.__dict__)
        return other

    # -- transport ---------------------------------------------------------------------------------------------
    def _connection(self, timeout=None):
        timeout = max(self.timeout, timeout or 0)
        if self.scheme in ("unix", "http+unix"):
            return UnixHTTPConnection(self.socket_path, timeout)
        if self.context is not None:
            return TLSConnection(self.host, self.port, timeout, self.context, self.tls_hostname or self.host)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _url(self, path, args, params, versioned=True):
        path = path.format(*[quote(str(a), safe="/:@") for a in args])
        if versioned:
            path = "/v%s%s" % (self.version(), path)
        if params:
            path += "?" + urlencode(dict((k, v) for k, v in params.items() if v is not None))
        return path

    def request(self, method, path, *args, **kwargs):
        """(status, headers, body bytes) of one call; raises DockerUnavailable, NotFound or DockerError.
        ``timeout``: seconds this call may take when longer than the client's (a stop that waits for the container)."""
        params, data, versioned = kwargs.get("params"), kwargs.get("data"), kwargs.get("versioned", True)
        headers = {"Host": "docker", "User-Agent": "pymotor.ascend"}
        body = None
        if data is not None:
            body = json.dumps(data).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif method == "POST":
            body = b""
        url = self._url(path, args, params, versioned)
        conn = self._connection(kwargs.get("timeout"))
        try:
            conn.request(method, url, body=body, headers=headers)
            response = conn.getresponse()
            content = response.read()  # http.client joins chunked (stream) responses
            status, got_headers = response.status, dict((k.lower(), v) for k, v in response.getheaders())
        except (OSError, http.client.HTTPException, ssl.SSLError, ssl.CertificateError) as exc:
            raise DockerUnavailable("cannot talk to the Docker engine at %s: %s"
                                    % (self.docker_host, exc.__class__.__name__ + (": %s" % exc if str(exc) else "")))
        finally:
            conn.close()
        if status >= 400:
            message = content.decode("utf-8", "replace").strip()
            try:
                message = json.loads(message).get("message") or message
            except (ValueError, AttributeError):
                pass
            where = path.split("?")[0].format(*args)
            raise (NotFound if status == 404 else DockerError)(status, "%s %s: %s" % (method, where, message))
        return status, got_headers, content

    def version(self):
        """The Engine API version used (negotiated once: the engine's own, at least MIN_API_VERSION)."""
        if self.api_version is None:
            info = self.get_json("/version", versioned=False)
            api = str(info.get("ApiVersion") or MIN_API_VERSION)
            if tuple(int(p) for p in re.findall(r"\d+", api)[:2]) < tuple(int(p) for p in MIN_API_VERSION.split(".")):
                raise DockerUnavailable("the Docker engine at %s speaks API %s; %s or newer is needed"
                                        % (self.docker_host, api, MIN_API_VERSION))
            self.api_version = api
        return self.api_version

    # -- calls -------------------------------------------------------------------------------------------------
    def get_json(self, path, *args, **kwargs):
        content = self.request("GET", path, *args, **kwargs)[2]
        try:
            return json.loads(content.decode("utf-8")) if content else None
        except ValueError:
            raise DockerUnavailable("the Docker engine at %s answered %s with something other than JSON: %r"
                                    % (self.docker_host, path, content[:200]))

    def post_json(self, path, *args, **kwargs):
        content = self.request("POST", path, *args, **kwargs)[2]
        return json.loads(content.decode("utf-8")) if content.strip() else {}

    def post(self, path, *args, **kwargs):
        return self.request("POST", path, *args, **kwargs)[0]

    def delete(self, path, *args, **kwargs):
        return self.request("DELETE", path, *args, **kwargs)[0]

    def inspect_container(self, name):
        """GET /containers/{name}/json, or None when there is no such container."""
        try:
            return self.get_json("/containers/{0}/json", name)
        except NotFound:
            return None

    def inspect_image(self, name):
        """GET /images/{name}/json, or None when the image is not on the host."""
        try:
            return self.get_json("/images/{0}/json", name)
        except NotFound:
            return None

    def job_containers(self, job_id):
        """The containers (running or not) labelled io.pymotor.job=<job_id>, as GET /containers/json lists them."""
        return self.get_json("/containers/json", params={
            "all": 1, "filters": json.dumps({"label": ["io.pymotor.job=%s" % job_id]})}) or []

    def logs(self, container, tail=200, timestamps=True):
        """(stdout, stderr) text of a container's log tail (GET /containers/{id}/logs)."""
        headers, content = self.request("GET", "/containers/{0}/logs", container, params={
            "stdout": 1, "stderr": 1, "tail": str(tail), "timestamps": 1 if timestamps else 0})[1:]
        raw = headers.get("content-type", "") == "application/vnd.docker.raw-stream"
        out, err = demux_stream(content, raw)
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def stop(self, container, wait):
        """POST /containers/{id}/stop: SIGTERM, SIGKILL after ``wait`` seconds; False when it was not running."""
        return self.request("POST", "/containers/{0}/stop", container, params={"t": int(wait)},
                            timeout=int(wait) + 30)[0] != 304

    def archive(self, container, path):
        """A tar stream (bytes) of ``path`` in the container (GET /containers/{id}/archive, what docker cp does)."""
        return self.request("GET", "/containers/{0}/archive", container, params={"path": path})[2]

    def copy_out_of_image(self, image, path, labels=None):
        """A tar stream of ``path`` in ``image``: a created, never started container (no network), archived,
        removed again."""
        created = self.post_json("/containers/create", data={
            "Image": image, "Entrypoint": ["/bin/true"], "Cmd": [], "NetworkDisabled": True,
            "Labels": dict(labels or {}), "HostConfig": {"NetworkMode": "none"}})
        try:
            return self.archive(created["Id"], path)
        finally:
            try:
                self.delete("/containers/{0}", created["Id"], params={"force": 1})
            except (DockerError, DockerUnavailable):
                pass

    def run_once(self, image, argv, labels=None, timeout=300):
        """Run ``argv`` once in ``image`` and remove the container: (exit code, stdout, stderr). No network, every
        capability dropped, no new privileges, a read-only root file system with a small /tmp (what docker run
        --rm --network none --cap-drop ALL --read-only would give)."""
        created = self.post_json("/containers/create", data={
            "Image": image, "Entrypoint": [argv[0]], "Cmd": list(argv[1:]), "NetworkDisabled": True,
            # HOME on the writable /tmp: imports that create caches under ~ (vLLM's) still work
            "Env": ["HOME=/tmp", "PYTHONDONTWRITEBYTECODE=1"],
            "Labels": dict(labels or {}), "HostConfig": {
                "NetworkMode": "none", "CapDrop": ["ALL"], "SecurityOpt": ["no-new-privileges"],
                "ReadonlyRootfs": True, "Tmpfs": {"/tmp": "rw,size=64m"}}})
        try:
            self.post("/containers/{0}/start", created["Id"])
            waited = self.post_json("/containers/{0}/wait", created["Id"], timeout=timeout)
            out, err = self.logs(created["Id"], tail="all", timestamps=False)
            return int(waited.get("StatusCode", -1)), out, err
        finally:
            try:
                self.delete("/containers/{0}", created["Id"], params={"force": 1})
            except (DockerError, DockerUnavailable):
                pass
