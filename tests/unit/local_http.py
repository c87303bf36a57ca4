# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A throw-away HTTP server on 127.0.0.1 for the unit tests of the collection's HTTP clients (waits, healers,
verify's requests): real sockets and real HTTP, answers chosen by the test."""

from __future__ import annotations

import contextlib
import http.server
import threading


@contextlib.contextmanager
def local_server(answer, tls=None):
    """Serve GET and POST with ``answer(method, path, headers, body) -> (status, body bytes, headers dict)`` on a free
    port of 127.0.0.1 until the block ends; yield the base URL (``http://127.0.0.1:<port>``). ``tls``: a server
    ``ssl.SSLContext`` (https; with a client certificate the context verified, ``answer`` sees the header
    ``X-Client-Certificate: verified``)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            if tls is not None and self.connection.getpeercert():
                self.headers["X-Client-Certificate"] = "verified"
            status, body, headers = answer(self.command, self.path, self.headers,
                                           self.rfile.read(length) if length else b"")
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer  # noqa: N815 (http.server's names)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield "%s://127.0.0.1:%d" % ("http" if tls is None else "https", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
