# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Issue 16: every refusal of an SGLang or Atlas A5 configuration names the key to change (its path, or the keys in
its hint), from validation (config/) through the plan (plan/)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan

_SPEC = importlib.util.spec_from_file_location("motor_plan_helpers", Path(__file__).with_name("test_motor_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)
FIXTURES = _HELPERS.FIXTURES
P, D, DEPLOY = "motor_engine_prefill_config", "motor_engine_decode_config", "motor_deploy_config"
LABELS = {"e1": {"motor_host_labels": {"card_type": "Ascend950PR"}},
          "e2": {"motor_host_labels": {"card_type": "Ascend950DT"}}}


def _engine(role, **values):
    return lambda u: u[role]["engine_config"].update(values)


def _deploy(**values):
    return lambda u: u[DEPLOY].update(values)


def _het_prefill_crowded(u):
    u[DEPLOY].update(p_instances_num=3, d_pod_npu_num=4)
    u[D]["engine_config"]["data_parallel_size"] = 1


# (id, fixture, mutation, inventory kwargs, the problem's path, a key the hint names or None)
CASES = [
    ("sglang sizes exceed the pod", "sglang_pd_separation", _engine(P, **{"tp-size": 8}), {},
     P + ".engine_config", "motor_deploy_config.p_pod_npu_num"),
    ("sglang with vLLM's tp key", "sglang_pd_separation", _engine(P, tensor_parallel_size=4), {},
     P + ".engine_config.tensor_parallel_size", "tp-size"),
    ("sglang with vLLM's memory key", "sglang_pd_separation", _engine(P, gpu_memory_utilization=0.9), {},
     P + ".engine_config.gpu_memory_utilization", "mem-fraction-static"),
    ("sglang without model-path", "sglang_pd_separation", lambda u: u[P]["engine_config"].pop("model-path"), {},
     P + ".engine_config.model_path", "model-path"),
    ("sglang on two pods", "sglang_pd_separation", _deploy(single_p_instance_pod_num=2), {},
     DEPLOY + ".single_p_instance_pod_num", P + ".engine_type"),
    ("sglang P with vLLM D", "sglang_pd_separation", lambda u: u[D].update(engine_type="vllm"), {},
     D + ".engine_type", None),
    ("sglang with kv affinity", "sglang_pd_separation",
     lambda u: u["motor_coordinator_config"]["scheduler_config"].update(scheduler_type="kv_cache_affinity"), {},
     "motor_coordinator_config.scheduler_config.scheduler_type", "engine_type"),
    ("sglang dp attention dp-size", "sglang_a5", _engine(D, **{"dp-size": 3}), {},
     D + ".engine_config.dp_size", "dp-size"),
    ("sglang privileged bootstrap port", "sglang_pd_separation", _engine(P, disaggregation_bootstrap_port=80), {},
     P + ".engine_config.disaggregation_bootstrap_port", None),
    ("sglang two prefill pods on one host", "sglang_pd_separation", _deploy(p_instances_num=2, hardware_type="800I_A3"),
     {"engine": 1}, DEPLOY + ".p_instances_num", None),
    ("A5 NPUs per pod above the host", "sglang_a5", _deploy(p_pod_npu_num=16), {},
     DEPLOY + ".p_pod_npu_num", None),
    ("unknown A5 type", "sglang_a5", _deploy(hardware_type="350-Atlas-32"), {},
     DEPLOY + ".hardware_type", "350-Atlas-8"),
    ("A5 type without hosts of it", "sglang_a5", lambda u: None,
     {"e1": {"motor_hardware_type": "800I_A2"}, "e2": {"motor_hardware_type": "800I_A2"}},
     "hosts.e1.motor_hardware_type", "motor_deploy_config.hardware_type"),
    ("A5 heterogeneous without labelled hosts", "vllm_a5_pd_heterogeneous", lambda u: None, {},
     DEPLOY + ".single_p_instance_pod_num", "motor_host_labels"),
    ("A5 heterogeneous NPU shortage", "vllm_a5_pd_heterogeneous", _deploy(p_instances_num=3), LABELS,
     DEPLOY, "motor_deploy_config.p_instances_num"),
    ("A5 heterogeneous prefill hosts full", "vllm_a5_pd_heterogeneous", _het_prefill_crowded, LABELS,
     DEPLOY + ".p_instances_num", "card_type=Ascend950PR (motor_host_labels)"),
]


@pytest.mark.parametrize("fixture,mutate,hosts,path,hint_key", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusal_names_the_key(fixture, mutate, hosts, path, hint_key):
    user = json.loads((FIXTURES / fixture / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((FIXTURES / fixture / "env.json").read_text(encoding="utf-8"))
    mutate(user)
    engine = hosts.pop("engine", 2) if "engine" in hosts else 2
    with pytest.raises((MotorConfigError, MotorPlanError)) as err:
        build_plan(normalize(user, env), _HELPERS.inventory(engine=engine, control=1, **hosts))
    problems = err.value.problems
    paths = [p.path if hasattr(p, "path") else p[0] for p in problems]
    assert path in paths, str(err.value)
    text = str([p for p in problems if (p.path if hasattr(p, "path") else p[0]) == path][0])
    if hint_key:
        assert hint_key in text, text
