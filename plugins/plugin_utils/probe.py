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

import http.client
import json
import os
import ssl
import sys
import urllib.parse


def _context(tls):
    """The management TLS context; an encrypted key's password from ``passwd_file`` (stripped text, as upstream's
    ``password_utils.py:45-47`` reads it)."""
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
    url = urllib.parse.urlsplit(target["url"])
    conn = None
    try:
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout, context=_context(target["tls"]))
        else:
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        conn.request("GET", url.path, headers={"User-Agent": "motor-probe"})
        return conn.getresponse().status == 200
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        if conn is not None:
            conn.close()


def main(argv):
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    ok = alive(config["target"], config["timeout"])
    print("%s %s" % ("alive" if ok else "not alive:", config["target"]["url"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
