# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Hardware from the hosts (issue 36): NPUs per host come from the inventory (motor_npu_ids) or discovery
(motor_host_probe's /dev/davinciN devices), not from the number an A5 type name ends with, so PyMotor's
vllm_pd_hetero (16-NPU pods on 950-SuperPod-Atlas-8) validates and plans on hosts with 16 NPUs; engine hosts of
another hardware type are refused, each named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import host_view
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
ENGINE, CONTROL = "motor_engine_hosts", "motor_control_hosts"
LABELS = {"e1": "Ascend950PR", "e2": "Ascend950DT"}


def hetero_950():
    """PyMotor's vllm_pd_hetero shape: 16-NPU prefill and decode pods on 950-SuperPod-Atlas-8, PD heterogeneous."""
    folder = FIXTURES / "vllm_a5_pd_heterogeneous"
    user = json.loads((folder / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((folder / "env.json").read_text(encoding="utf-8"))
    deploy = user["motor_deploy_config"]
    deploy.update(hardware_type="950-SuperPod-Atlas-8", p_instances_num=1, d_instances_num=1,
                  p_pod_npu_num=16, d_pod_npu_num=16)
    for section in ("motor_engine_prefill_config", "motor_engine_decode_config"):
        user[section]["engine_config"].update(tensor_parallel_size=16, data_parallel_size=1)
    return user, env


def hosts_with(npus_of):
    hosts = {}
    for index, name in enumerate(("e1", "e2")):
        hosts[name] = dict({"motor_host_ip": "10.0.0.%d" % (index + 1), "group_names": [ENGINE],
                            "motor_host_labels": {"card_type": LABELS[name]}}, **npus_of(name))
    hosts["c1"] = {"motor_host_ip": "10.0.1.1", "group_names": [CONTROL]}
    return hosts


def test_hetero_950_validates_with_16_npu_pods():
    config = normalize(*hetero_950())
    assert {role: e["npus_per_pod"] for role, e in config["engines"].items()} == {"prefill": 16, "decode": 16}


def test_hetero_950_plans_on_hosts_with_16_npus_from_the_inventory():
    plan = build_plan(normalize(*hetero_950()), hosts_with(lambda name: {"motor_npu_ids": "0-15"}))
    pods = {c["name"]: c for c in plan["containers"] if c["tier"] == 2}
    assert sorted((c["host"], c["role"], c["npu_ids"]) for c in pods.values()) == [
        ("e1", "prefill", list(range(16))), ("e2", "decode", list(range(16)))]


def test_hetero_950_plans_on_hosts_with_16_npus_from_discovery():
    """No motor_npu_ids: the NPU devices motor_host_probe read are the host's NPUs."""
    probe = {"npu_devices": list(range(16)), "can_talk_to_docker": True}
    hosts = {}
    for name, ip, group in (("e1", "10.0.0.1", ENGINE), ("e2", "10.0.0.2", ENGINE), ("c1", "10.0.1.1", CONTROL)):
        variables = {"motor_host_ip": ip, "group_names": [group]}
        if name in LABELS:
            variables["motor_host_labels"] = {"card_type": LABELS[name]}
        hosts[name] = host_view(variables, probe if group == ENGINE else None)
    plan = build_plan(normalize(*hetero_950()), hosts)
    assert sorted(len(c["npu_ids"]) for c in plan["containers"] if c["tier"] == 2) == [16, 16]


def test_hetero_950_on_8_npu_hosts_is_refused_at_the_pod_size():
    with pytest.raises(MotorPlanError) as err:
        build_plan(normalize(*hetero_950()), hosts_with(lambda name: {}))
    assert "16 NPUs per pod do not fit on any 950-SuperPod-Atlas-8 engine host (at most 8 NPUs)" in str(err.value)


def test_800i_a2_keeps_its_product_count():
    user, env = hetero_950()
    user["motor_deploy_config"]["hardware_type"] = "800I_A2"
    with pytest.raises(MotorConfigError) as err:
        normalize(user, env)
    assert "motor_deploy_config.p_pod_npu_num: 16 is out of range: must be in 1..8" in str(err.value)


def test_job_whose_hardware_type_does_not_match_its_hosts_lists_them():
    hosts = hosts_with(lambda name: {"motor_npu_ids": "0-15", "motor_hardware_type": "800I_A3"})
    with pytest.raises(MotorPlanError) as err:
        build_plan(normalize(*hetero_950()), hosts)
    assert [p.path for p in err.value.problems] == ["hosts.e1.motor_hardware_type", "hosts.e2.motor_hardware_type"]
    assert all("800I_A3 host in motor_engine_hosts, but the job's hardware_type is 950-SuperPod-Atlas-8" in p.message
               for p in err.value.problems)
