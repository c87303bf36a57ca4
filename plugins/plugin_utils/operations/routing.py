# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Which engine instances the coordinator must route to, as the coordinator itself can tell (pure, no I/O).

Upstream's coordinator names its instances by the controller's id and their pods by IP only
(``motor_health.routed_instances``), so an instance of the plan is known there by its role and the IPs of its pods.
Instances of one role that share a host count together (``need``): an id at those IPs cannot be told apart.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_ROLES


def instance_pods(plan: dict) -> dict:
    """``{instance job name: {"role", "ips" (sorted), "containers"}}`` of the plan's engine instances."""
    out = {}
    for c in plan.get("containers") or []:
        for nm in c.get("node_managers") or []:  # the single container: each node manager is an instance of its own
            out[nm["job_name"]] = {"role": nm["role"], "ips": [c["ip"]], "containers": [c["name"]]}
        if c.get("role") in ENGINE_ROLES and c.get("job_name"):
            entry = out.setdefault(c["job_name"], {"role": c["role"], "ips": [], "containers": []})
            if c.get("ip") and c["ip"] not in entry["ips"]:
                entry["ips"].append(c["ip"])
            entry["containers"].append(c["name"])
    for entry in out.values():
        entry["ips"].sort()
    return out


def routes_expected(plan: dict, jobs=None, pods: dict | None = None) -> list:
    """The ``routes`` entries (``motor_health.unrouted``) of the instances ``jobs`` (default all): per instance its
    role, its pods' IPs and how many instances of its role have pods there."""
    pods = pods if pods is not None else instance_pods(plan)
    out = []
    for job, entry in sorted(pods.items()):
        if jobs is not None and job not in jobs:
            continue
        ips = set(entry["ips"])
        need = sum(1 for other in pods.values() if other["role"] == entry["role"] and ips & set(other["ips"]))
        out.append({"name": job, "role": entry["role"], "ips": entry["ips"], "need": need})
    return out
