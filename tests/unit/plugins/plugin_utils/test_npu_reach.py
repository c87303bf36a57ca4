# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Device reachability across hosts (reconcile/npu_reach.py): which pings each host runs (bounded), and how the
controller judges hccn_tool's real-format answers, through the precheck (host, device, peer and fix, all at once)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.filter.motor_precheck_pings import motor_precheck_pings
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_checks import job_network_findings
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_reach import (
    host_pairs,
    parse_ping,
    ping_list,
    ping_lists,
    reach_findings,
)

# hccn_tool -i 0 -ping -g address 10.10.100.10, as Huawei's guide prints it (success, and with loss)
REAL_OK = ("device 0 PING 10.10.100.10\nrecv seq=0,time=0.067000ms\nrecv seq=1,time=0.049000ms\n"
           "recv seq=2,time=0.047000ms\n3 packets transmitted, 3 received, 0.00% packet loss\n")
REAL_LOSS = ("recv time out seq=0\nrecv seq=1,time=0.097000ms\nrecv seq=2,time=0.066000ms\n"
             "3 packets transmitted, 2 received, 33.33% packet loss\n")


def engine(name, host, role, instance, pod, npus):
    return {"name": name, "host": host, "role": role, "instance": instance, "pod": pod, "npu_ids": npus}


def network(prefix, npus):
    return {str(n): {"ip": "%s.%d" % (prefix, n + 1)} for n in npus}


# 1P1D: P on a (NPUs 0-3), D on b (NPUs 0-7); a second P on b (same host as D: no ping), a 2-pod union on b and c.
PLAN = {"containers": [
    engine("p0-0", "a", "prefill", 0, 0, [0, 1, 2, 3]),
    engine("d0-0", "b", "decode", 0, 0, [0, 1, 2, 3, 4, 5, 6, 7]),
    engine("p1-0", "b", "prefill", 1, 0, [8, 9]),
    engine("u0-0", "c", "union", 0, 0, [0, 1]),
    engine("u0-1", "d", "union", 0, 1, [0, 1]),
    {"name": "controller", "host": "e", "role": "controller", "instance": None, "pod": None, "npu_ids": []},
]}
NETWORKS = {"a": network("29.1.0", range(4)), "b": network("29.2.0", range(10)),
            "c": network("29.3.0", range(2)), "d": network("29.4.0", range(2))}


def test_only_hosts_that_exchange_data_over_the_device_nics_are_paired():
    pairs = host_pairs(PLAN)
    assert pairs == {("a", "b"): ({0, 1, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7}), ("c", "d"): ({0, 1}, {0, 1})}
    # one host's own pairs (what each host asks for) are the plan's pairs whose first host it is
    for host in "abcde":
        assert host_pairs(PLAN, host) == {pair: npus for pair, npus in pairs.items() if pair[0] == host}


def test_pings_are_bounded_by_the_larger_side_and_cover_every_involved_device():
    pings = ping_list(PLAN, "a", NETWORKS)
    assert len(pings) == 8  # max(4, 8), not 4 x 8
    assert {p["npu"] for p in pings} == {0, 1, 2, 3}
    assert {p["peer_npu"] for p in pings} == set(range(8))
    assert pings[5] == {"npu": 1, "address": "29.2.0.6", "peer_host": "b", "peer_npu": 5}
    assert ping_list(PLAN, "b", NETWORKS) == []  # b is the second host of its pair: a pings it
    assert [(p["npu"], p["peer_npu"]) for p in ping_list(PLAN, "c", NETWORKS)] == [(0, 0), (1, 1)]


def test_a_device_without_ip_is_left_out_of_the_pings():
    networks = dict(NETWORKS, b=dict(NETWORKS["b"], **{"7": {"ip": ""}}))
    assert {p["peer_npu"] for p in ping_list(PLAN, "a", networks)} == set(range(7))
    assert ping_list(PLAN, "c", dict(NETWORKS, d={})) == []


def test_the_filter_reads_the_device_ips_from_each_hosts_discovery():
    hostvars = {h: {"motor_service_docker": {"npu_network": n}} for h, n in NETWORKS.items()}
    assert motor_precheck_pings(PLAN, "a", hostvars) == ping_list(PLAN, "a", NETWORKS)


def test_every_engine_hosts_pings_at_once_are_each_hosts_own_list():
    # what the reach step works out once for the play: the same list each host would ask for, for every engine host
    hostvars = {h: {"motor_service_docker": {"npu_network": n}} for h, n in NETWORKS.items()}
    every = motor_precheck_pings(PLAN, None, hostvars)
    assert every == ping_lists(PLAN, NETWORKS)
    assert sorted(every) == ["a", "b", "c", "d"]  # e runs the controller only: no NPUs, no pings
    for host in "abcd":
        assert every[host] == ping_list(PLAN, host, NETWORKS)
    assert len(every["a"]) == 8 and every["b"] == []


def result(npu, peer_host, peer_npu, address, stdout, rc=0, stderr=""):
    return {"item": {"npu": npu, "address": address, "peer_host": peer_host, "peer_npu": peer_npu},
            "stdout": stdout, "stderr": stderr, "rc": rc}


def test_real_format_answers_are_parsed():
    assert parse_ping(REAL_OK) == (3, 3)
    assert parse_ping(REAL_LOSS) == (3, 2)
    assert parse_ping("") is None


def test_every_failed_ping_is_a_problem_naming_host_device_peer_and_fix_all_at_once():
    timeout = "device 2 PING 29.2.0.3\n" + "".join("recv time out seq=%d\n" % s for s in range(3)) + \
        "3 packets transmitted, 0 received, 100.00% packet loss\n"
    probes = {"a": {"npu_pings": [result(0, "b", 0, "29.2.0.1", REAL_OK), result(1, "b", 1, "29.2.0.2", REAL_LOSS),
                                  result(2, "b", 2, "29.2.0.3", timeout),
                                  result(3, "b", 3, "29.2.0.4", "", rc=1, stderr="Error: device 3 does not exist.")]},
              "c": {"npu_pings": [{"skipped": True, "item": {"npu": 0}}]}, "b": {}}
    found = reach_findings(probes)
    assert list(found) == ["a"]
    assert [(check, what) for check, what, dummy in found["a"]] == [
        ("NPU 1 to b NPU 1", "hccn_tool -i 1 -ping -g address 29.2.0.2: 2 of 3 packets received"),
        ("NPU 2 to b NPU 2", "hccn_tool -i 2 -ping -g address 29.2.0.3: 0 of 3 packets received"),
        ("NPU 3 to b NPU 3", "hccn_tool -i 3 -ping -g address 29.2.0.4: Error: device 3 does not exist."),
    ]
    assert all("/etc/hccn.conf" in fix for dummy, dummy2, fix in found["a"])
    # through the job-wide NPU network check, gated by check_links like the rest of it
    plan = {"containers": [engine("p0-0", "a", "prefill", 0, 0, [0, 1, 2, 3])]}
    assert [c for c, dummy, dummy2 in job_network_findings(plan, probes, True)["a"]][0] == "NPU 1 to b NPU 1"
    assert job_network_findings(plan, probes, False) == {}
