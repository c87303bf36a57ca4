# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The Docker health check of a pymotor.ascend container (standard library only; ``reconcile/probes.py``).

Copied verbatim into the container's config directory as ``motor_probe.py`` and run by Docker's health check:
``python3 motor_probe.py motor_probe.json``. Like upstream's ``examples/deployer/probe/probe.py`` (``main``,
``send_http_request``) it GETs the role's ``/liveness`` on its API port, with the management TLS settings when they
are on, and exits 0 on a 200 answer, 1 otherwise. Upstream's probe needs ``httpx`` and Kubernetes' ``POD_IP``; this
one runs with any ``python3`` (the stand-in image's too).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.parse

# Docker runs this every 10 s in every controller and coordinator: a status line over a plain socket, and ``ssl`` only
# imported for https, start in about half the CPU time of ``http.client`` + ``ssl`` (whose imports are most of a run;
# ``urllib.parse`` costs next to nothing).


def _context(tls):
    """The management TLS context; an encrypted key's password from ``passwd_file`` (stripped text, as upstream's
    ``password_utils.py:45-47`` reads it)."""
    import ssl  # pylint: disable=import-outside-toplevel

    context = ssl.create_default_context(cafile=tls.get("ca_file") or None)
    context.check_hostname = bool(tls.get("check_hostname"))
    if tls.get("cert_file"):
        password = ""  # never None: OpenSSL would ask a terminal for an encrypted key's password
        if tls.get("passwd_file") and os.path.exists(tls["passwd_file"]):
            with open(tls["passwd_file"], encoding="utf-8") as handle:
                password = handle.read().strip()
        context.load_cert_chain(tls["cert_file"], tls.get("key_file") or None, password=lambda: password)
    return context


def alive(target, timeout):
    """True when GET ``target["url"]`` answers 200 within ``timeout`` seconds (a TLS setup that fails: False)."""
    try:
        url = urllib.parse.urlsplit(target["url"])
        host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((host, port), timeout=timeout) as raw:
            conn = raw
            if url.scheme == "https":
                conn = _context(target["tls"]).wrap_socket(raw, server_hostname=host)
            try:
                conn.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: motor-probe\r\nConnection: close\r\n\r\n"
                              % (url.path or "/", url.netloc)).encode("ascii"))
                head = b""
                while b"\r\n" not in head and len(head) < 1024:
                    chunk = conn.recv(1024)
                    if not chunk:
                        break
                    head += chunk
            finally:
                if conn is not raw:
                    conn.close()
        status = head.split(b"\r\n", 1)[0].split()
        return len(status) >= 2 and status[0].startswith(b"HTTP/") and status[1] == b"200"
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False


def main(argv):
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    ok = alive(config["target"], config["timeout"])
    print("%s %s" % ("alive" if ok else "not alive:", config["target"]["url"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
