# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""No silent typo (issue 36): typos at nested levels (PyMotor's sections, engine_config, env.json, inventory
variables) are each refused at their path with a did-you-mean; a key far from every vLLM argument is a warning; every
reference example still validates."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.tests.unit.corpus_edit import set_path
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "configs"
ENGINE, CONTROL = "motor_engine_hosts", "motor_control_hosts"
P, D = "motor_engine_prefill_config", "motor_engine_decode_config"
COORD, CTRL = "motor_coordinator_config", "motor_controller_config"

# (base fixture, user_config path set to a value, the key meant). The path of the problem is the set path.
USER_TYPOS = [
    ("vllm", COORD + ".scheduler_config.schedular_type", "kv_cache_affinity", "scheduler_type"),
    ("vllm", COORD + ".scheduler_config.deploy_mdoe", "pd_separate", "deploy_mode"),
    ("vllm", COORD + ".api_config.coordinator_api_infer_prot", 1025, "coordinator_api_infer_port"),
    ("vllm", COORD + ".api_config.coordinator_api_mgmt_prot", 1026, "coordinator_api_mgmt_port"),
    ("vllm", COORD + ".inference_workers_config.num_worker", 2, "num_workers"),
    ("vllm", COORD + ".exception_config.max_retries", 3, "max_retry"),
    ("vllm", COORD + ".timeout_config.request_timout", 30, "request_timeout"),
    ("vllm", COORD + ".logging_config.log_levle", "DEBUG", "log_level"),
    ("vllm", COORD + ".standby_config.enable_master_standy", False, "enable_master_standby"),
    ("vllm", COORD + ".prefill_kv_event_config.block_szie", 128, "block_size"),
    ("vllm", COORD + ".schedular_config", {}, "scheduler_config"),
    ("vllm", CTRL + ".api_config.controller_api_prot", 1026, "controller_api_port"),
    ("vllm", CTRL + ".instance_config.instance_assemble_timout", 600, "instance_assemble_timeout"),
    ("vllm", CTRL + ".fault_tolerance_config.enable_fault_tolerence", True, "enable_fault_tolerance"),
    ("vllm", CTRL + ".logging_config.host_log_directory", "/var/log", "host_log_dir"),
    ("vllm", P + ".motor_nodemanger_config.api_config.node_manager_prot", 1026, "node_manager_port"),
    ("vllm", D + ".motor_nodemanger_config.endpoint_config.base_prot", 10000, "base_port"),
    ("vllm", P + ".health_check_config.npu_usage_treshold", 3, "npu_usage_threshold"),
    ("vllm", "motor_deploy_config.tls_config.mgmt_tls_config.enable_tsl", False, "enable_tls"),
    ("vllm", "motor_deploy_config.p_instance_num", 1, "p_instances_num"),
    ("vllm", "kv_conductor_config.http_server_prot", 13333, "http_server_port"),
    ("vllm_models_qwen_3_30b", "kv_cache_pool_config.metadata_sever", "P2PHANDSHAKE", "metadata_server"),
    ("vllm", P + ".engine_config.tensor_paralel_size", 1, "tensor_parallel_size"),
    ("vllm", D + ".engine_config.gpu_memory_utilisation", 0.9, "gpu_memory_utilization"),
    ("vllm", P + ".engine_config.max_model_length", 4096, "max_model_len"),
    ("vllm", P + ".engine_config.enable-prefix-cacheing", True, "enable_prefix_caching"),
    ("vllm_pd_hybrid", "motor_engine_union_config.engine_config.enforce_eagr", True, "enforce_eager"),
]
ENV_TYPOS = [
    ("motor_engine_decoder_env", "motor_engine_decode_env"),
    ("motor_comon_env", "motor_common_env"),
    ("motor_coordinater_env", "motor_coordinator_env"),
]
HOST_TYPOS = [("motor_hardware_typ", "motor_hardware_type"), ("motor_npu_id", "motor_npu_ids"),
              ("motor_reserved_port", "motor_reserved_ports")]


def load(name):
    folder = FIXTURES / name
    return (json.loads((folder / "user_config.json").read_text(encoding="utf-8")),
            json.loads((folder / "env.json").read_text(encoding="utf-8")))


def refusal(user, env, path):
    with pytest.raises(MotorConfigError) as err:
        normalize(user, env)
    return next((p for p in err.value.problems if p.path == path), None), err.value.problems


def test_thirty_typos_at_nested_levels():
    assert len(USER_TYPOS) + len(ENV_TYPOS) + len(HOST_TYPOS) >= 30


@pytest.mark.parametrize("base, path, value, meant", USER_TYPOS, ids=[t[1] for t in USER_TYPOS])
def test_user_config_typo_is_refused_at_its_path(base, path, value, meant):
    user, env = load(base)
    set_path(user, path, value)
    problem, problems = refusal(user, env, path.replace("-", "_") if ".engine_config." in path else path)
    assert problem is not None, [str(p) for p in problems]
    assert "did you mean '%s'?" % meant in problem.hint


@pytest.mark.parametrize("section, meant", ENV_TYPOS)
def test_env_section_typo_is_refused(section, meant):
    user, env = load("vllm")
    env[section] = {"HCCL_BUFFSIZE": "1024"}
    problem, problems = refusal(user, env, "env_config." + section)
    assert problem is not None and "did you mean '%s'?" % meant in problem.hint, [str(p) for p in problems]


@pytest.mark.parametrize("name, meant", HOST_TYPOS)
def test_inventory_variable_typo_is_refused(name, meant):
    config = normalize(*load("vllm"))
    hosts = {"e1": {"motor_host_ip": "10.0.0.1", "group_names": [ENGINE, CONTROL], "motor_var_names": [name]},
             "e2": {"motor_host_ip": "10.0.0.2", "group_names": [ENGINE]}}
    with pytest.raises(MotorPlanError) as err:
        build_plan(config, hosts)
    problem = next((p for p in err.value.problems if p.path == "hosts.e1." + name), None)
    assert problem is not None and "did you mean %s?" % meant in problem.hint, str(err.value)


def test_far_vllm_key_is_a_warning_not_an_error():
    user, env = load("vllm")
    user[P]["engine_config"]["my_site_flag"] = True
    out = normalize(user, env)
    assert any(w.startswith(P + ".engine_config.my_site_flag: not a vLLM engine argument") for w in out["warnings"])


def test_every_key_of_the_examples_is_known():
    """The reference examples (and our fixtures) validate and carry no unknown-key warning."""
    for folder in sorted(FIXTURES.iterdir()):
        if not (folder / "user_config.json").is_file():
            continue
        out = normalize(*load(folder.name))
        assert not [w for w in out["warnings"] if "not a vLLM engine argument" in w or "KV pool (Mooncake)" in w], \
            folder.name


def test_sections_refused_at_once_and_value_untouched():
    """Every unknown key is reported in one run; the normalized config of a valid file is unchanged by the check."""
    user, env = load("vllm")
    before = copy.deepcopy(user)
    set_path(user, COORD + ".scheduler_config.schedular_type", "kv_cache_affinity")
    set_path(user, CTRL + ".api_config.controller_api_prot", 1)
    env["motor_engine_decoder_env"] = {}
    problems = refusal(user, env, "")[1]
    assert {COORD + ".scheduler_config.schedular_type", CTRL + ".api_config.controller_api_prot",
            "env_config.motor_engine_decoder_env"} <= {p.path for p in problems}
    assert normalize(before, load("vllm")[1])["user_config"][COORD] == normalize(*load("vllm"))["user_config"][COORD]
