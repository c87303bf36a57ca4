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
neither the plan nor the job name tells it, and no upstream API lists it by job name: the coordinator has no GET of
its pools (its management routes: ``management_server.py:180-308``), the controller's ``/observability/inventory``
names instances by job name only (``motor/controller/observability/inventory/inventory_collector.py:93-100``). The
one place is the KV conductor: the coordinator registers every prefill/union DP rank there as
``vllm-prefill-<id>`` at ``tcp://<pod ip>:<kv-event port + rank>`` (``motor/coordinator/api_client/conductor_api_client.py:79-87``),
and those endpoints are the plan's. So an instance drains when the conductor tracks its role's ranks; a decode
instance (never registered) or a job without KV-cache affinity keeps the bounded wait alone (``upgrade.SEPARATION_S``).

The instance comes back: the ``del`` removes the id from both pools (``instance_manager.py:372-386``, so
``_add_instances``' refusal of ids in the unavailable pool, ``:338-342``, cannot hit it), the controller later
separates the stopped instance and sends its own ``del`` (``motor/controller/core/event_pusher.py:123-131``; the
coordinator logs the id as not found and unregisters its ranks), and the new pods register as a new instance with a
new id (``instance_assembler.py:302-318``), which the controller adds (``event_pusher.py:117-121``).

An instance is not drained when it is the only one of its role: the coordinator would report not ready, and the
controller answers that with a ``set`` of every instance it holds active, the stopped one included
(``event_pusher.py:205-219``, ``:158-173``); there is nothing else to route to anyway.

After the ``del``, requests already forwarded to the instance finish for ``DRAIN_GRACE_S`` before the stop. Upstream
reports no in-flight count per instance that the roll could poll: ``/instance/metrics`` answers 410
(``motor/coordinator/api_server/observability_server.py:115-120``) and ``/metrics?type=instance`` aggregates the
engines' own metrics by instance id (``motor/coordinator/metrics/metrics_collector.py:291-303``), so the grace is a
bound.
"""

from __future__ import annotations

import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import PUBLISHING_ROLES
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import kv_endpoint_ranges
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import service_targets, uri_args
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import plan_user_config

# Seconds between the coordinator's "del" and the stop of the pods: requests already forwarded finish.
DRAIN_GRACE_S = 5

# conductor_api_client.py:78: the conductor's InstanceID of coordinator instance <id>
_CONDUCTOR_ID = re.compile(r"^vllm-prefill-(\d+)$")


def _model_name(plan: dict, role: str) -> str:
    engine = (plan_user_config(plan).get("motor_engine_%s_config" % role) or {}).get("engine_config") or {}
    return str(engine.get("served_model_name") or "")


def drain_context(plan: dict) -> dict:
    """What every instance's drain reads of the whole plan, built once per roll (each is a pass over every
    container): the service ``targets``, the KV-event ``ranges`` and the instance ``jobs`` per role."""
    jobs = {}
    for c in plan.get("containers") or []:
        jobs.setdefault(c.get("role"), set()).add(c.get("job_name"))
    return {"targets": service_targets(plan), "ranges": kv_endpoint_ranges(plan), "jobs": jobs}


def roll_drain(plan: dict, instance: dict, members: list, context: dict | None = None) -> dict:
    """How the rolling restart takes engine instance ``instance`` (``diff.reconcile``'s ``rolling`` entry) out of
    the coordinator's routing; ``members``: its plan containers; ``context``: ``drain_context(plan)`` (built here
    when not given). ``how`` ``del`` (with the conductor's ``services`` URL, the instance's KV-event ``endpoints``
    ranges, the coordinator's ``refresh`` URL and its ``uri`` TLS arguments, the ``instance`` fields of the event but
    the id, ``grace_s``), or ``none`` with ``why``."""
    context = context or drain_context(plan)
    role = instance.get("role") or ""
    job = instance.get("job_name") or ""
    others = context["jobs"].get(role, set()) - {job}
    targets = context["targets"]
    why = ""
    if role not in PUBLISHING_ROLES:
        why = ("upstream lists the id of a %s instance nowhere (the KV conductor knows prefill/union ranks only): "
               "the roll waits for the controller to separate it" % role)
    elif not (plan.get("affinity") and plan.get("kv_conductor") and plan.get("kv_events")):
        why = "no KV conductor lists the instance's ranks (the only source of its id): the roll waits for the controller"
    elif not others:
        why = ("the only %s instance: nothing else to route to (the coordinator would report not ready and the "
               "controller would push the instance back)" % role)
    if why:
        return {"how": "none", "why": why}
    names = {c["name"] for c in members}
    coordinator = dict(targets["coordinator"], url=targets["coordinator"]["url"].rsplit("/", 1)[0] + "/instances/refresh")
    return {"how": "del", "services": targets["conductor"]["url"] + "/services",
            "endpoints": [e for e in context["ranges"] if e["container"] in names],
            "refresh": coordinator["url"], "uri": uri_args(coordinator),
            "instance": {"job_name": job, "model_name": _model_name(plan, role), "role": role},
            "grace_s": DRAIN_GRACE_S}


def _owned(endpoint: str, ranges: list) -> bool:
    at, port = (str(endpoint).rsplit(":", 1) + [""])[:2]
    return port.isdigit() and any(at == r["at"] and r["first"] <= int(port) < r["first"] + r["count"] for r in ranges)


def drain_ids(drain: dict, services: list) -> list:
    """The coordinator ids the KV conductor's ``GET /services`` list registers at the instance's endpoints."""
    ids = set()
    for svc in services or []:
        if isinstance(svc, dict) and _owned(svc.get("Endpoint", ""), drain.get("endpoints") or []):
            found = _CONDUCTOR_ID.match(str(svc.get("InstanceID") or ""))
            if found:
                ids.add(int(found.group(1)))
    return sorted(ids)


def drain_event(drain: dict, services: list) -> dict:
    """The ``POST /instances/refresh`` body that takes the instance out of the coordinator's pools: ``{}`` when the
    drain is ``none``, when the conductor lists none of its endpoints (nothing registered: nothing routes there), or
    when they carry more than one id (not one instance: nothing is deleted rather than a wrong one)."""
    if (drain or {}).get("how") != "del":
        return {}
    ids = drain_ids(drain, services)
    if len(ids) != 1:
        return {}
    return {"event": "del", "instances": [dict(drain["instance"], id=ids[0])]}
