# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""HCCL's host ports in the plan (plan/hccl.py): each engine container its own HCCL_IF_BASE_PORT range."""

from __future__ import annotations

import pytest

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hccl import HCCL_BASE_PORT, HCCL_PORT_RANGE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan, placement_of

from .test_motor_plan import assert_invariants, by_name, contract_config, inventory


def hccl_range(container):
    base = container["port_map"]["hccl"]
    return set(range(base, base + HCCL_PORT_RANGE))


def test_two_engines_on_one_host_get_disjoint_reserved_hccl_ranges():
    hosts = inventory(engine=1, control=1)
    plan = build_plan(contract_config(), hosts)
    assert_invariants(plan, hosts)
    conts = by_name(plan)
    p0, d0 = conts["job-p0-0"], conts["job-d0-0"]
    assert p0["host"] == d0["host"] == "e1"
    assert (p0["port_map"]["hccl"], d0["port_map"]["hccl"]) == (HCCL_BASE_PORT, HCCL_BASE_PORT + HCCL_PORT_RANGE)
    assert not hccl_range(p0) & hccl_range(d0)
    for cont in (p0, d0):
        # reserved on the host (the plan's bound ports: no other container may get them), set in the container env
        assert hccl_range(cont) <= set(cont["ports"])
        assert hccl_range(cont) <= set(plan["hosts"]["e1"]["ports"])
        assert cont["env"]["HCCL_IF_BASE_PORT"] == str(cont["port_map"]["hccl"])
        # a wiring variable: env.json cannot override it through the set_*_env functions
        assert all("HCCL_IF_BASE_PORT" not in body for body in cont["shell_env"].values())
    # the control plane binds no HCCL range
    assert "hccl" not in conts["job-controller"]["port_map"]
    assert "HCCL_IF_BASE_PORT" not in conts["job-controller"]["env"]


def test_pods_of_an_instance_on_two_hosts_each_plan_their_own_range():
    plan = build_plan(contract_config(roles={"prefill": (1, 2, 2, 2), "decode": (1, 1, 2, 1)}), inventory(engine=2, control=1))
    conts = by_name(plan)
    assert conts["job-p0-0"]["host"] != conts["job-p0-1"]["host"]
    for cont in plan["containers"]:
        if cont["tier"] == 2:
            others = [c for c in plan["containers"] if c["tier"] == 2 and c["host"] == cont["host"] and c is not cont]
            assert all(not hccl_range(cont) & hccl_range(o) for o in others)
            if not others:  # alone on its host: HCCL's default, like any pod in its own Kubernetes network namespace
                assert cont["port_map"]["hccl"] == HCCL_BASE_PORT


def test_reserved_ports_and_env_json_move_the_range():
    hosts = inventory(engine=1, control=1, e1={"motor_reserved_ports": ["60000-60040"]})
    conts = by_name(build_plan(contract_config(), hosts))
    assert conts["job-p0-0"]["port_map"]["hccl"] == 60041
    assert conts["job-d0-0"]["port_map"]["hccl"] == 60041 + HCCL_PORT_RANGE
    # env.json's HCCL_IF_BASE_PORT is the preferred base, and the plan's value wins where they differ (a warning)
    plan = build_plan(contract_config(env={"prefill": {"HCCL_IF_BASE_PORT": "50000"},
                                           "decode": {"HCCL_IF_BASE_PORT": "50000"}}), inventory(engine=1, control=1))
    conts = by_name(plan)
    assert (conts["job-p0-0"]["env"]["HCCL_IF_BASE_PORT"], conts["job-d0-0"]["env"]["HCCL_IF_BASE_PORT"]) == \
        ("50000", str(50000 + HCCL_PORT_RANGE))
    assert any("HCCL_IF_BASE_PORT" in w and "is set by the deployment plan" in w for w in plan["warnings"])


def test_no_room_for_hccl_is_a_plan_problem():
    with pytest.raises(MotorPlanError) as err:
        build_plan(contract_config(), inventory(engine=1, control=1, e1={"motor_reserved_ports": ["60000-65535"]}))
    assert any(p.path == "hosts.e1.motor_reserved_ports" and "HCCL_IF_BASE_PORT" in p.message
               for p in err.value.problems), str(err.value)


def test_kept_pods_keep_their_hccl_range_and_the_plan_is_a_fixed_point():
    def cfg(p_count):
        return contract_config(roles={"prefill": (p_count, 1, 2, 1), "decode": (1, 1, 2, 1)})

    hosts = inventory(engine=1, control=1)
    two = build_plan(cfg(2), hosts)
    assert build_plan(cfg(2), hosts, placement_of(two)) == two
    # scale in: p1 goes, d0 keeps the range it got next to p1
    shrunk = by_name(build_plan(cfg(1), hosts, placement_of(two)))
    assert shrunk["job-d0-0"]["port_map"]["hccl"] == by_name(two)["job-d0-0"]["port_map"]["hccl"]
    # scale out: the new pod takes the lowest free range, the others keep theirs
    grown = by_name(build_plan(cfg(3), hosts, placement_of(two)))
    for name, cont in by_name(two).items():
        if "hccl" in cont["port_map"]:
            assert grown[name]["port_map"]["hccl"] == cont["port_map"]["hccl"]
    taken = {c["port_map"]["hccl"] for n, c in grown.items() if n != "job-p2-0" and "hccl" in c["port_map"]}
    assert grown["job-p2-0"]["port_map"]["hccl"] == max(taken) + HCCL_PORT_RANGE
