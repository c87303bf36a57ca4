# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The etcd member changes that turn the live cluster into the inventory's member set (pure, no I/O).

etcd's runtime reconfiguration: one member at a time, on a healthy member that stays; a member is removed with
``member remove <hex id>`` and added with ``member add`` before it starts with an empty data directory,
``--initial-cluster`` = every member of the cluster then (itself included) and ``--initial-cluster-state=existing``.
Every step is checked the way etcd's strict reconfiguration check does (a majority of the cluster started before and
after the step, adding a second member to a one-member cluster allowed) so that a change that cannot keep a majority
is refused before anything changes."""

from __future__ import annotations


def _quorum(size: int) -> int:
    return size // 2 + 1


def _hex_id(member_id) -> str:
    """A member's ID as ``etcdctl member remove`` takes it (member list's JSON gives it in decimal)."""
    return format(int(member_id or 0), "x")


def _healthy_urls(health) -> set:
    """The client URLs ``etcdctl endpoint health --cluster -w json`` found healthy."""
    return {row.get("endpoint") for row in health or [] if isinstance(row, dict) and row.get("health") is True}


def _anchor(target, probes):
    """The first target host whose member answered ``member list`` and is listed in it by its own name."""
    for host in target:
        listed = (probes.get(host) or {}).get("members")
        if not isinstance(listed, dict):
            continue
        own = (listed.get("header") or {}).get("member_id")
        if any(m.get("ID") == own and m.get("name") == host for m in listed.get("members") or []):
            return host, listed["members"]
    return None, None


def member_plan(target, peer_urls, probes):
    """What to do to make the live cluster the member set ``target``.

    ``target``: the inventory's member names, in order; ``peer_urls``: name -> peer URL of the hosts of the play;
    ``probes``: host of the play -> ``{data: bool, members: <member list JSON or None>, health: <endpoint health
    --cluster JSON or None>}``. Returns ``{action, anchor, live, target, remove, add, retire, left_alone, problem}``:
    action ``create`` (no data anywhere: a new cluster), ``start`` (nothing to change), ``change`` (``remove``:
    ``[{name, id}]`` in order, ``add``: ``[{name, peer_url, registered, initial_cluster}]`` in order) or ``refuse``
    (``problem`` says the member sets, the reason and the fix). ``retire``: hosts of the play outside ``target``
    with data (stop the member, move its data aside); ``left_alone``: removed members that are not in the play."""
    target = list(target)
    plan = {"action": "start", "anchor": None, "live": [], "target": target, "remove": [], "add": [], "retire": [],
            "left_alone": [], "problem": ""}
    with_data = [h for h, p in probes.items() if (p or {}).get("data")]
    plan["retire"] = [h for h in with_data if h not in target]
    if not with_data:
        return dict(plan, action="create")
    anchor, live = _anchor(target, probes)
    if anchor is None:
        missing = [t for t in target if not (probes.get(t) or {}).get("data")]
        if missing or plan["retire"]:
            return dict(plan, action="refuse", problem=(
                f"etcd member set -> {', '.join(target)}: no member of it answers (none running with its data), so "
                f"{', '.join(missing or plan['retire'])} cannot be {'added' if missing else 'removed'}: members are "
                "added and removed on a running cluster only. Fix: start the cluster with its current member set "
                "first (restore the previous motor_etcd_members or motor_control_hosts), then change it."))
        return plan
    plan["anchor"] = anchor
    plan["live"] = [m.get("name") or "(unstarted) " + ",".join(m.get("peerURLs") or []) for m in live]
    healthy = _healthy_urls((probes.get(anchor) or {}).get("health"))
    wanted_urls = {peer_urls.get(t): t for t in target if t in peer_urls}
    named = {m["name"]: m for m in live if m.get("name")}
    # the cluster as a list of [name, peer URL, healthy]; an added member that never started takes its target name
    cluster, remove = [], []
    for m in live:
        name, urls = m.get("name"), m.get("peerURLs") or []
        if not name:
            name = next((wanted_urls[u] for u in urls if u in wanted_urls and wanted_urls[u] not in named), None)
        started = any(u in healthy for u in m.get("clientURLs") or [])
        cluster.append([name or "", urls[0] if urls else "", started, m.get("ID")])
        if name not in target:
            remove.append({"name": name or plan["live"][len(cluster) - 1], "id": _hex_id(m.get("ID")),
                           "healthy": started})
        elif name in named and peer_urls.get(name) and peer_urls[name] not in urls:
            return dict(plan, action="refuse", problem=(
                f"etcd member {name}: its peer URL is {', '.join(urls)} in the live cluster, the inventory gives "
                f"{peer_urls[name]}; changing a member's address is not automated. Fix: restore its address, or "
                f"remove it (leave it out of motor_etcd_members, run etcd.yml) and add it again."))
    registered = [row[0] for row in cluster if row[0] and row[0] not in named]
    add = [{"name": t, "peer_url": peer_urls.get(t, ""), "registered": t in registered}
           for t in target if t not in named]
    add.sort(key=lambda a: not a["registered"])  # a member added by an interrupted run starts first
    # members that are down are removed first: it raises the share of started members
    remove.sort(key=lambda r: r["healthy"])
    plan["left_alone"] = [r["name"] for r in remove if r["name"] not in probes]
    if not remove and not add:
        return plan
    current = ", ".join(plan["live"])

    def refuse(step, reason):
        return dict(plan, action="refuse", problem=(
            f"etcd member set {current} (healthy: {', '.join(r[0] for r in cluster if r[2]) or 'none'}) -> "
            f"{', '.join(target)}: {step} would {reason}; nothing was changed. Fix: start the members that are down "
            "and run again, or change one member at a time so that a majority of the cluster stays up at every step."))

    for gone in remove:
        size, up = len(cluster), sum(1 for r in cluster if r[2])
        if up < _quorum(size):
            return refuse(f"removing {gone['name']}", f"need a majority ({_quorum(size)} of {size}) up, {up} are")
        cluster = [r for r in cluster if _hex_id(r[3]) != gone["id"]]
        up_after = sum(1 for r in cluster if r[2])
        if up_after < _quorum(len(cluster)):
            return refuse(f"removing {gone['name']}",
                          f"leave {up_after} of {len(cluster)} members up, not a majority")
        plan["remove"].append({"name": gone["name"], "id": gone["id"]})
    for new in add:
        size, up = len(cluster), sum(1 for r in cluster if r[2])
        if not new["registered"]:
            if up < _quorum(size) or not (up >= _quorum(size + 1) or (up == 1 and size == 1)):
                return refuse(f"adding {new['name']}", f"leave {up} of {size + 1} members up, not a majority")
            cluster.append([new["name"], new["peer_url"], False, None])
        # etcd compares this list with the cluster's: every member, the new one included
        new["initial_cluster"] = ",".join(f"{r[0]}={r[1]}" for r in cluster)
        for row in cluster:
            row[2] = row[2] or row[0] == new["name"]  # the role waits until it is healthy before the next step
        plan["add"].append(new)
    return dict(plan, action="change")
