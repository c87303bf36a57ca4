"""A fake Docker Engine API server for the unit tests of module_utils/motor_docker.py: the standard library's
http.server on a unix socket (or on TCP with TLS and self-signed certificates made with ``cryptography``). It answers
the calls the collection makes, with the Engine's status codes and error bodies, chunked where the Engine streams."""

from __future__ import annotations

import datetime
import io
import json
import socketserver
import ssl
import struct
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

API = "1.43"


def frame(kind, data):
    return struct.pack(">BxxxL", kind, len(data)) + data


def tar_of(files, top):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(top)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo("%s/%s" % (top, name))
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Engine:
    """The state the fake serves: containers (name -> inspection), images (name -> id), files of images."""

    def __init__(self, api=API):
        self.api = api
        self.containers = {}
        self.images = {}
        self.image_files = {}  # image -> {directory: {name: bytes}}
        self.calls = []
        self.logs = {}  # container id -> (stdout, stderr, tty)
        self.exit_codes = {}  # container id -> what POST /containers/{id}/wait answers (default 0)
        self.created = []  # the bodies of POST /containers/create
        self.on_state = None  # optional: called (name, container) after a start, restart, stop or removal
        self.gate = None  # optional: called with the handler before a request; False: drop it unanswered

    def changed(self, name, container):
        if self.on_state is not None:
            self.on_state(name, container)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine = None  # set per server

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass

    def _send(self, status, body=b"", content_type="application/json", chunked=False):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(body), 7):  # small chunks, as a stream arrives
                part = body[start:start + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _error(self, status, message):
        self._send(status, {"message": message})

    def _route(self, method):
        engine = self.engine
        if engine.gate is not None and engine.gate(self) is False:
            self.close_connection = True
            return None
        parts = urlsplit(self.path)
        query = dict((k, v[0]) for k, v in parse_qs(parts.query).items())
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null") if length else None
        engine.calls.append((method, parts.path, query))
        if parts.path == "/version":
            return self._send(200, {"Version": "27.0.0", "ApiVersion": engine.api})
        prefix = "/v%s" % engine.api
        if not parts.path.startswith(prefix + "/"):
            return self._error(400, "client version mismatch: %s" % parts.path)
        path = parts.path[len(prefix):]
        seg = path.strip("/").split("/")
        if path == "/version":
            return self._send(200, {"Version": "27.0.0", "ApiVersion": engine.api})
        if path == "/info":
            return self._send(200, {"ServerVersion": "27.0.0", "Containers": len(engine.containers)})
        if path == "/boom":
            return self._error(500, "something broke inside")
        if path == "/notjson":
            return self._send(200, b"<html>proxy</html>", "text/html")
        if path == "/containers/json":
            labels = json.loads(query.get("filters", "{}")).get("label", [])
            rows = []
            for name, c in engine.containers.items():
                have = ["%s=%s" % kv for kv in c["Config"]["Labels"].items()]
                if all(label in have for label in labels):
                    rows.append({"Id": c["Id"], "Names": ["/" + name], "State": c["State"]["Status"],
                                 "Status": "Up 1 second" if c["State"].get("Running") else "Exited (0) 1 second ago",
                                 "Labels": c["Config"]["Labels"]})
            return self._send(200, rows, chunked=True)
        if path == "/containers/create" and method == "POST":
            engine.created.append(body)
            if body["Image"] not in engine.images:
                return self._error(404, "No such image: %s" % body["Image"])
            name = query.get("name") or "anon%d" % len(engine.containers)
            engine.containers[name] = {"Id": "id-" + name, "Name": "/" + name, "Image": engine.images[body["Image"]],
                                       "Config": {"Labels": body.get("Labels") or {}, "Image": body["Image"]},
                                       "State": {"Status": "created", "Running": False}, "RestartCount": 0}
            return self._send(201, {"Id": "id-" + name, "Warnings": []})
        if seg[0] == "images" and seg[-1] == "json":
            name = "/".join(seg[1:-1])
            if name not in engine.images:
                return self._error(404, "No such image: %s" % name)
            return self._send(200, {"Id": engine.images[name]})
        if seg[0] == "containers" and len(seg) >= 2:
            found = [(n, c) for n, c in engine.containers.items() if seg[1] in (n, c["Id"])]
            if not found:
                return self._error(404, "No such container: %s" % seg[1])
            name, container = found[0]
            action = seg[2] if len(seg) > 2 else ""
            if method == "DELETE" and not action:
                del engine.containers[name]
                container["State"] = {"Status": "removed", "Running": False}
                engine.changed(name, container)
                return self._send(204)
            if action == "json":
                return self._send(200, container)
            if action == "wait" and method == "POST":  # the container "ran": its exit code from exit_codes
                container["State"] = {"Status": "exited", "Running": False}
                return self._send(200, {"StatusCode": engine.exit_codes.get(container["Id"], 0)})
            if action == "start":
                container["State"] = {"Status": "running", "Running": True}
                engine.changed(name, container)
                return self._send(204)
            if action == "restart" and method == "POST":
                container["State"] = {"Status": "running", "Running": True}
                container["RestartCount"] = container.get("RestartCount", 0) + 1
                engine.changed(name, container)
                return self._send(204)
            if action == "stop" and method == "POST":
                if not container["State"].get("Running"):
                    return self._send(304)  # the Engine's answer for a container that is not running
                container["State"] = {"Status": "exited", "Running": False, "ExitCode": 143}
                engine.changed(name, container)
                return self._send(204)
            if action == "logs":
                out, err, tty = engine.logs.get(container["Id"], (b"", b"", False))
                if tty:
                    return self._send(200, out, "application/vnd.docker.raw-stream", chunked=True)
                return self._send(200, frame(1, out) + frame(2, err) if err else frame(1, out),
                                  "application/vnd.docker.multiplexed-stream", chunked=True)
            if action == "archive":
                image = container["Image"]
                wanted = query.get("path", "")
                files = engine.image_files.get(image, {}).get(wanted)
                if files is None:
                    return self._error(404, "Could not find the file %s in container %s" % (wanted, name))
                return self._send(200, tar_of(files, wanted.rstrip("/").rsplit("/", 1)[-1]), "application/x-tar")
        return self._error(404, "page not found")

    def do_GET(self):  # pylint: disable=invalid-name
        self._route("GET")

    def do_POST(self):  # pylint: disable=invalid-name
        self._route("POST")

    def do_DELETE(self):  # pylint: disable=invalid-name
        self._route("DELETE")


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        sock, _addr = super().get_request()
        return sock, ("local", 0)  # http.server wants a (host, port) pair


class TCPServer(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True


def serve(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def unix_engine(path, engine):
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    return serve(UnixServer(str(path), handler))


def make_certs(folder):
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate, signed by the CA (PEM files)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def write_key(key, name):
        (folder / name).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))

    def cert(subject_cn, key, issuer_cn, issuer_key, ca=False, sans=(), usage=None):
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_cn)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
                critical=True)
            builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        else:
            builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer_key.public_key()), critical=False)
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        if usage:
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("fake-docker-ca", ca_key, "fake-docker-ca", ca_key, ca=True)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name, sans, usage in (
            ("server", [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
             ExtendedKeyUsageOID.SERVER_AUTH),
            ("client", [], ExtendedKeyUsageOID.CLIENT_AUTH)):
        key = ec.generate_private_key(ec.SECP256R1())
        write_key(key, name + "-key.pem")
        (folder / (name + ".pem")).write_bytes(
            cert(name, key, "fake-docker-ca", ca_key, sans=sans, usage=usage).public_bytes(serialization.Encoding.PEM))
    return folder


def tls_engine(certs, engine, require_client_cert=False):
    """The fake engine on 127.0.0.1:<free port> over TLS (the server certificate of make_certs)."""
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    server = TCPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certs / "server.pem"), str(certs / "server-key.pem"))
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(str(certs / "ca.pem"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return serve(server)
