# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The plan entries of the per-host healers: on every host of the job one ``<job_id>-healer-<host>`` container
(``module_utils/motor_host_healer.py``) and the one that alone holds the host's Docker socket for it,
``<job_id>-sockproxy-<host>`` (``module_utils/motor_docker_proxy.py``: the healer's calls only); their files and
Docker options: ``reconcile/host_healer.py``.

The deploy's decide step adds them to the plan it reconciles (``with_host_healers``), so they are created, kept,
recreated and removed like every other container of the job; the plan file and ``plan.yml``'s table list the
service's containers only."""

from __future__ import annotations

import re

HOST_HEALER_ROLE = "healer"
HOST_HEALER_SCRIPT = "motor_host_healer.py"
HOST_HEALER_CONFIG = "host_healer.json"
SOCKPROXY_ROLE = "sockproxy"
SOCKPROXY_SCRIPT = "motor_docker_proxy.py"
SOCKPROXY_CONFIG = "docker_proxy.json"
# the per-host agents: no service container, no tier step of their own (decide.host_work, diff.tier_steps)
HOST_AGENT_ROLES = frozenset((HOST_HEALER_ROLE, SOCKPROXY_ROLE))
# after the engines (tier 2): the last start step of a deploy, on every host
HOST_HEALER_TIER = 3


def healer_name(job_id: str, host: str) -> str:
    return "%s-healer-%s" % (job_id, re.sub(r"[^a-zA-Z0-9_.-]", "-", host))


def sockproxy_name(job_id: str, host: str) -> str:
    return "%s-sockproxy-%s" % (job_id, re.sub(r"[^a-zA-Z0-9_.-]", "-", host))


def is_host_agent(container: dict) -> bool:
    """A per-host healer or its Docker socket proxy (not a container of the service)."""
    return container.get("role") in HOST_AGENT_ROLES


def with_host_healers(plan: dict) -> dict:
    """``plan`` with a healer and its socket proxy per host of the job (a new dict; the plan is not changed)."""
    containers = [c for c in (plan or {}).get("containers") or [] if not is_host_agent(c)]
    if not containers:
        return plan
    root = containers[0]["configmap_path"].rsplit("/", 1)[0]  # <config root>/<job_id>
    healers = healer_entries(containers, plan["job_id"], lambda name: "%s/%s" % (root, name))
    return dict(plan, containers=containers + healers)


def healer_entries(containers: list, job_id: str, config_dir) -> list:
    """Per host that has containers of the job (``config_dir``: container name -> CONFIGMAP_PATH) its socket proxy,
    then its healer (the proxy listed first: started first in their start group). They start last
    (``HOST_HEALER_TIER``): a deploy starts what they watch first."""
    out, seen = [], set()
    for c in containers:
        if c["host"] in seen:
            continue
        seen.add(c["host"])
        for role, name, script, config in (
                (SOCKPROXY_ROLE, sockproxy_name(job_id, c["host"]), SOCKPROXY_SCRIPT, SOCKPROXY_CONFIG),
                (HOST_HEALER_ROLE, healer_name(job_id, c["host"]), HOST_HEALER_SCRIPT, HOST_HEALER_CONFIG)):
            path = config_dir(name)
            out.append({
                "name": name, "host": c["host"], "ip": c["ip"], "role": role, "job_name": name,
                "instance": None, "pod": None, "tier": HOST_HEALER_TIER, "npu_ids": [], "devices": [],
                "dp_ranks": [], "rank_pool": [], "endpoints": [],
                "env": {"CONFIGMAP_PATH": path, "PYTHONDONTWRITEBYTECODE": "1"},
                "ports": [], "port_map": {}, "user_config": {}, "shm_size": None, "ipc_mode": None,
                "mounts_profile": "none", "needs_weights": False, "configmap_path": path,
                "command": ["python3", "-u", "%s/%s" % (path, script), "%s/%s" % (path, config)],
            })
    return out
