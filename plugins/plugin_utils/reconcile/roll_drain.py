# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The drain of one engine instance of a rolling restart: out of the coordinator's routing before its pods stop
(pure functions, no I/O; roles/motor_service/tasks/roll_drain.yml sends it).

Upstream's coordinator takes an instance out of its pools on a ``del`` event of its management
``POST /instances/refresh`` (``motor/coordinator/api_server/management_server.py:276-295``, ``:311-375``;
``motor/coordinator/domain/instance_manager.py:288-313``, ``_delete_instances`` ``:368-390``), which only reads the
id (and logs role and job name). The body must be an ``InsEventMsg`` (``motor/common/resources/http_msg_spec.py:132-140``):
``event`` and ``instances``, each an ``Instance`` whose required fields are ``job_name``, ``model_name``, ``id``
(int) and ``role`` (``motor/common/resources/instance.py:135-150``); a body that does not parse is answered 400.

The id is the controller's counter at registration (``motor/controller/core/instance_assembler.py:306``, ``:317``), so
neither the plan nor the job name tells it. The coordinator itself lists it with its pods' IPs on its observability
port, ``GET /metrics?type=dp`` (``motor_health.routed_instances``), for every role; the controller's
``/observability/inventory`` names instances by job name only
(``motor/controller/observability/inventory/inventory_collector.py:93-100``). So an instance drains when exactly one
id of its role sits at its pods' IPs (``operations/routing.py``: instances of a role that share a host are not told
apart, and none of them is drained).

The instance comes back: the ``del`` removes the id from both pools (``instance_manager.py:372-386``, so
``_add_instances``' refusal of ids in the unavailable pool, ``:338-342``, cannot hit it), the controller later
separates the stopped instance and sends its own ``del`` (``motor/controller/core/event_pusher.py:123-131``; the
coordinator logs the id as not found and unregisters its ranks), and the new pods register as a new instance with a
new id (``instance_assembler.py:302-318``), which the controller adds (``event_pusher.py:117-121``).

An instance is not drained when it is the only one of its role: the coordinator would report not ready, and the
controller answers that with a ``set`` of every instance it holds active, the stopped one included
(``event_pusher.py:205-219``, ``:158-173``); there is nothing else to route to anyway.

After the ``del``, the roll waits ``DRAIN_GRACE_S``, then until every engine of the instance reports no running and
no waiting request (vLLM's ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` on its management
``/metrics``, the page upstream's coordinator itself reads, ``metrics_collector.py:600``; ``decide.idle_checks``),
for at most ``motor_roll_drain_timeout`` s (``DRAIN_TIMEOUT_S`` by default), then stops it: a decode stream of
minutes finishes instead of being cut. The coordinator reports no in-flight count per instance once the instance
left its pools (``/instance/metrics`` answers 410, ``motor/coordinator/api_server/observability_server.py:115-120``;
``/metrics`` lists the available instances only, ``metrics_collector.py:355-372``), so the engines are asked.

After its new pods start, the roll waits until the coordinator routes the instance again (``instance_checks``: the
``routes`` condition) before the next one stops: the coordinator's readiness alone holds while the other instances of
the role serve.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import routed_ids, routed_instances
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.routing import instance_pods
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import service_targets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import plan_user_config

# Seconds between the coordinator's "del" and the first read of the engines' request gauges: a request the coordinator
# scheduled just before the del reaches its engine.
DRAIN_GRACE_S = 5
# At most this many seconds (motor_roll_drain_timeout) the engines may then take until they hold no request.
DRAIN_TIMEOUT_S = 120


def _model_name(plan: dict, role: str) -> str:
    engine = (plan_user_config(plan).get("motor_engine_%s_config" % role) or {}).get("engine_config") or {}
    return str(engine.get("served_model_name") or "")


def drain_context(plan: dict) -> dict:
    """What every instance's drain and readiness checks (``decide.instance_checks``) read of the whole plan, built once
    per roll (each is a pass over every container): the service ``targets`` and the engine instances' ``pods``
    (``routing.instance_pods``)."""
    return {"targets": service_targets(plan), "pods": instance_pods(plan)}


def roll_drain(plan: dict, instance: dict, members: list, context: dict | None = None) -> dict:
    """How the rolling restart takes engine instance ``instance`` (``diff.reconcile``'s ``rolling`` entry) out of
    the coordinator's routing; ``members``: its plan containers; ``context``: ``drain_context(plan)`` (built here
    when not given). ``how`` ``del`` (with the ``routes`` target: the coordinator's ``/metrics?type=dp``, the ``role``
    and pod ``ips`` of the instance, the ``refresh`` target: its management ``/instances/refresh`` with the
    management TLS files or None, the ``instance`` fields of the event but the id, ``grace_s``), or ``none`` with
    ``why``."""
    context = context or drain_context(plan)
    role = instance.get("role") or ""
    job = instance.get("job_name") or ""
    others = [name for name, pod in context["pods"].items() if pod["role"] == role and name != job]
    targets = context["targets"]
    why = ""
    if not targets.get("routes"):
        why = "the coordinator has no observability port in the plan (the only source of the instance's id)"
    elif not others:
        why = ("the only %s instance: nothing else to route to (the coordinator would report not ready and the "
               "controller would push the instance back)" % role)
    if why:
        return {"how": "none", "why": why}
    ips = (context["pods"].get(job) or {}).get("ips") or sorted({c["ip"] for c in members if c.get("ip")})
    coordinator = targets["coordinator"]
    # both are motor_wait read targets: one client on the controller for the drain's requests (its TLS files the
    # controller's, an encrypted key opened with passwd_file, motor_wait's action); "text": the answer's text too
    return {"how": "del", "routes": dict(targets["routes"], text=True), "role": role, "ips": ips,
            "refresh": {"url": coordinator["url"].rsplit("/", 1)[0] + "/instances/refresh",
                        "tls": coordinator.get("tls") or None},
            "instance": {"job_name": job, "model_name": _model_name(plan, role), "role": role},
            "grace_s": DRAIN_GRACE_S}


def drain_ids(drain: dict, routes_text: str) -> list:
    """The coordinator ids of the instance's role at its pods' IPs, from its ``GET /metrics?type=dp`` answer."""
    return routed_ids(routed_instances(routes_text), drain.get("role"), drain.get("ips"))


def drain_event(drain: dict, routes_text: str) -> dict:
    """The ``POST /instances/refresh`` body that takes the instance out of the coordinator's pools: ``{}`` when the
    drain is ``none``, when the coordinator routes no instance of its role at its IPs (nothing routes there), or more
    than one (not one instance: nothing is deleted rather than a wrong one)."""
    if (drain or {}).get("how") != "del":
        return {}
    ids = drain_ids(drain, routes_text)
    if len(ids) != 1:
        return {}
    return {"event": "del", "instances": [dict(drain["instance"], id=ids[0])]}
