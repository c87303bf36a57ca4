# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Poll PyMotor's management endpoints until readiness conditions hold (the pymotor.ascend.motor_wait action, which
runs in the controller's worker process: no module run for the waits of a deploy)."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import ssl_context
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import CONDITIONS, condition_met, missing_endpoints

ANSWER_LIMIT = 300

ARGUMENT_SPEC = dict(
    checks=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        url=dict(type="str", required=True),
        until=dict(type="str", required=True, choices=list(CONDITIONS)),
        endpoints=dict(type="list", elements="raw", default=[]),
        timeout=dict(type="int", default=300),
        waiting_for=dict(type="list", elements="str", default=[]),
        tls=dict(type="dict", options=dict(
            ca_file=dict(type="str", default=""),
            cert_file=dict(type="str", default=""),
            key_file=dict(type="str", default="", no_log=False),
        )),
    )),
    interval=dict(type="float", default=0.5),
    request_timeout=dict(type="float", default=5),
)


def tls_kwargs(tls):
    """open_url's arguments for an https check: verify the server against ``ca_file`` (hostname included) and
    present ``cert_file``/``key_file`` as the client certificate, as upstream's probe does."""
    if not tls:
        return {}
    out = {"validate_certs": True}
    if tls.get("ca_file"):
        out["ca_path"] = tls["ca_file"]
    if tls.get("cert_file") and tls.get("key_file"):
        out.update(client_cert=tls["cert_file"], client_key=tls["key_file"])
    return out


# TLS contexts by (CA, client certificate, key): loading a CA bundle is most of an https request's CPU
_CONTEXTS = {}


def _context(tls):
    key = (tls.get("ca_file") or "", tls.get("cert_file") or "", tls.get("key_file") or "")
    if key not in _CONTEXTS:
        _CONTEXTS[key] = ssl_context(True, key[0], key[1] if key[1] and key[2] else None, key[2] or None)
    return _CONTEXTS[key]


def get_answer(url, request_timeout, tls=None):
    """(status, parsed JSON or None, text): status -1 when nothing answered. One GET as ``tls_kwargs`` describes it
    (https verified against ``ca_file`` with the hostname, the client certificate presented; no proxy, no
    redirects followed), on the standard library's HTTP client: Ansible's ``open_url`` builds its handlers and a TLS
    context for every request, about 25 ms of CPU, and a deploy's readiness waits poll every 0.5 s."""
    parts = urlsplit(url)
    path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    try:
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=request_timeout,
                                               context=_context(tls or {}))
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=request_timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            status, raw = response.status, response.read()
        finally:
            conn.close()
    except Exception as exc:  # connection refused, timeout, reset, TLS: the service is not up (or not trusted) yet
        return -1, None, to_native(exc)
    text = to_native(raw or b"", errors="replace")
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    return status, body, text


def wait_for(check, interval, request_timeout, get=get_answer, clock=time.monotonic, sleep=time.sleep):
    """Poll one check until it holds or times out: (held, polls, seconds, last answer text)."""
    started = clock()
    polls = 0
    while True:
        polls += 1
        status, body, text = get(check["url"], request_timeout, check.get("tls"))
        if condition_met(check["until"], status, body, check.get("endpoints")):
            return True, polls, clock() - started, ""
        answer = "no answer (%s)" % text if status == -1 else "HTTP %s %s" % (status, text)
        if check["until"] == "endpoints" and status == 200:
            answer += "; missing %s" % ", ".join(missing_endpoints(body, check.get("endpoints")))
        if clock() - started + interval > check["timeout"]:
            return False, polls, clock() - started, answer[:ANSWER_LIMIT]
        sleep(interval)


def run_checks(params, wait=wait_for):
    """Wait for every check of ``params`` (ARGUMENT_SPEC, validated) in order: the result of the action."""
    done = []
    for check in params["checks"]:
        held, polls, seconds, answer = wait(check, params["interval"], params["request_timeout"])
        if not held:
            return dict(failed=True, changed=False,
                        msg='"%s" did not hold within %s s (%s: %s)' % (check["name"], check["timeout"], check["url"], answer),
                        check=check["name"], until=check["until"], url=check["url"], last_answer=answer,
                        waiting_for=check["waiting_for"], checks=done)
        done.append({"name": check["name"], "seconds": round(seconds, 2), "polls": polls})
    return dict(changed=False, checks=done)
