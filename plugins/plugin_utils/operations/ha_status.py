# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""status.yml with master/standby (docs/ha.md): the role of each controller/coordinator replica (master, standby or
down, from its own /readiness: ``motor_health.replica_role``), the host that holds ``motor_vip``, and each etcd
member's health (``etcdctl endpoint status`` in the member's container). Pure: the playbook reads, this judges."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import replica_role
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ROLE_LABEL
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import natural_key, render_table

REPLICATED = ("controller", "coordinator")
REPLICA_COLUMNS = [("host", "HOST"), ("role", "ROLE"), ("container", "CONTAINER"), ("replica", "REPLICA"),
                   ("vip", "VIP")]
ETCD_COLUMNS = [("host", "HOST"), ("member", "MEMBER"), ("health", "HEALTH"), ("leader", "LEADER"),
                ("raft_index", "RAFT INDEX"), ("db_size", "DB SIZE")]


def ha_reads(inspections, etcd_inspections=None) -> dict:
    """What status.yml reads on one host: ``probes``, per controller/coordinator container the host path of its
    health check's target file (``reconcile/probes.py``: the probe runs ``python3 <dir>/motor_probe.py
    <dir>/motor_probe.json``, the config directory mounted at the same path), and ``etcd``: the etcd member
    container's name and its loopback client URL (from its ``--listen-client-urls``; None and its ``state`` when it
    does not run), or None without one."""
    probes = []
    for info in inspections or []:
        config = info.get("Config") or {}
        role = (config.get("Labels") or {}).get(ROLE_LABEL, "")
        test = (config.get("Healthcheck") or {}).get("Test") or []
        if role in REPLICATED and test and str(test[-1]).endswith(".json"):
            probes.append({"container": str(info.get("Name", "")).lstrip("/"), "role": role, "file": test[-1]})
    etcd = None
    for info in etcd_inspections or []:
        state = info.get("State") or {}
        if not state.get("Running"):  # a member that does not run: a row that says so, nothing to ask
            etcd = {"container": str(info.get("Name", "")).lstrip("/"), "endpoint": None,
                    "state": str(state.get("Status") or "not running")}
            continue
        for arg in (info.get("Args") or []) + ((info.get("Config") or {}).get("Cmd") or []):
            if str(arg).startswith("--listen-client-urls="):
                local = [u for u in str(arg).split("=", 1)[1].split(",") if "://127.0.0.1:" in u]
                if local:
                    etcd = {"container": str(info.get("Name", "")).lstrip("/"), "endpoint": local[0]}
                    break
    return {"probes": sorted(probes, key=lambda p: natural_key(p["container"])), "etcd": etcd}


def readiness_url(probe_text) -> str:
    """The replica's own /readiness URL from its health check's target file (which names its /liveness)."""
    url = json.loads(probe_text)["target"]["url"]
    return url.rsplit("/liveness", 1)[0] + "/readiness"


def _etcd_row(host, read) -> dict:
    """One member: ``read`` is ``{container, rc, stdout, stderr}`` of ``etcdctl endpoint status -w json``."""
    row = {"host": host, "member": read.get("container") or "-", "health": "unhealthy", "leader": "-",
           "raft_index": "-", "db_size": "-"}
    if read.get("rc") == 0:
        try:
            status = (json.loads(read.get("stdout") or "[]") or [{}])[0].get("Status") or {}
        except (ValueError, AttributeError, IndexError):
            status = {}
        header = status.get("header") or {}
        if header:
            row.update(health="healthy", leader="yes" if header.get("member_id") == status.get("leader") else "no",
                       raft_index=status.get("raftIndex", "-"), db_size=status.get("dbSize", "-"))
            return row
    why = (str(read.get("stderr") or read.get("msg") or "").strip().splitlines() or ["no answer"])[-1]
    row["health"] = "unhealthy: %s" % why[:80]
    return row


def host_read(readiness=None, addresses=None, vip=None, etcd=None) -> dict:
    """One host's reads as status.yml registers them -> ``ha_status``'s entry: ``readiness``, the results of the
    uri loop over the host's replicas (each ``item.item`` a probe of ``ha_reads``; status -1 when nothing answered);
    ``addresses``, ``ip -o addr show``'s output (None: not read); ``etcd``, the ``etcdctl endpoint status`` exec result
    (``container`` added) or None."""
    replicas = []
    for result in readiness or []:
        probe = ((result.get("item") or {}).get("item") or {}) if isinstance(result, dict) else {}
        body = result.get("json") if result.get("json") is not None else result.get("content", result.get("msg"))
        replicas.append({"container": probe.get("container", ""), "role": probe.get("role", ""),
                         "status": result.get("status", -1), "body": body})
    held = None if not isinstance(addresses, str) or not vip else (" %s/" % vip) in addresses
    if isinstance(etcd, dict) and etcd and "rc" not in etcd:  # not asked: the member's container does not run
        etcd = {"container": etcd.get("container"), "rc": 1, "stderr": "container %s" % etcd.get("state", "not running")}
    return {"replicas": replicas, "vip_held": held, "etcd": etcd if isinstance(etcd, dict) and etcd else None}


def ha_status(per_host) -> dict:
    """``{host: {"replicas": [{container, role, status, body}], "vip_held": bool or None, "etcd": read or None}}``
    (``host_read``) -> ``{"replicas": rows, "etcd": rows, "vip_hosts": [hosts holding the VIP], "masters": {role:
    [containers]}}``. A replica's REPLICA is ``replica_role`` of its own /readiness (status -1: it did not answer)."""
    replicas, etcd, vip_hosts = [], [], []
    for host, read in sorted((per_host or {}).items(), key=lambda kv: natural_key(kv[0])):
        read = read or {}
        if read.get("vip_held"):
            vip_hosts.append(host)
        for r in read.get("replicas") or []:
            replicas.append({"host": host, "role": r.get("role", ""), "container": r.get("container", ""),
                             "replica": replica_role(r.get("status", -1), r.get("body")),
                             "vip": "holds" if read.get("vip_held") else ""})
        if read.get("etcd"):
            etcd.append(_etcd_row(host, read["etcd"]))
    replicas.sort(key=lambda r: (REPLICATED.index(r["role"]) if r["role"] in REPLICATED else 9,
                                 natural_key(r["container"])))
    masters = {role: [r["container"] for r in replicas if r["role"] == role and r["replica"] == "master"]
               for role in REPLICATED}
    return {"replicas": replicas, "etcd": etcd, "vip_hosts": vip_hosts, "masters": masters}


def ha_table(status) -> str:
    """The master/standby tables of status.yml, with a line that names what is wrong (no master, two masters, no or
    two VIP holders, an unhealthy etcd member)."""
    problems = []
    for role, masters in (status.get("masters") or {}).items():
        if any(r["role"] == role for r in status.get("replicas") or []) and len(masters) != 1:
            problems.append("%s: %d masters" % (role, len(masters)))
    problems += ["%s down" % r["container"] for r in status.get("replicas") or [] if r["replica"] == "down"]
    if len(status.get("vip_hosts") or []) != 1:
        problems.append("motor_vip held by %d hosts" % len(status.get("vip_hosts") or []))
    problems += ["etcd %s on %s" % (r["health"], r["host"]) for r in status.get("etcd") or []
                 if r["health"] != "healthy"]
    text = "master/standby (%s):\n" % ("; ".join(problems) if problems else "one master per role, the VIP on %s"
                                       % status["vip_hosts"][0])
    text += render_table(status.get("replicas") or [], REPLICA_COLUMNS)
    if status.get("etcd"):
        text += "\n\netcd members:\n" + render_table(status["etcd"], ETCD_COLUMNS)
    return text
