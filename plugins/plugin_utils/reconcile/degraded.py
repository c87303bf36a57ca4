# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A deploy that goes on without failed hosts (pure, no I/O).

A host that fails or becomes unreachable during the tier steps drops out of the host play. The deploy then brings
up every container that does not need it and keeps out, unstarted, every container that does:

- a container of the control plane (tier 0/1: KV pool, controller, coordinator, KV conductor) needs every host of the
  control plane (without one of them no engine instance is taken in);
- an engine pod (tier 2) needs every host of its instance (PyMotor assembles an instance from all its pods) and
  every host of the control plane;
- a per-host healer (plan/healer.py, on every host of the job) needs its own host only: it is not part of the
  control plane (counted as such, every host of the job would be one, and one failed host would keep everything
  unstarted).

A host that cannot be read at discovery (not read, or its Docker engine does not answer) is such a host from the
start, within the same share (``unreachable_hosts``): it is not prechecked, gets no work, and the tier play counts it
as failed. A host whose readiness checks still do not hold at the wait's deadline (black-holed, say) is one too
(roles/motor_service/tasks/readiness.yml): the rest is waited for again without what needs it.

Pods are never moved to another host: the plan is the plan, a re-run with the host back brings the rest up. The
share of failed hosts above which nothing further starts is ``motor_service_max_fail_percentage``.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import is_host_agent


def _control(container: dict) -> bool:
    """A container of the control plane (tier 0/1: not an engine pod, not a per-host healer or its proxy)."""
    return container.get("tier") != 2 and not is_host_agent(container)


def control_hosts(plan: dict) -> list:
    """The hosts of the control plane (tier 0/1 containers)."""
    return sorted({c["host"] for c in plan.get("containers") or [] if _control(c)})


def container_needs(plan: dict) -> dict:
    """Container name -> the sorted hosts it needs to be of use (see the module docstring)."""
    containers = plan.get("containers") or []
    control = control_hosts(plan)
    instances = {}
    for c in containers:
        if c.get("tier") == 2:
            instances.setdefault(c.get("job_name"), set()).add(c["host"])
    return {c["name"]: sorted(set(control) | instances[c.get("job_name")]) if c.get("tier") == 2
            else (control if _control(c) else [c["host"]]) for c in containers}


def with_needs(work: dict, plan: dict, unreachable=()) -> dict:
    """The decision's ``work`` with, per host, ``needs``: container name -> the hosts it needs, for the containers
    planned on that host (the tier play's filter ``motor_reconcile_needing`` reads the host's own share),
    ``control``: the hosts of the control plane, the ``job_id`` and ``unreachable``: the hosts failed from the start
    (``unreachable_hosts``; the tier play counts them as down from each host's own work, not by reading the
    controller's whole decision on every host for every task)."""
    needs = container_needs(plan)
    own = {}
    for c in plan.get("containers") or []:
        own.setdefault(c["host"], {})[c["name"]] = needs[c["name"]]
    control, down = control_hosts(plan), sorted(unreachable)
    return {host: dict(w, needs=own.get(host) or {}, control=control, job_id=plan.get("job_id"), unreachable=down)
            for host, w in work.items()}


def unreachable_hosts(judged: dict, probes: dict, hosts: list, max_fail_percentage) -> list:
    """The hosts of ``judged`` (precheck.judge_hosts) that could not be read at discovery or whose Docker engine did
    not answer, when they are no more than ``max_fail_percentage`` percent of ``hosts`` (else none: their
    precheck problems stop the deploy as before)."""
    out = [h for h in judged.get("hosts") or {}
           if "npu_devices" not in (probes.get(h) or {}) or not (probes.get(h) or {}).get("can_talk_to_docker")]
    return [] if not out or exceeded(out, hosts, max_fail_percentage) else sorted(out)


def without_hosts(judged: dict, work: dict, down: list) -> tuple:
    """(judged without the precheck problems of ``down``, work with no step for them): nothing is done there."""
    dropped = {p for h in down for p in judged["hosts"][h]["problems"]}
    judged = dict(judged, problems=[p for p in judged["problems"] if p not in dropped])
    return judged, dict(work, **{h: dict(work[h], steps=[None] * len(work[h]["steps"])) for h in down if h in work})


def needing(needs: dict, down) -> list:
    """The names in ``needs`` (container name -> hosts it needs) of the containers that need a host in ``down``: what
    a host leaves unstarted in its later steps, and stops again where this deploy started it."""
    down = set(down or [])
    return sorted(name for name, hosts in (needs or {}).items() if down & set(hosts or []))


def exceeded(down, hosts, max_fail_percentage) -> bool:
    """Whether the failed hosts are more than ``max_fail_percentage`` percent of ``hosts`` (Ansible's meaning of
    max_fail_percentage: 0 stops at the first failed host)."""
    return bool(down) and len(set(down)) * 100 > float(max_fail_percentage) * max(len(set(hosts)), 1)


def left_out(plan: dict, down) -> dict:
    """What a deploy without the hosts ``down`` leaves out: ``hosts``, ``containers`` (name, host, role, instance)
    and ``instances`` (engine instance job names), and whether any engine instance comes up at all (``serving``)."""
    down = set(down or [])
    needs = container_needs(plan)
    out = [c for c in plan.get("containers") or [] if down & set(needs[c["name"]])]
    names = {c["name"] for c in out}
    engines = [c for c in plan.get("containers") or [] if c.get("tier") == 2]
    return {"hosts": sorted(down),
            "containers": [{"name": c["name"], "host": c["host"], "role": c["role"], "tier": c.get("tier"),
                            "instance": c.get("job_name")} for c in out],
            "instances": sorted({c.get("job_name") for c in out if c.get("tier") == 2}),
            "serving": any(c["name"] not in names for c in engines)}


def live_plan(plan: dict, gone: dict) -> dict:
    """The plan without the containers ``left_out`` keeps out (what the readiness wait of this run waits for)."""
    names = {c["name"] for c in gone["containers"]}
    return dict(plan, containers=[c for c in plan.get("containers") or [] if c["name"] not in names])


def live_decision(decision: dict, gone: dict, readiness: list) -> dict:
    """The decision for the rest of the deploy without the left-out containers: ``readiness``, the checks of the
    ``live_plan``, no stall watch or rolling restart of a left-out instance, and ``left_out`` (with its
    ``message``)."""
    instances = set(gone["instances"])
    return dict(decision, readiness=readiness,
                left_out=dict(gone, message=left_out_message(gone)),
                stalls=[s for s in decision.get("stalls") or [] if s.get("instance") not in instances],
                rolling=[r for r in decision.get("rolling") or [] if r.get("job_name") not in instances])


def left_out_message(gone: dict) -> str:
    """What the deploy says at its end when hosts failed: the hosts, and the instances / containers left out."""
    lines = ["deploy incomplete: %s failed or became unreachable during the deploy; nothing was started that "
             "needs %s, and nothing was moved to another host." % (", ".join(gone["hosts"]),
                                                                   "it" if len(gone["hosts"]) == 1 else "them")]
    if gone["instances"]:
        lines.append("engine instances left out: %s." % ", ".join(gone["instances"]))
    control = [c["name"] for c in gone["containers"] if _control(c)]
    if control:
        lines.append("control-plane containers left out: %s." % ", ".join(sorted(control)))
    lines.append("Fix the host(s) and re-run the same deploy: it converges.")
    return " ".join(lines)
