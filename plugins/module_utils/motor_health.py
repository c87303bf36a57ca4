# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What a PyMotor service answer means (pure, no I/O): used by the motor_wait module on the controller and by the
motor_ops filters (verify), so both judge an answer the same way."""

from __future__ import annotations

import bisect
import re

CONDITIONS = ("answers", "ready", "status_ok", "endpoints", "routes", "idle")
# vLLM's gauges of the requests an engine holds (PyMotor's engine server exports vLLM's registry on its management
# /metrics, motor/engine_server/core/mgmt_endpoint.py:41-55): a drained engine reports 0 of both
IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")

# The coordinator's routing as its observability port reports it: ``GET /metrics?type=dp`` prefixes every engine
# metric with ``dp_rank``, ``role``, ``instance_id`` and ``pod_ip`` (upstream
# ``motor/coordinator/metrics/metrics_collector.py:759-780``, ``_generate_dp_metrics``), for the instances the
# coordinator holds available and whose every endpoint answered its ``/metrics`` (``:355-372``, ``:582-608``; the
# collector refreshes every ``reuse_time`` = 3 s, ``motor/config/coordinator.py:155``). Upstream has no other API
# that names a coordinator instance id with its pods: the coordinator has no GET of its pools
# (``management_server.py:180-308``), and the KV conductor knows prefill/union ranks only.
ROUTES_PATH = "/metrics?type=dp"
_LABEL = re.compile(r'(instance_id|role|pod_ip)="([^"]*)"')


def status_ok(body):
    """A node manager / engine status answer that means healthy (``{"status": true}`` or ``"normal"``...)."""
    if isinstance(body, dict):
        value = body.get("status")
        return value is True or str(value).lower() in ("normal", "ok", "healthy", "true", "running")
    return False


def _listed_ports(listed):
    """``{"tcp://<ip>": sorted ports}`` of the listed endpoints."""
    out = {}
    for endpoint in listed:
        at, sep, port = str(endpoint).rpartition(":")
        if sep and port.isdigit():
            out.setdefault(at, []).append(int(port))
    for ports in out.values():
        ports.sort()
    return out


def missing_endpoints(body, expected):
    """What the conductor's ``GET /services`` answer lacks of ``expected``: each entry is an endpoint (must be
    listed), ``{need, of, container}`` (at least ``need`` of the endpoints ``of`` listed: a pod whose DP ranks the
    controller assigns in registration order) or ``{need, at, first, count, container}`` (the same for the endpoints
    ``<at>:<first>`` .. ``<at>:<first + count - 1>``). Returns the missing endpoints and ``<container>: k/need of
    a..b``."""
    services = body.get("services") if isinstance(body, dict) else None
    listed = set(s.get("Endpoint") for s in services or [] if isinstance(s, dict))
    by_at = None
    missing = []
    for entry in expected or []:
        if isinstance(entry, dict) and "at" in entry:
            if by_at is None:
                by_at = _listed_ports(listed)
            ports = by_at.get(entry["at"]) or []
            first, count = int(entry["first"]), int(entry["count"])
            have = bisect.bisect_left(ports, first + count) - bisect.bisect_left(ports, first)
            need = int(entry.get("need") or 0)
            if have < need:
                missing.append("%s: %d/%d of %s:%d..%d" % (entry.get("container") or "?", have, need, entry["at"],
                                                           first, first + count - 1))
        elif isinstance(entry, dict):
            choices = list(entry.get("of") or [])
            have = len([e for e in choices if e in listed])
            need = int(entry.get("need") or 0)
            if have < need:
                span = (choices[0] if len(choices) == 1 else "%s..%s" % (choices[0], choices[-1].rsplit(":", 1)[-1])
                        if choices else "no endpoint")
                missing.append("%s: %d/%d of %s" % (entry.get("container") or "?", have, need, span))
        elif entry not in listed:
            missing.append(entry)
    return missing


def routed_instances(text):
    """``{coordinator instance id: {"role": ..., "ips": set of pod IPs}}`` from a ``GET /metrics?type=dp`` answer."""
    out = {}
    for line in str(text or "").splitlines():
        if line.startswith("#") or "instance_id=" not in line:
            continue
        labels = dict(_LABEL.findall(line.split("}", 1)[0]))
        if labels.get("instance_id", "").isdigit():
            entry = out.setdefault(int(labels["instance_id"]), {"role": labels.get("role", ""), "ips": set()})
            if labels.get("pod_ip"):
                entry["ips"].add(labels["pod_ip"])
    return out


def routed_ids(routed, role, ips):
    """The ids of the coordinator's ``role`` instances with a pod at one of ``ips`` (``routed_instances``)."""
    ips = set(ips or [])
    return sorted(i for i, entry in routed.items() if entry["role"] == role and entry["ips"] & ips)


def unrouted(routed, expected):
    """What of ``expected`` the coordinator does not route: each entry ``{role, ips, need, name}`` wants at least
    ``need`` instances of ``role`` with a pod at ``ips`` (the plan's instances of that role on those hosts, so
    instances that share a host count together). Returns ``<name>: k/need <role> at <ips>``."""
    missing = []
    for entry in expected or []:
        have = len(routed_ids(routed, entry.get("role"), entry.get("ips")))
        need = int(entry.get("need") or 1)
        if have < need:
            missing.append("%s: %d/%d %s instance(s) at %s" % (entry.get("name") or "?", have, need, entry.get("role"),
                                                               ", ".join(sorted(entry.get("ips") or []))))
    return missing


def requests_in_flight(text):
    """The requests an engine holds (running + waiting, ``IN_FLIGHT``, summed over their label sets) from its
    /metrics text; None when it lists neither gauge."""
    total, seen = 0.0, False
    for line in str(text or "").splitlines():
        if "{" in line:
            name, sample = line[:line.index("{")], line[line.rindex("}") + 1:]
        else:
            name, _sep, sample = line.partition(" ")
        if name.strip() not in IN_FLIGHT or not sample.split():
            continue
        try:
            total += float(sample.split()[0])
        except ValueError:
            continue
        seen = True
    return total if seen else None


def pod_verdict(status, body, engines_answer):
    """One engine pod, as its node manager's ``/node-manager/status`` answer (``status``, ``body``) tells, with
    ``engines_answer`` (a callable: does any of the pod's engine management ports answer HTTP at all; asked only when
    it matters). "stalled": its start command never came; the node manager answers normal because it has no endpoint
    (upstream's ``check_all_endpoints_normal`` over an empty list) and no engine runs. "started": a start command came
    (endpoints not normal yet, or an engine answers). "unknown": the node manager does not answer 200. The one rule of
    the readiness wait (motor_wait StallWatch) and of the healers (plugin_utils/heal.py, which runs this file's copy).
    """
    if status != 200:
        return "unknown"
    if not status_ok(body):
        return "started"
    return "started" if engines_answer() else "stalled"


# master/standby (docs/ha.md): what a replica's own ``GET /readiness`` says of it. Upstream answers 200 on the
# master only and 503 "Not master" on a live standby: the controller (``controller_api.py:322-342``, detail reason
# "Not master"; its /liveness stays 200 on a standby, :391-402) and the coordinator's management port
# (``management_server.py:51-55``, "Coordinator is not master"; its /liveness reads the daemon only,
# ``coordinator/domain/probe.py:175-189``). Any other answer (none, 503 for another reason) is "down".
REPLICA_ROLES = ("master", "standby", "down")


def replica_role(status, body):
    """"master", "standby" or "down" of one controller/coordinator replica from its own /readiness answer
    (``status``: -1 when nothing answered; ``body``: parsed JSON, text or None). A standby is alive and healthy:
    the one rule that keeps the healers from restarting it and the waits from counting it as a fault."""
    if status == 200:
        return "master"
    if status == 503 and "not master" in str(body).lower():
        return "standby"
    return "down"


def condition_met(until, status, body, expected=None, text=""):
    """Whether one HTTP answer (status -1: no answer; body: parsed JSON or None) meets a readiness condition.

    answers: the port answers HTTP at all; ready: ``{"ready": true}`` (controller/coordinator /readiness);
    status_ok: HTTP 200 with a healthy status (node manager); endpoints: the conductor lists every expected one;
    routes: the coordinator's ``/metrics?type=dp`` (``text``) routes every expected instance (``unrouted``);
    idle: an engine's ``/metrics`` (``text``) reports no running and no waiting request (``requests_in_flight``).
    """
    if until == "answers":
        return status != -1
    if until == "ready":
        return isinstance(body, dict) and body.get("ready") is True
    if until == "status_ok":
        return status == 200 and status_ok(body)
    if until == "endpoints":
        return status == 200 and not missing_endpoints(body, expected)
    if until == "routes":
        return status == 200 and not unrouted(routed_instances(text), expected)
    if until == "idle":
        return status == 200 and requests_in_flight(text) == 0
    raise ValueError("unknown condition %r (one of %s)" % (until, ", ".join(CONDITIONS)))
