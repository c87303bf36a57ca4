# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Device-to-device reachability of the NPU network across hosts (no I/O).

KV transfer between prefill and decode instances, and HCCL between the pods of one instance, run over the NPUs' own
NICs (the device IPs of ``hccn_tool -i N -ip -g``). A peer's device IP is known only after every host was read, so
the deploy pings after the plan, from each host, with the read-only ``hccn_tool -i N -ping -g address <ip>``
(roles/motor_service/tasks/reach.yml); the controller judges the answers here with the other NPU prechecks.

Bounded: not every pair of devices. For each pair of hosts that must reach each other, the involved NPUs of the
first host (by name) ping those of the second position by position, ``max(n_first, n_second)`` pings, so every
involved device sends or answers at least once (8 pings for a 1P1D of 8 NPUs each on two hosts; at most 16 per host
pair on an A3).
"""

from __future__ import annotations

import re

PING_SUMMARY = re.compile(r"(\d+)\s+packets transmitted,\s*(\d+)\s+received")
REACH_FIX = ("put the device IPs of both hosts in one RoCE network: check the NPU ports' switch/VLAN, and the netmask, "
             "gateway and netdetect address in /etc/hccn.conf (hccn_tool -i <id> -gateway -g / -netdetect -g)")


def _engines(plan: dict) -> list:
    return [c for c in plan.get("containers") or [] if c.get("npu_ids")]


def _talk(first: dict, second: dict) -> bool:
    """Whether two engine containers exchange data over the device NICs: pods of one instance (HCCL), or a prefill
    and a decode container (KV transfer, any P to any D)."""
    if (first["role"], first.get("instance")) == (second["role"], second.get("instance")):
        return first.get("pod") != second.get("pod")
    return {first["role"], second["role"]} == {"prefill", "decode"}


def host_pairs(plan: dict, first_host: str | None = None) -> dict:
    """(first host, second host) -> (NPUs of the first, NPUs of the second) that must reach each other; with
    ``first_host`` only the pairs whose first host it is (its engines against all others: linear in the plan, where
    every pair of the plan's engines grows with the square of the hosts, and each host asks for its own)."""
    engines = _engines(plan)
    pairs = {}
    for i, one in enumerate(engines):
        others = engines[i + 1:]
        if first_host is not None:
            if one["host"] != first_host:
                continue
            others = [other for other in engines if other["host"] > first_host]
        for other in others:
            if one["host"] == other["host"] or not _talk(one, other):
                continue
            first, second = sorted((one, other), key=lambda c: c["host"])
            mine, theirs = pairs.setdefault((first["host"], second["host"]), (set(), set()))
            mine.update(first["npu_ids"])
            theirs.update(second["npu_ids"])
    return pairs


def ping_list(plan: dict, host: str, networks: dict) -> list:
    """The pings ``host`` runs: ``[{npu, address, peer_host, peer_npu}]``; ``networks`` is host -> the probe's
    ``npu_network`` (NPU id -> {ip}). A device without an IP is left out (the address check names it)."""
    out = []
    for (first, second), (mine, theirs) in sorted(host_pairs(plan, host).items()):
        own, peer = (networks or {}).get(first) or {}, (networks or {}).get(second) or {}
        senders = [n for n in sorted(mine) if (own.get(str(n)) or {}).get("ip")]
        targets = [n for n in sorted(theirs) if (peer.get(str(n)) or {}).get("ip")]
        for index in range(max(len(senders), len(targets)) if senders and targets else 0):
            npu, peer_npu = senders[index % len(senders)], targets[index % len(targets)]
            out.append({"npu": npu, "address": peer[str(peer_npu)]["ip"], "peer_host": second, "peer_npu": peer_npu})
    return out


def ping_lists(plan: dict, networks: dict) -> dict:
    """host -> ``ping_list`` of that host, for every engine host of the plan: worked out once on the controller for
    all hosts (the reach step hands each host its list; each host templating its own read the controller's plan and
    every host's discovery once per host: quadratic in the hosts)."""
    return dict((host, ping_list(plan, host, networks)) for host in sorted({c["host"] for c in _engines(plan)}))


def parse_ping(text: str) -> tuple | None:
    """(transmitted, received) from ``hccn_tool -i N -ping -g address X`` output (``3 packets transmitted,
    3 received, 0.00% packet loss``), None when there is no summary line."""
    match = PING_SUMMARY.search(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def reach_findings(probes: dict) -> dict:
    """host -> [(check, what, fix)]: every ping the reach step ran (the probe's ``npu_pings``, the registered loop
    results) that lost a packet, failed, or printed no summary. Any loss is refused: upstream's own guide says to
    check the hardware first when the ping loses packets, and RDMA transfers stall on a lossy path."""
    out = {}
    for host, probe in sorted((probes or {}).items()):
        for result in (probe or {}).get("npu_pings") or []:
            item = result.get("item") if isinstance(result, dict) else None
            if not isinstance(item, dict) or result.get("skipped"):
                continue
            counts = parse_ping(result.get("stdout"))
            if counts and counts[0] and counts[0] == counts[1] and not result.get("rc"):
                continue
            said = ("%s of %s packets received" % (counts[1], counts[0]) if counts else
                    (str(result.get("stderr") or result.get("stdout") or result.get("msg") or "").strip()
                     or "rc %s" % result.get("rc")))
            out.setdefault(host, []).append((
                "NPU %s to %s NPU %s" % (item["npu"], item["peer_host"], item["peer_npu"]),
                "hccn_tool -i %s -ping -g address %s: %s" % (item["npu"], item["address"], said), REACH_FIX))
    return out
