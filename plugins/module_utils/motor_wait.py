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
STALL_PROBE_SECONDS = 5.0  # how often the stall probes run while a check is polled (each probe is 1 + n GETs)

_TLS_OPTIONS = dict(
    ca_file=dict(type="str", default=""),
    cert_file=dict(type="str", default=""),
    key_file=dict(type="str", default="", no_log=False),
)
_TARGET_OPTIONS = dict(url=dict(type="str", required=True), tls=dict(type="dict", options=_TLS_OPTIONS))

ARGUMENT_SPEC = dict(
    checks=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        url=dict(type="str", required=True),
        until=dict(type="str", required=True, choices=list(CONDITIONS)),
        endpoints=dict(type="list", elements="raw", default=[]),
        timeout=dict(type="int", default=300),
        waiting_for=dict(type="list", elements="str", default=[]),
        tls=dict(type="dict", options=_TLS_OPTIONS),
    )),
    stalls=dict(type="list", elements="dict", default=[], options=dict(
        instance=dict(type="str", required=True),
        container=dict(type="str", required=True),
        node_manager=dict(type="dict", required=True, options=_TARGET_OPTIONS),
        engines=dict(type="list", elements="dict", required=True, options=_TARGET_OPTIONS),
    )),
    stall_timeout=dict(type="int", default=0),
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


class StallWatch:
    """Engine pods whose start command never came: the node manager answers that its endpoints are normal (it has
    none: upstream's ``check_all_endpoints_normal`` over an empty list) while none of its engines' management ports
    answers, for ``timeout`` seconds in a row. Upstream's controller drops a node manager whose status request is
    refused when it assembles the instance (the node manager registers before its port is bound), and that pod never
    registers again: its instance needs a restart. ``stalls``: ARGUMENT_SPEC's; probed every STALL_PROBE_SECONDS."""

    def __init__(self, stalls, timeout, request_timeout, get=get_answer, clock=time.monotonic):
        self.pending = list(stalls) if timeout > 0 else []
        self.timeout, self.request_timeout, self.get, self.clock = timeout, request_timeout, get, clock
        self.since = {}  # container -> when it was first seen stalled (in a row)
        self.probed = None
        self.stalled = []  # the stalls that lasted ``timeout``

    def _judge(self, stall):
        """"stalled", "started" (it got its start command: the race is over for this pod) or "unknown" (not up)."""
        status, body, dummy = self.get(stall["node_manager"]["url"], self.request_timeout, stall["node_manager"].get("tls"))
        if status != 200:
            return "unknown"
        if not condition_met("status_ok", status, body):
            return "started"  # endpoints that are not normal yet: a start command came
        engines_up = any(self.get(e["url"], self.request_timeout, e.get("tls"))[0] != -1 for e in stall["engines"])
        return "started" if engines_up else "stalled"

    def poll(self):
        """Probe (at most every STALL_PROBE_SECONDS); True when some pod has stalled for ``timeout`` seconds."""
        now = self.clock()
        if not self.pending or (self.probed is not None and now - self.probed < STALL_PROBE_SECONDS):
            return bool(self.stalled)
        self.probed = now
        for stall in list(self.pending):
            verdict = self._judge(stall)
            if verdict == "started":  # never probed again: a deploy's wait costs no requests once pods are up
                self.pending.remove(stall)
            if verdict != "stalled":
                self.since.pop(stall["container"], None)
                continue
            first = self.since.setdefault(stall["container"], now)
            if now - first >= self.timeout and stall not in self.stalled:
                self.stalled.append(stall)
        return bool(self.stalled)

    def instances(self):
        """The engine instances (job names) of the stalled pods, in plan order."""
        out = []
        for stall in self.stalled:
            if stall["instance"] not in out:
                out.append(stall["instance"])
        return out


def wait_for(check, interval, request_timeout, get=get_answer, clock=time.monotonic, sleep=time.sleep, watch=None):
    """Poll one check until it holds, times out or ``watch`` (a StallWatch) sees a stalled pod: (held, polls,
    seconds, last answer text)."""
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
        if clock() - started + interval > check["timeout"] or (watch is not None and watch.poll()):
            return False, polls, clock() - started, answer[:ANSWER_LIMIT]
        sleep(interval)


def _stalled_result(watch, check, answer, done):
    names = ", ".join(s["container"] for s in watch.stalled)
    return dict(failed=True, changed=False, stalled=watch.instances(), check=check["name"], until=check["until"],
                url=check["url"], last_answer=answer, waiting_for=check["waiting_for"], checks=done,
                msg="the node managers of %s report normal while none of their engines answers, for %s s: their "
                    "start command never came (upstream's controller drops a node manager it cannot reach when the "
                    "instance assembles, and that pod does not register again); waiting for \"%s\"" % (
                        names, watch.timeout, check["name"]))


def run_checks(params, wait=None, get=get_answer, clock=time.monotonic, sleep=time.sleep):
    """Wait for every check of ``params`` (ARGUMENT_SPEC, validated) in order: the result of the action. When a pod
    of ``stalls`` stalls (StallWatch), the result fails with ``stalled``: the engine instances to restart."""
    watch = StallWatch(params.get("stalls") or [], params.get("stall_timeout") or 0, params["request_timeout"], get=get,
                       clock=clock)
    if wait is None:
        def wait(check, interval, request_timeout):
            return wait_for(check, interval, request_timeout, get=get, clock=clock, sleep=sleep, watch=watch)
    done = []
    for check in params["checks"]:
        held, polls, seconds, answer = wait(check, params["interval"], params["request_timeout"])
        if not held and watch.stalled:
            return _stalled_result(watch, check, answer, done)
        if not held:
            return dict(failed=True, changed=False,
                        msg='"%s" did not hold within %s s (%s: %s)' % (check["name"], check["timeout"], check["url"], answer),
                        check=check["name"], until=check["until"], url=check["url"], last_answer=answer,
                        waiting_for=check["waiting_for"], checks=done)
        done.append({"name": check["name"], "seconds": round(seconds, 2), "polls": polls})
    return dict(changed=False, checks=done)
