# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""No silent typo (issue 36): typos at nested levels (PyMotor's sections, engine_config, env.json, inventory
variables) are each refused at their path with a did-you-mean; a key far from every known one is a warning naming the upstream
commit of the list, or an error with unknown_keys=error (issue 45); every reference example still validates."""

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
    ("vllm", P + ".motor_nodemanger_config.basic_config.parallel_config.ep_szie", 2, "ep_size"),
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
    return refusal_with(user, env, path)


def refusal_with(user, env, path, **options):
    with pytest.raises(MotorConfigError) as err:
        normalize(user, env, **options)
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


# (path set, value): keys far from every known one, at each level the lists cover
FAR_KEYS = [
    (P + ".engine_config.my_site_flag", True, "vLLM 99d7eb5d"),
    ("motor_deploy_config.env_path", "./conf/env.json", "PyMotor 7d15c04"),
    (COORD + ".request_limit", {"max_requests": 8}, "PyMotor 7d15c04"),
    (CTRL + ".fault_tolerance_config.enable_instance_migration", True, "PyMotor 7d15c04"),
    ("kv_conductor_config.kvevent_rate", 3, "Mooncake conductor 3d88bf917"),
]


@pytest.mark.parametrize("path, value, source", FAR_KEYS, ids=[k[0] for k in FAR_KEYS])
def test_far_key_warns_naming_the_list_commit_or_is_refused_on_request(path, value, source):
    """A key far from every known one: a warning naming the commit the list was read from (a newer release may read
    it), kept as written; with unknown_keys=error the same key is refused at its path."""
    user, env = load("vllm")
    set_path(user, path, value)
    out = normalize(user, env)
    assert any(w.startswith("%s: not known to %s; " % (path, source)) for w in out["warnings"]), out["warnings"]
    parent, key = path.rsplit(".", 1)
    node = out["user_config"]
    for part in parent.split("."):
        node = node[part]
    assert node[key] == value  # passed on as written
    problem, problems = refusal_with(user, env, path, unknown_keys="error")
    assert problem is not None and "not known to " + source in problem.message, [str(p) for p in problems]


def test_near_key_is_an_error_in_either_mode():
    user, env = load("vllm")
    set_path(user, COORD + ".scheduler_config.schedular_type", "kv_cache_affinity")
    for mode in ("warn", "error"):
        problem, problems = refusal_with(user, env, COORD + ".scheduler_config.schedular_type", unknown_keys=mode)
        assert problem is not None and "did you mean 'scheduler_type'?" in problem.hint, [str(p) for p in problems]


def test_unknown_keys_mode_must_be_warn_or_error():
    problem, problems = refusal_with(*load("vllm"), "motor_unknown_keys", unknown_keys="ignore")
    assert problem is not None and "warn or error" in problem.hint, [str(p) for p in problems]


def test_vllm_no_flag_of_a_known_boolean_is_accepted_as_upstream_renders_it():
    """``no_enable_prefix_caching: true`` is rendered by PyMotor as --no-enable-prefix-caching (vLLM's negative flag):
    no problem at all; a typo in it is refused with the no_ spelling; a non-boolean value is refused."""
    user, env = load("vllm")
    user[P]["engine_config"]["no_enable_prefix_caching"] = True
    user[D]["engine_config"]["no-disable-hybrid-kv-cache-manager"] = True
    out = normalize(user, env)
    assert not [w for w in out["warnings"] if "no_" in w.split(":")[0]], out["warnings"]
    user[P]["engine_config"]["no_enable_prefix_cachin"] = True
    user[D]["engine_config"]["no_enforce_eager"] = "yes"
    problem, problems = refusal(user, env, P + ".engine_config.no_enable_prefix_cachin")
    assert problem is not None and "did you mean 'no_enable_prefix_caching'?" in problem.hint
    bad = next(p for p in problems if p.path == D + ".engine_config.no_enforce_eager")
    assert "expected true or false" in bad.message and "--no-enforce-eager" in bad.hint


def test_vllm_dict_config_argument_is_compared_by_its_stem():
    """A dict-valued *_config argument the list lacks (newer vLLM's profiler_config) is far from pooler_config once
    the shared suffix is set aside: a warning; a misspelt known one (compilaton_config) is still refused."""
    user, env = load("vllm")
    user[P]["engine_config"]["profiler_config"] = {"profiler": "torch"}
    out = normalize(user, env)
    assert any(w.startswith(P + ".engine_config.profiler_config: not known to vLLM 99d7eb5d") for w in out["warnings"])
    assert out["user_config"][P]["engine_config"]["profiler_config"] == {"profiler": "torch"}
    user[P]["engine_config"]["compilaton_config"] = {"level": 3}
    problem, problems = refusal(user, env, P + ".engine_config.compilaton_config")
    assert problem is not None and "did you mean 'compilation_config'?" in problem.hint, [str(p) for p in problems]


def test_every_key_of_the_examples_is_known():
    """The reference examples (and our fixtures) validate and carry no unknown-key warning."""
    for folder in sorted(FIXTURES.iterdir()):
        if not (folder / "user_config.json").is_file():
            continue
        out = normalize(*load(folder.name))
        assert not [w for w in out["warnings"] if "not known to " in w], \
            folder.name


def test_expert_parallel_keys_of_the_node_managers_parallel_config_are_known():
    """basic_config.parallel_config is the pydantic ParallelConfig of motor/common/resources/instance.py:74, which
    has ep_size and reads enable_ep from its keyword arguments (not endpoint.py's dataclass of the same name)."""
    user, env = load("vllm")
    set_path(user, P + ".motor_nodemanger_config.basic_config.parallel_config.ep_size", 4)
    set_path(user, P + ".motor_nodemanger_config.basic_config.parallel_config.enable_ep", True)
    out = normalize(user, env)
    assert not [w for w in out["warnings"] if "parallel_config" in w]


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


def test_pd_hybrid_without_scheduler_deploy_mode_gets_single_node_with_a_warning():
    """Newer PyMotor examples leave scheduler_config.deploy_mode out of PD hybrid (they route by
    hybrid_instances_num); PyMotor 7d15c04's deployer needs single_node: filled in, warned; a wrong value stays an
    error."""
    user, env = load("vllm_pd_hybrid")
    user[COORD] = {}
    out = normalize(user, env)
    assert out["user_config"][COORD]["scheduler_config"]["deploy_mode"] == "single_node"
    assert any(w.startswith(COORD + ".scheduler_config.deploy_mode: missing; set to \"single_node\"")
               for w in out["warnings"]), out["warnings"]
    user[COORD] = {"scheduler_config": {"deploy_mode": "pd_separate"}}
    problem, problems = refusal(user, env, COORD + ".scheduler_config.deploy_mode")
    assert problem is not None and "single_node" in problem.message, [str(p) for p in problems]
