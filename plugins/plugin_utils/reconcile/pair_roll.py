# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The roll of a master/standby pair (docs/ha.md "Rolls and heals"; pure functions, no I/O).

When both running replicas of a replicated role (the plan's ``standby.replicas``) change only their image, the tier
steps leave them alone (mode ``pair``) and the deploy moves the pair after the tiers (``roll_pair.yml``): recreate
the standby, wait until it is back as a live standby (``/readiness`` 503 "Not master", ``/liveness`` 200), stop the
master cleanly - upstream's standby thread releases the etcd lock when it stops
(``motor/common/standby/standby_manager.py:184-188``, on SIGTERM through ``motor/controller/main.py:233-242`` and
``motor/coordinator/daemon/coordinator_daemon.py:119-133``), so the other replica takes it at its next round, not
after the lock's TTL - wait until the role is ready through the VIP, then recreate the old master, which comes back
as standby. The engines keep running: their node managers and the coordinator reach the new master through the VIP
as after a failover, so an image change of a replicated role does not restart its dependents (``dependency_digest``).
The coordinator's master hands over before its stop (``handover``): a plain stop would leave no inference server.
"""

from __future__ import annotations

import hashlib

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import target
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.vip import ADMIN_SOCKET, INFER_FRONTEND, frontends, \
    haproxy_name, vip_hosts

PAIR_REASON = "moves as a pair: standby first, then the master"
# upstream's standby loop sleeps master_standby_check_interval (5 s, motor/config/standby.py) before it sees the stop
# and releases the lock (standby_manager.py:182-188): the master needs that long after SIGTERM, plus its modules' stop
PAIR_STOP_TIMEOUT_S = 30
# upstream's default lock key and the coordinator's own (motor/config/standby.py, motor/config/coordinator.py:353-357)
DEFAULT_LOCK_KEY = "/master_lock"


def replica_names(plan: dict) -> dict:
    """role -> the container names of its replicas (empty without master/standby)."""
    replicas = ((plan or {}).get("standby") or {}).get("replicas") or {}
    return {role: [r["container"] for r in items] for role, items in replicas.items() if len(items) > 1}


def dependency_digest(plan: dict, parts: dict, own: dict) -> dict:
    """name -> the digest a dependent's hash takes of this container: its own hash, but for a replica of a
    master/standby role only its own config (``spec``): its image and role settings change by a pair move that the
    dependents outlive."""
    replicated = {n for names in replica_names(plan).values() for n in names}
    return {name: (hashlib.sha256(str((parts.get(name) or {}).get("spec", "")).encode()).hexdigest()
                   if name in replicated else digest) for name, digest in own.items()}


def mark_pairs(plan: dict, actions: dict, upgraded: set, running: set) -> dict:
    """Set mode ``pair`` on the replicas of each role whose replicas all run and are all recreated for an image
    change alone (``upgraded``); role -> their names. Any other change of a replica (its own config, one replica not
    running) recreates them in the tier step as before."""
    pairs = {}
    for role, names in replica_names(plan).items():
        rows = [actions.get(n) for n in names]
        if all(r and r["action"] == "recreate" and r["mode"] == "parallel" and n in upgraded and n in running
               for n, r in zip(names, rows)):
            for row in rows:
                row.update(mode="pair", reason="%s; %s" % (row["reason"], PAIR_REASON))
            pairs[role] = names
    return pairs


def pair_targets(plan: dict, role: str) -> list:
    """Each replica of ``role``: name, host, its own ``readiness`` and ``liveness`` URLs (the controller's API port,
    the coordinator's management port; plain HTTP: validation refuses management TLS with master/standby)."""
    port = (plan.get("controller") or {}).get("api_port") if role == "controller" else \
        (plan.get("coordinator") or {}).get("mgmt_port")
    return [{"name": replica["container"], "host": replica["host"],
             "readiness": target(replica["ip"], port, "/readiness")["url"],
             "liveness": target(replica["ip"], port, "/liveness")["url"]}
            for replica in ((plan.get("standby") or {}).get("replicas") or {}).get(role) or []]


def handover(plan: dict, role: str) -> dict | None:
    """How the coordinator's pair hands over without a gap (docs/ha.md "Rolls and heals"), None for other roles.

    Upstream's coordinator stops inference before it frees the lock on SIGTERM and a standby starts inference only
    once it holds the lock (coordinator_daemon.py:128-149), so a plain stop leaves no replica serving. Instead the
    deploy deletes the lock's key: a master renews only its lease (``LeaseKeepAlive``, etcd_client.py:124-152), so
    the old master stays master and keeps serving while the standby's next ``acquire_lock`` creates the key again
    (locks.py:55-84) and it starts inference; then HAProxy drains the old master (runtime API, ``ADMIN_SOCKET``),
    and only then is it stopped. ``lock_key``: the key in etcd (``/locks/`` + POD_NAMESPACE/JOB_NAME + the lock key,
    locks.py:34, etcd_client.py:85-90,110); ``backends``: replica -> the HAProxy backends it serves, the inference
    one (``infer_backend``) drained last, after the new master is ready."""
    if role != "coordinator":
        return None
    replicas = ((plan.get("standby") or {}).get("replicas") or {}).get(role) or []
    by_name = {c["name"]: c for c in plan.get("containers") or []}
    first = by_name.get(replicas[0]["container"]) if replicas else None
    if not first:
        return None
    env = first.get("env") or {}
    section = (first.get("user_config") or {}).get("motor_coordinator_config") or {}
    key = (section.get("standby_config") or {}).get("master_lock_key") or DEFAULT_LOCK_KEY
    if key == DEFAULT_LOCK_KEY:
        key = "/coordinator" + key
    names = {r["container"] for r in replicas}
    served = [(f["name"], {server[0] for server in f["servers"]}) for f in frontends(plan)]
    backends = {name: [front for front, servers in served if name in servers] for name in sorted(names)}
    others = {name: [b for b in fronts if b != INFER_FRONTEND] for name, fronts in backends.items()}
    return {
        "lock_key": "/locks/%s/%s%s" % (env.get("POD_NAMESPACE", ""), env.get("JOB_NAME") or first["job_name"], key),
        "etcd_endpoint": "https://127.0.0.1:%d" % int(plan["standby"]["etcd"]["port"]),
        "haproxy": {"hosts": vip_hosts(plan), "container": haproxy_name(plan["job_id"]), "socket": ADMIN_SOCKET},
        "infer_backend": INFER_FRONTEND,
        "backends": backends,
        # HAProxy runtime API lines per replica: drained from the other ports first, from inference once the new master
        # is up there, given back (state ready) after the move
        "commands": {name: {"drain": server_state(others[name], name, "drain"),
                            "drain_infer": server_state([INFER_FRONTEND], name, "drain"),
                            "undrain": server_state(backends[name], name, "ready")} for name in backends},
    }


def server_state(backends: list, server: str, state: str) -> str:
    """One HAProxy runtime API line that sets ``server`` to ``state`` in each of ``backends``."""
    return "; ".join("set server %s/%s state %s" % (backend, server, state) for backend in backends)
