# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Nothing the user chose moves (issue 36, plan/pinned.py): a port set in user_config is planned as written or the
plan fails naming both owners and the key to change; defaults move with a warning naming the key that pins them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan

_SPEC = importlib.util.spec_from_file_location("motor_plan_helpers", Path(__file__).with_name("test_motor_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)
contract_config, inventory, by_name = _HELPERS.contract_config, _HELPERS.inventory, _HELPERS.by_name

INFER = "motor_coordinator_config.api_config.coordinator_api_infer_port"


def with_infer_port(port):
    cfg = contract_config()
    cfg["user_config"]["motor_coordinator_config"]["api_config"] = {"coordinator_api_infer_port": port}
    return cfg


def refusal(cfg, hosts):
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, hosts)
    return err.value.problems


def test_user_port_reserved_is_an_error_naming_both_owners():
    problems = refusal(with_infer_port(1025), inventory(engine=1, control=1, c1={"motor_reserved_ports": [1025]}))
    assert [p.path for p in problems] == [INFER]
    assert problems[0].message == ("1025 for coordinator_infer on host c1 collides with hosts.c1.motor_reserved_ports "
                                   "(reserves 1025): a port you set is never moved")
    assert problems[0].hint == "change %s, or free 1025 in hosts.c1.motor_reserved_ports" % INFER


def test_two_user_ports_on_one_value_name_both_keys():
    cfg = with_infer_port(7000)
    cfg["user_config"]["motor_controller_config"]["api_config"] = {"controller_api_port": 7000}
    problems = refusal(cfg, inventory(engine=1, control=1))
    problem = next(p for p in problems if p.path == "motor_controller_config.api_config.controller_api_port")
    assert "collides with job-coordinator, which binds 7000 (%s)" % INFER in problem.message
    assert problem.hint == "change motor_controller_config.api_config.controller_api_port or %s" % INFER


def test_user_port_wins_over_a_default_of_another_container():
    """controller_api_port 1026 (PyMotor's own default, written out) keeps 1026: the coordinator's default moves."""
    cfg = contract_config()
    cfg["user_config"]["motor_controller_config"]["api_config"] = {"controller_api_port": 1026}
    plan = build_plan(cfg, inventory(engine=1, control=1))
    assert plan["controller"]["api_port"] == 1026
    assert plan["coordinator"]["mgmt_port"] != 1026
    assert any(w.startswith("motor_coordinator_config.api_config.coordinator_api_mgmt_port: default 1026")
               for w in plan["warnings"])


def test_user_engine_port_reserved_is_an_error():
    cfg = contract_config()
    problems = refusal(cfg, inventory(engine=1, control=1, e1={"motor_reserved_ports": [9000]}))
    assert {p.path for p in problems} >= {"motor_engine_prefill_config.engine_config.data_parallel_rpc_port"}


def test_engine_pods_sharing_a_host_stack_on_a_user_port():
    """PyMotor's per-pod engine ports: P and D both set data_parallel_rpc_port 9000, one host: 9000 and 9001."""
    plan = build_plan(contract_config(), inventory(engine=1, control=1))
    conts = by_name(plan)
    assert {conts["job-p0-0"]["port_map"]["dp_rpc"], conts["job-d0-0"]["port_map"]["dp_rpc"]} == {9000, 9001}


def test_default_moves_and_names_the_key_that_pins_it():
    plan = build_plan(contract_config(), inventory(engine=1, control=1, c1={"motor_reserved_ports": [1025]}))
    assert plan["coordinator"]["infer_port"] == 1026
    assert any(w.startswith(INFER + ": default 1025 is taken or reserved on host c1, the plan uses 1026")
               and "set %s to a free port to pin it" % INFER in w for w in plan["warnings"])
