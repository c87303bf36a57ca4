# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Plans of the issue-16 fixtures: SGLang PD separation (mf_store, base_gpu_id, bootstrap port) and Atlas A5."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import MF_STORE_PORT
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan, placement_of

_SPEC = importlib.util.spec_from_file_location("motor_plan_helpers", Path(__file__).with_name("test_motor_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)
load_fixture = _HELPERS.load_fixture
inventory = _HELPERS.inventory
assert_invariants = _HELPERS.assert_invariants
by_name = _HELPERS.by_name


def engine_config(cont):
    return cont["user_config"]["motor_engine_%s_config" % cont["role"]]["engine_config"]


def test_sglang_pd_separation_plan_wires_mf_store_and_bootstrap():
    hosts = inventory(engine=2, control=1)
    plan = build_plan(load_fixture("sglang_pd_separation"), hosts)
    assert_invariants(plan, hosts)
    conts = by_name(plan)
    store = conts["sgl-mf-store"]
    assert store["role"] == "mf_store" and store["host"] == "c1" and store["ports"] == [MF_STORE_PORT]
    assert store["env"]["ASCEND_MF_STORE_PORT"] == str(MF_STORE_PORT) and store["env"]["ROLE"] == "mf_store"
    # motor_mf_store_env of env.json reaches the store through set_mf_store_env, as PyMotor's generator injects it
    assert store["shell_env"]["set_mf_store_env"]["ASCEND_MF_LOG_LEVEL"] == "1"
    assert "ASCEND_MF_LOG_LEVEL" not in store["env"]
    prefill, decode = conts["sgl-p0-0"], conts["sgl-d0-0"]
    for cont in (prefill, decode):
        assert cont["env"]["ASCEND_MF_STORE_URL"] == "tcp://10.0.1.1:%d" % MF_STORE_PORT
        assert cont["env"]["ASCEND_MF_TRANSFER_PROTOCOL"] == "device_rdma"  # 800I_A2, as upstream's generator
        assert cont["env"]["SGLANG_HOST_IP"] == cont["ip"]
        # base_gpu_id: logical 0, the first NPU of the pod's container; no vLLM dp rpc port handed to SGLang
        assert engine_config(cont)["base_gpu_id"] == 0 and cont["npu_ids"]
        assert "data_parallel_rpc_port" not in engine_config(cont)
        assert len(cont["endpoints"]) == 1  # one SGLang server per pod (enable_multi_endpoints off)
    assert prefill["port_map"]["bootstrap"] == 8998 and 8998 in prefill["ports"]
    assert "bootstrap" not in decode["port_map"]
    assert engine_config(prefill)["disaggregation_bootstrap_port"] == 8998
    assert conts["sgl-coordinator"]["env"]["DISAGGREGATION_BOOTSTRAP_PORT"] == "8998"
    # sticky: the plan's own placement is a fixed point
    assert build_plan(load_fixture("sglang_pd_separation"), hosts, placement_of(plan)) == plan


def test_sglang_bootstrap_port_set_and_taken_is_refused():
    """The fixture sets disaggregation_bootstrap_port 8998: a port the user set never moves (issue 36)."""
    hosts = inventory(engine=2, control=1, e1={"motor_reserved_ports": [8998]})
    with pytest.raises(MotorPlanError) as err:
        build_plan(load_fixture("sglang_pd_separation"), hosts)
    problem = err.value.problems[0]
    assert problem.path == "motor_engine_prefill_config.engine_config.disaggregation_bootstrap_port"
    assert "hosts.e1.motor_reserved_ports (reserves 8998)" in problem.message


def test_sglang_default_bootstrap_port_taken_moves_for_every_prefill():
    hosts = inventory(engine=2, control=1, e1={"motor_reserved_ports": [8998]}, e2={"motor_reserved_ports": [8998]})
    cfg = load_fixture("sglang_pd_separation",
                       [{"motor_engine_prefill_config": {"engine_config": {"disaggregation_bootstrap_port": None}}}])
    plan = build_plan(cfg, hosts)
    conts = by_name(plan)
    port = conts["sgl-p0-0"]["port_map"]["bootstrap"]
    assert port != 8998
    assert conts["sgl-coordinator"]["env"]["DISAGGREGATION_BOOTSTRAP_PORT"] == str(port)
    assert engine_config(conts["sgl-p0-0"])["disaggregation_bootstrap_port"] == port


def test_sglang_two_prefill_pods_on_one_host_are_refused_with_the_key():
    cfg = load_fixture("sglang_pd_separation", [{"motor_deploy_config": {"p_instances_num": 2, "p_pod_npu_num": 2},
                                                 "motor_engine_prefill_config": {"engine_config": {"tp-size": 2}}}])
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1))
    assert "motor_deploy_config.p_instances_num" in str(err.value)
    assert "disaggregation_bootstrap_port" in str(err.value)


def test_sglang_a5_plan_uses_sdma_and_all_eight_npus():
    hosts = inventory(engine=2, control=1)
    plan = build_plan(load_fixture("sglang_a5"), hosts)
    assert_invariants(plan, hosts)
    assert plan["hardware_type"] == "950-SuperPod-Atlas-8"
    for cont in plan["containers"]:
        if cont["role"] in ("prefill", "decode"):
            assert cont["npu_ids"] == list(range(8))
            assert cont["env"]["ASCEND_MF_TRANSFER_PROTOCOL"] == "sdma"


def test_a5_heterogeneous_places_roles_on_labelled_hosts():
    labels = {"e1": {"motor_host_labels": {"card_type": "Ascend950PR"}},
              "e2": {"motor_host_labels": {"card_type": "Ascend950DT"}}}
    hosts = inventory(engine=2, control=1, **labels)
    plan = build_plan(load_fixture("vllm_a5_pd_heterogeneous"), hosts)
    assert_invariants(plan, hosts)
    placed = {c["name"]: c["host"] for c in plan["containers"] if c["role"] in ("prefill", "decode")}
    assert placed == {"a5het-p0-0": "e1", "a5het-p1-0": "e1", "a5het-d0-0": "e2"}
    # 4-NPU prefill pods keep to whole 4-chip cards
    assert sorted(c["npu_ids"][0] for c in plan["containers"] if c["role"] == "prefill") == [0, 4]


def test_a5_heterogeneous_without_decode_hosts_names_the_label():
    hosts = inventory(engine=2, control=1, e1={"motor_host_labels": {"card_type": "Ascend950PR"}},
                      e2={"motor_host_labels": {"card_type": "Ascend950PR"}})
    with pytest.raises(MotorPlanError) as err:
        build_plan(load_fixture("vllm_a5_pd_heterogeneous"), hosts)
    assert "card_type=Ascend950DT" in str(err.value) and "motor_host_labels" in str(err.value)


def test_bad_host_labels_name_the_variable():
    hosts = inventory(engine=1, control=1, e1={"motor_host_labels": ["card_type"]})
    with pytest.raises(MotorPlanError) as err:
        build_plan(load_fixture("sglang_pd_separation"), hosts)
    assert "hosts.e1.motor_host_labels" in str(err.value)
