# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What a (re-)deploy must do with every container of a job, and why (pure functions, no I/O).

Per container an action (create, recreate, start, keep, remove) with the reason, and how: ``first`` (removed
before any tier starts), ``drain`` (prefill/union containers unregistered from the KV conductor first),
``parallel`` (started in their tier on all hosts at once), ``rolling`` (engine instances whose own config changed,
one instance at a time), ``pair`` (the replicas of a master/standby role that change only their image: standby
first, then the master, after the tiers: pair_roll.py). Instance counts are left out of the hashes: scaling restarts nobody else.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    ENGINE_ROLES,
    HASH_LABEL,
    PARTS_LABEL,
    PORTS_LABEL,
    PUBLISHING_ROLES,
    ROLE_LABEL,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import is_host_agent
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import container_hashes, dependencies
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import container_name, parse_parts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.pair_roll import PAIR_REASON, mark_pairs
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.upgrade import image_only
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import render_table


PART_REASONS = {
    "image": "image changed",
    "spec": "own config changed",
    "shared": "role settings changed",
}


def state_of(docker_container: dict) -> str:
    return str(docker_container.get("State") or "").lower()


def reconcile(plan: dict, parts: dict, existing: dict) -> dict:
    """Decide the action of every container; see the module docstring."""
    hashes, labels = container_hashes(plan, parts)
    deps = dependencies(plan)
    planned = {c["name"]: c for c in plan.get("containers", [])}
    found = {}
    strays = []
    for host, containers in sorted((existing or {}).items()):
        for item in containers or []:
            name = container_name(item)
            if name in planned and planned[name]["host"] == host and name not in found:
                found[name] = (host, item)
            else:
                strays.append((host, name, item))

    actions = {}
    upgraded = set()  # recreated for a new image with the same own config: engines roll instead (upgrade.py)
    for name, c in planned.items():
        row = {"container": name, "host": c["host"], "role": c["role"], "tier": c["tier"],
               "job_name": c.get("job_name"), "action": "keep", "reason": "", "mode": "none"}
        cur = found.get(name)
        if cur is None:
            moved = [stray[0] for stray in strays if stray[1] == name]
            row.update(action="create", reason=f"moved from {moved[0]}" if moved else "new", mode="parallel")
        else:
            labels_now = cur[1].get("Labels") or {}
            if labels_now.get(HASH_LABEL) == hashes[name]:
                if state_of(cur[1]) != "running":
                    row.update(action="start", reason=f"was {state_of(cur[1]) or 'not running'}", mode="parallel")
            else:
                old, new = parse_parts(labels_now.get(PARTS_LABEL)), parse_parts(labels[name])
                reasons = [PART_REASONS[k] for k in ("image", "spec", "shared") if old.get(k) != new.get(k)]
                if not reasons and old.get("deps") != new.get("deps"):
                    reasons = ["dependency changed"]
                row.update(action="recreate", reason=", ".join(reasons) or "config changed", mode="parallel")
                if image_only(old, new):
                    upgraded.add(name)
        actions[name] = row

    # Master/standby replicas that change only their image move as a pair after the tiers (pair_roll.py); their
    # dependents outlive the move, as they outlive a failover.
    running = {name for name, (host, item) in found.items() if state_of(item) == "running"}
    pairs = mark_pairs(plan, actions, upgraded, running)

    # A dependency that restarts restarts its dependents; engines must be gone before their controller returns,
    # unless the dependency only changes its image: running engines re-register with it and roll (upgrade.py).
    for name, row in actions.items():
        restarting = [d for d in deps[name] if actions[d]["action"] in ("create", "recreate")
                      and actions[d]["mode"] != "pair"]
        if not restarting or row["action"] == "create":
            continue
        if row["mode"] == "pair" and set(restarting) <= upgraded:  # the pair moves after them (a new KV conductor)
            continue
        if row["role"] in ENGINE_ROLES and set(restarting) <= upgraded:
            if row["action"] == "recreate" and row["reason"] == "dependency changed":
                row["reason"] = "rolls after the image change of " + ", ".join(restarting)
            continue
        why = "restarts with " + ", ".join(restarting)
        own = row["reason"] if row["action"] == "recreate" and row["reason"] != "dependency changed" else ""
        row.update(action="recreate", reason=f"{own}; {why}" if own else why,
                   mode="first" if row["role"] in ENGINE_ROLES else "parallel")

    # a replica that restarts with a dependency (its KV conductor) starts in its tier step, not as a pair
    for role, names in list(pairs.items()):
        if any(actions[n]["mode"] != "pair" for n in names):
            del pairs[role]
            for n in names:
                actions[n].update(mode="parallel", reason=actions[n]["reason"].replace("; " + PAIR_REASON, ""))

    # Engine instances whose own config changed roll one at a time; all pods of such an instance go together.
    rolling_jobs = []
    for name, row in actions.items():
        if row["role"] in ENGINE_ROLES and row["action"] == "recreate" and row["mode"] == "parallel":
            if row["job_name"] not in rolling_jobs:
                rolling_jobs.append(row["job_name"])
    for name, row in actions.items():
        if row["role"] in ENGINE_ROLES and row["job_name"] in rolling_jobs and row["mode"] != "first":
            if row["action"] in ("keep", "start"):
                row.update(action="recreate", reason=f"pod of {row['job_name']}, which restarts")
            row["mode"] = "rolling"

    conductor_stays = any(c["role"] == "kv_conductor" and actions[c["name"]]["action"] == "keep"
                          for c in planned.values())
    removals = []
    for host, name, item in strays:
        role = (item.get("Labels") or {}).get(ROLE_LABEL, "")
        reason = f"moved to {planned[name]['host']}" if name in planned else "not in the plan any more"
        drain = (role in PUBLISHING_ROLES and name not in planned and bool(plan.get("affinity")) and conductor_stays)
        ports = [int(p) for p in str((item.get("Labels") or {}).get(PORTS_LABEL, "")).split(",") if p.strip().isdigit()]
        removals.append({"container": name, "host": host, "role": role, "tier": None, "job_name": None,
                         "action": "remove", "reason": reason, "mode": "drain" if drain else "first",
                         "ip": ((plan.get("hosts") or {}).get(host) or {}).get("ip"), "ports": ports})

    rows = list(actions.values()) + removals
    first, start = {}, {}
    for row in rows:
        if row["mode"] in ("first", "drain"):  # drained ones are unregistered before this removal
            first.setdefault(row["host"], []).append(row["container"])
        if row["mode"] in ("parallel", "first") and row["action"] != "remove":
            start.setdefault(row["host"], []).append(row["container"])
    rolling = []
    for job in rolling_jobs:
        members = [r for r in actions.values() if r["job_name"] == job and r["mode"] == "rolling"]
        rolling.append({"job_name": job, "role": members[0]["role"],
                        "reason": "; ".join(sorted({r["reason"] for r in members})),
                        "containers": [{"name": r["container"], "host": r["host"]} for r in members]})
    return {
        "hashes": hashes,
        "parts": labels,
        "tier_steps": tier_steps(plan),
        "actions": rows,
        "first": first,
        "drain": [r for r in removals if r["mode"] == "drain"],
        "start": start,
        "rolling": rolling,
        "pairs": pairs,
        "changes": [r for r in rows if r["action"] != "keep"],
    }


def tier_steps(plan: dict) -> list:
    """The tiers in start order, grouped into steps: consecutive tiers whose containers all run on one and the same
    host start in one step (one module run there, in plan order); any other tier waits for the previous step on
    every host. With one control host: [[0, 1], [2]]; control plane spread over hosts: [[0], [1], [2]]. The per-host
    healers (plan/healer.py) make no step of their own: each starts in its host's last run, after what it watches
    there (decide.host_work), not in one more run on every host."""
    by_tier = {}
    for c in plan.get("containers", []):
        if not is_host_agent(c):
            by_tier.setdefault(c["tier"], set()).add(c["host"])
    steps, step_hosts = [], set()
    for tier in sorted(by_tier):
        if steps and len(step_hosts | by_tier[tier]) == 1:
            steps[-1].append(tier)
        else:
            steps.append([tier])
            step_hosts = set()
        step_hosts |= by_tier[tier]
    return steps


CHANGE_COLUMNS = [("host", "HOST"), ("container", "CONTAINER"), ("action", "ACTION"), ("mode", "HOW"),
                  ("reason", "WHY")]


def change_table(result: dict) -> str:
    """The containers a deploy touches (or would touch), one line each; a single line when nothing changes."""
    rows = (result or {}).get("changes") or []
    if not rows:
        return "no container changes: every container runs with its planned config"
    return render_table(rows, CHANGE_COLUMNS, rule=False)
