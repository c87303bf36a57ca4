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
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import ssl_context
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import (
    CONDITIONS, condition_met, missing_endpoints, pod_verdict, requests_in_flight, routed_instances, unrouted)

ANSWER_LIMIT = 300
STALL_PROBE_SECONDS = 5.0  # how often the stall probes run while the checks are polled (each probe is 1 + n GETs)
LISTED_LIMIT = 20  # failing checks named one by one in ``msg`` (all of them are in ``failing``)
PROGRESS_SECONDS = 20.0  # a wait prints a progress line at least this often (an operator sees it move within 30 s)
PROGRESS_LISTED = 6  # checks named one by one in a progress line (the rest counted)

_TLS_OPTIONS = dict(
    ca_file=dict(type="str", default=""),
    cert_file=dict(type="str", default=""),
    key_file=dict(type="str", default="", no_log=False),
    passwd_file=dict(type="str", default="", no_log=False),  # a path: the password is the file's content
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
        host=dict(type="str", default=""),
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
    progress_every=dict(type="float", default=PROGRESS_SECONDS),
    request_timeout=dict(type="float", default=5),
    deadline=dict(type="int", default=0),
    concurrency=dict(type="int", default=16),
    reads=dict(type="dict", default={}),
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
    """The TLS context of a target's files; an encrypted key's password from ``passwd_file`` (upstream's rule)."""
    key = (tls.get("ca_file") or "", tls.get("cert_file") or "", tls.get("key_file") or "", tls.get("passwd_file") or "")
    if key not in _CONTEXTS:
        _CONTEXTS[key] = ssl_context(True, key[0], key[1] if key[1] and key[2] else None, key[2] or None,
                                     key_password_file=key[3] or None)
    return _CONTEXTS[key]


def get_answer(url, request_timeout, tls=None, body=None, headers=None):
    """(status, parsed JSON or None, text): status -1 when nothing answered. One GET (with ``body``: one POST of it
    as JSON), with ``headers``, as ``tls_kwargs`` describes it
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
            if body is None:
                conn.request("GET", path, headers=dict(headers or {}))
            else:
                conn.request("POST", path, body=json.dumps(body),
                             headers=dict({"Content-Type": "application/json"}, **(headers or {})))
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


class Poller:
    """Runs GETs (or any call) over a bounded thread pool: a dead or black-holed endpoint holds one worker for its
    request timeout while the others go on. ``workers`` <= 1 runs them one after the other in this thread."""

    def __init__(self, workers):
        self.workers = max(1, int(workers or 1))
        self._pool = None

    def map(self, func, items):
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            return [func(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="motor_wait")
        return list(self._pool.map(func, items))

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class StallWatch:
    """Engine pods whose start command never came: the node manager answers that its endpoints are normal (it has
    none: upstream's ``check_all_endpoints_normal`` over an empty list) while none of its engines' management ports
    answers, for ``timeout`` seconds in a row. Upstream's controller drops a node manager whose status request is
    refused when it assembles the instance (the node manager registers before its port is bound), and that pod never
    registers again: its instance needs a restart. ``stalls``: ARGUMENT_SPEC's; probed every STALL_PROBE_SECONDS,
    the pods concurrently through ``poller`` (a Poller; None: one after the other)."""

    def __init__(self, stalls, timeout, request_timeout, get=get_answer, clock=time.monotonic, poller=None):
        self.pending = list(stalls) if timeout > 0 else []
        self.timeout, self.request_timeout, self.get, self.clock = timeout, request_timeout, get, clock
        self.poller = poller or Poller(1)
        self.since = {}  # container -> when it was first seen stalled (in a row)
        self.probed = None
        self.stalled = []  # the stalls that lasted ``timeout``

    def _judge(self, stall):
        """"stalled", "started" (it got its start command: the race is over for this pod) or "unknown" (not up)."""
        status, body, dummy = self.get(stall["node_manager"]["url"], self.request_timeout, stall["node_manager"].get("tls"))
        return pod_verdict(status, body, lambda: any(self.get(e["url"], self.request_timeout, e.get("tls"))[0] != -1
                                                     for e in stall["engines"]))

    def poll(self):
        """Probe (at most every STALL_PROBE_SECONDS); True when some pod has stalled for ``timeout`` seconds."""
        now = self.clock()
        if not self.pending or (self.probed is not None and now - self.probed < STALL_PROBE_SECONDS):
            return bool(self.stalled)
        self.probed = now
        pods = list(self.pending)
        for stall, verdict in zip(pods, self.poller.map(self._judge, pods)):
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


def describe(check, status, body, text):
    """The answer of a check that does not hold yet, as the failure shows it."""
    answer = "no answer (%s)" % text if status == -1 else "HTTP %s %s" % (status, text)
    if check["until"] == "endpoints" and status == 200:
        answer += "; missing %s" % ", ".join(missing_endpoints(body, check.get("endpoints")))
    if check["until"] == "idle" and status == 200:
        held = requests_in_flight(text)
        answer = "no vLLM request gauges" if held is None else "%s request(s) running or waiting" % int(held)
    if check["until"] == "routes" and status == 200:
        answer = "not routed: %s" % ", ".join(unrouted(routed_instances(text), check.get("endpoints")))
    return answer[:ANSWER_LIMIT]


def check_host(check):
    """The host a check talks to: its ``host`` (the inventory name, when the decision gives it), else the URL's."""
    return check.get("host") or urlsplit(check["url"]).hostname or "?"


def wait_for(check, interval, request_timeout, get=get_answer, clock=time.monotonic, sleep=time.sleep, watch=None):
    """Poll one check until it holds, times out or ``watch`` (a StallWatch) sees a stalled pod: (held, polls,
    seconds, last answer text). ``run_checks`` with one check."""
    dummy, states = _wait({"checks": [dict({"name": check["url"]}, **check)], "interval": interval, "request_timeout": request_timeout},
                          get, clock, sleep, watch)
    return states[0].held, states[0].polls, states[0].seconds, states[0].answer


class _State:
    __slots__ = ("held", "polls", "seconds", "answer")

    def __init__(self):
        self.held, self.polls, self.seconds, self.answer = False, 0, 0.0, ""


def _poll_round(checks, states, pending, request_timeout, get, poller, started, clock):
    """One GET of every pending check (concurrently); the indexes of those that still do not hold."""
    def one(i):
        return get(checks[i]["url"], request_timeout, checks[i].get("tls"))
    answers = poller.map(one, pending)
    elapsed = clock() - started
    left = []
    for i, (status, body, text) in zip(pending, answers):
        state = states[i]
        state.polls += 1
        state.seconds = elapsed
        if condition_met(checks[i]["until"], status, body, checks[i].get("endpoints"), text):
            state.held, state.answer = True, ""
        else:
            state.answer = describe(checks[i], status, body, text)
            left.append(i)
    return left


def _read(get, target, request_timeout):
    if target.get("body") is None:
        return get(target["url"], request_timeout, target.get("tls"))
    return get(target["url"], request_timeout, target.get("tls"), target["body"], target.get("headers"))


def read_all(reads, request_timeout, concurrency, get=get_answer):
    """GET every target of ``reads`` once, concurrently (verify's observations): ``{group: {name: target}}`` (a
    target: ``url`` and optional ``tls``; with ``body``, a POST of it with the target's ``headers``, which the action
    adds, never the arguments) -> ``{group: {name: {status, json, error}}}``, status -1 and ``error`` when nothing
    answered, ``json`` {} when the answer is not JSON (what verify judges, as a ``uri`` loop gave it); with ``text``
    true in the target, its answer's ``text`` too."""
    items = []
    for group, targets in (reads or {}).items():
        if not isinstance(targets, dict):
            raise ValueError("reads.%s: must be a mapping of names to targets (url, tls)" % group)
        for name, target in targets.items():
            if not isinstance(target, dict) or not target.get("url"):
                raise ValueError("reads.%s.%s: a target needs a url" % (group, name))
            items.append((group, name, target))
    out = {group: {} for group in reads or {}}
    with Poller(concurrency) as poller:
        answers = poller.map(lambda item: _read(get, item[2], request_timeout), items)
    for (group, name, target), (status, body, text) in zip(items, answers):
        out[group][name] = {"status": status, "json": body if body is not None else {},
                            "error": text[:ANSWER_LIMIT] if status == -1 else ""}
        if target.get("text") and status != -1:  # a page that is no JSON (Prometheus text), asked for by name
            out[group][name]["text"] = text
    return out


def _names(checks, indexes):
    names = [checks[i]["name"] for i in indexes[:PROGRESS_LISTED]]
    if len(indexes) > PROGRESS_LISTED:
        names.append("%d more" % (len(indexes) - PROGRESS_LISTED))
    return ", ".join(names)


def progress_line(checks, states, pending, elapsed, deadline):
    """One plain line of a wait that goes on: how long, what is ready, what is not (with its last answer), time left."""
    ready = [i for i, state in enumerate(states) if state.held]
    first = pending[0]
    line = "waiting %d s: ready %d/%d" % (elapsed, len(ready), len(checks))
    if ready:
        line += " (%s)" % _names(checks, ready)
    line += "; not ready: %s (%s: %s)" % (_names(checks, pending), checks[first]["name"], states[first].answer[:120])
    return line + "; %d s left" % max(0, deadline - elapsed)


def run_checks(params, get=get_answer, clock=time.monotonic, sleep=time.sleep, progress=None):
    """Wait for every check of ``params`` (ARGUMENT_SPEC, validated): the result of the action.

    One wait for all checks: each round GETs every check that does not hold yet, concurrently (at most
    ``concurrency`` requests at a time), and a check that held is not asked again. The wait ends when all hold,
    when a check's own ``timeout`` (seconds since the wait began) or the whole wait's ``deadline`` (default: the
    longest check timeout) passes, or when a watched pod stalls (StallWatch, probed concurrently too): then it fails
    once, listing every check that does not hold with its host and last answer (``failing``), and with ``stalled``
    (the engine instances to restart) when pods stalled. ``progress`` (a function of one line; the action gives
    Ansible's display) gets progress_line at least every ``progress_every`` seconds while checks do not hold."""
    return _wait(params, get, clock, sleep, None, progress)[0]


def _wait(params, get, clock, sleep, watch, progress=None):
    """run_checks' result and the state of every check (held, polls, seconds, answer)."""
    checks = params["checks"]
    interval, request_timeout = params["interval"], params["request_timeout"]
    deadline = params.get("deadline") or max([c["timeout"] for c in checks] or [0])
    with Poller(params.get("concurrency") or 1) as poller:
        if watch is None:
            watch = StallWatch(params.get("stalls") or [], params.get("stall_timeout") or 0, request_timeout,
                               get=get, clock=clock, poller=poller)
        states = [_State() for dummy in checks]
        started = clock()
        pending = list(range(len(checks)))
        expired = []
        every = params.get("progress_every") or PROGRESS_SECONDS
        reported = started
        while pending:
            pending = _poll_round(checks, states, pending, request_timeout, get, poller, started, clock)
            if not pending:
                break
            elapsed = clock() - started
            expired = [i for i in pending if elapsed + interval > min(checks[i]["timeout"], deadline)]
            if expired or watch.poll():
                break
            if progress is not None and clock() - reported >= every:
                reported = clock()
                progress(progress_line(checks, states, pending, elapsed, deadline))
            sleep(interval)
    result = dict(changed=False, checks=[{"name": c["name"], "seconds": round(s.seconds, 2), "polls": s.polls}
                                         for c, s in zip(checks, states) if s.held])
    if pending:
        result.update(_failure(checks, states, pending, expired, watch))
    return result, states


def _failure(checks, states, pending, expired, watch):
    """The failed result: every check that does not hold, the first one that ran out of time first."""
    order = [i for i in pending if i in expired] + [i for i in pending if i not in expired]
    failing = [{"name": checks[i]["name"], "host": check_host(checks[i]), "url": checks[i]["url"],
                "until": checks[i]["until"], "last_answer": states[i].answer, "timed_out": i in expired,
                "waiting_for": list(checks[i].get("waiting_for") or [])} for i in order]
    first = checks[order[0]]
    waiting_for = list(dict.fromkeys(role for f in failing for role in f["waiting_for"]))
    out = dict(failed=True, check=first["name"], until=first["until"], url=first["url"],
               last_answer=states[order[0]].answer, waiting_for=waiting_for, failing=failing,
               failing_hosts=list(dict.fromkeys(f["host"] for f in failing)))
    if watch.stalled:
        names = ", ".join(s["container"] for s in watch.stalled)
        out.update(stalled=watch.instances(), msg=(
            "the node managers of %s report normal while none of their engines answers, for %s s: their start "
            "command never came (upstream's controller drops a node manager it cannot reach when the instance "
            "assembles, and that pod does not register again); waiting for \"%s\"" % (names, watch.timeout,
                                                                                      first["name"])))
        return out
    lines = []
    for f, i in zip(failing[:LISTED_LIMIT], order):
        how = "did not hold within %s s" % checks[i]["timeout"] if f["timed_out"] else "did not hold yet"
        lines.append('"%s" %s (%s: %s)' % (f["name"], how, f["url"], f["last_answer"]))
    if len(failing) > LISTED_LIMIT:
        lines.append("and %d more checks on %s" % (len(failing) - LISTED_LIMIT, ", ".join(
            dict.fromkeys(f["host"] for f in failing[LISTED_LIMIT:]))))
    out["msg"] = lines[0] if len(lines) == 1 else "%d checks do not hold (hosts: %s): %s" % (
        len(failing), ", ".join(out["failing_hosts"]), "; ".join(lines))
    return out
