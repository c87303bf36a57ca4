# -*- coding: utf-8 -*-
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Unit tests for plugins/plugin_utils/config/.

Golden files: regenerate with ``UPDATE_GOLDEN=1 pytest tests/unit/plugins/plugin_utils/test_motor_config.py``.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib

import pytest
import yaml

from ansible_collections.pymotor.ascend.tests.unit.corpus_edit import deep_merge, set_path
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError, load_json_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import config_summary, normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import Problem

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "configs"
GOOD_CONFIGS = sorted(path.name for path in FIXTURES.iterdir() if (path / "user_config.json").is_file())
CORPUS = yaml.safe_load((FIXTURES / "broken_cases.yaml").read_text(encoding="utf-8"))
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"


def load_pair(name):
    """Return (user_config, env_config) of a fixture directory."""
    folder = FIXTURES / name
    user = json.loads((folder / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((folder / "env.json").read_text(encoding="utf-8"))
    return user, env


def dump(value):
    """Deterministic JSON text as stored in golden files."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


# --- helpers to apply a corpus case ------------------------------------------------------------------------------

def build_case(case):
    """Return (user_config, env_config, overrides) for a corpus case (may raise MotorConfigError when parsing)."""
    user, env = load_pair(case["base"])
    if "user" in case:
        user = case["user"]
    if "env" in case:
        env = case["env"]
    for path, value in (case.get("set") or {}).items():
        set_path(user, path, value)
    for path in case.get("set_null") or []:
        set_path(user, path, None, delete_on_none=False)
    deep_merge(user, case.get("patch") or {}) if isinstance(user, dict) else None
    for path, value in (case.get("env_set") or {}).items():
        set_path(env, path, value)
    for path in case.get("env_set_null") or []:
        set_path(env, path, None, delete_on_none=False)
    if "raw_user" in case:
        user = load_json_text(case["raw_user"], "user_config.json")
    if "raw_env" in case:
        env = load_json_text(case["raw_env"], "env.json")
    return user, env, case.get("overrides")


def _warning_paths(warnings):
    return [text.split(": ", 1)[0] for text in warnings]


# --- good configurations -----------------------------------------------------------------------------------------

def test_fixture_set_is_complete():
    assert GOOD_CONFIGS == [
        "seed_pd_hybrid", "seed_pd_separation", "sglang_a5", "sglang_pd_separation", "vllm",
        "vllm_a3_string_numbers", "vllm_a5_pd_heterogeneous", "vllm_models_deepseek_v3_1",
        "vllm_models_qwen_3_30b", "vllm_pd_hybrid",
    ]


@pytest.mark.parametrize("name", GOOD_CONFIGS)
def test_golden(name):
    user, env = load_pair(name)
    actual = dump(normalize(user, env))
    golden = FIXTURES / name / "normalized.golden.json"
    if UPDATE_GOLDEN:
        golden.write_text(actual, encoding="utf-8")
    assert golden.exists(), "missing %s: run with UPDATE_GOLDEN=1" % golden
    assert actual == golden.read_text(encoding="utf-8"), "normalized output changed: review, then UPDATE_GOLDEN=1"


def without_conversions(result):
    """The result without the warnings about strings read as numbers or booleans: the normalized config carries
    the typed values (and SGLang's "model" renamed to model_path), so normalizing it again has nothing left to convert."""
    kept = [w for w in result["warnings"] if "write it as a plain JSON" not in w and "(SGLang's alias)" not in w]
    return dict(result, warnings=kept)


@pytest.mark.parametrize("name", GOOD_CONFIGS)
def test_good_configs_are_idempotent(name):
    user, env = load_pair(name)
    first = normalize(user, env)
    assert normalize(first["user_config"], env) == without_conversions(first)
    assert dump(normalize(first["user_config"], env)) == dump(without_conversions(first))


@pytest.mark.parametrize("name", GOOD_CONFIGS)
def test_inputs_are_not_mutated(name):
    user, env = load_pair(name)
    before = copy.deepcopy((user, env))
    normalize(user, env, [{"motor_deploy_config": {"image_name": "site:1"}}])
    assert (user, env) == before


def test_seed_pd_separation_summary():
    result = normalize(*load_pair("seed_pd_separation"))
    assert result["mode"] == "pd_separation"
    assert result["affinity"] is True
    assert result["engines"]["prefill"]["transfer"] == {
        "connector": "MultiConnector", "store_connector": "AscendStoreConnector",
        "capability": "trigger", "source": "connectors[0]",
    }
    assert result["kv_events"] == {"role": "prefill", "endpoint_port": 5557, "replay_port": 6667, "topic": "kv-events"}
    assert result["kv_pool"]["enabled"] is True and result["kv_pool"]["port"] == 50088
    assert result["kv_conductor"] == {"enabled": True, "http_server_port": 13333}
    engine_config = result["user_config"]["motor_engine_prefill_config"]["engine_config"]
    assert "kv_events_config" in engine_config and "kv-events-config" not in engine_config
    assert result["user_config"]["motor_coordinator_config"]["prefill_kv_event_config"] == {
        "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:6667", "block_size": 128,
        "http_server_port": 13333, "model_path": "/mnt/weight/qwen3_8B", "engine_type": "vLLM",
    }


def test_seed_pd_hybrid_summary():
    result = normalize(*load_pair("seed_pd_hybrid"))
    assert result["mode"] == "pd_hybrid"
    assert list(result["engines"]) == ["union"]
    assert result["engines"]["union"]["transfer"]["capability"] is None
    assert result["engines"]["union"]["transfer"]["store_connector"] == "AscendStoreConnector"
    assert result["kv_events"]["role"] == "union"
    assert result["user_config"]["motor_coordinator_config"]["prefill_kv_event_config"]["model_path"] == "/mnt/weight/Qwen3-0.6B/"
    # env.json has no union section: the union env falls back to prefill's
    assert result["env"]["union"]["HCCL_BUFFSIZE"] == "200"
    # the user document's hybrid pod reserves 2 NPUs for a tp 1 engine: no warning (upstream's examples do that), the
    # summary says it
    assert result["warnings"] == []
    assert "instances: union 1 x 1 pod(s) x 2 NPUs (1 of 2 used by the engine, the rest idle but reserved)" in \
        config_summary(result)


def test_deepseek_decode_fills_two_pods():
    result = normalize(*load_pair("vllm_models_deepseek_v3_1"))
    decode = result["engines"]["decode"]
    assert (decode["dp"], decode["pods"], decode["npus_per_pod"], decode["dp_local_per_pod"]) == (32, 2, 16, 16)
    assert not any("motor_engine_decode_config.engine_config:" in warning for warning in result["warnings"])


def test_defaults_filled():
    user, env = load_pair("vllm")
    del user["motor_deploy_config"]["weight_mount_path"]
    result = normalize(user, env)
    deploy = result["user_config"]["motor_deploy_config"]
    assert deploy["weight_mount_path"] == "/mnt/weight"
    assert deploy["deploy_mode"] == "infer_service_set"
    assert result["kv_pool"]["enabled"] is False and result["kv_conductor"]["enabled"] is False
    assert result["kv_events"] is None and result["affinity"] is False


def test_affinity_without_conductor_section_fills_default_port():
    user, env = load_pair("seed_pd_separation")
    del user["kv_conductor_config"]
    result = normalize(user, env)
    assert result["user_config"]["kv_conductor_config"] == {"http_server_port": 13333}
    assert result["kv_conductor"] == {"enabled": True, "http_server_port": 13333}


def test_pool_defaults_only_in_summary():
    result = normalize(*load_pair("vllm_models_qwen_3_30b"))
    assert result["kv_pool"]["eviction_high_watermark_ratio"] == 0.95
    assert result["kv_pool"]["eviction_ratio"] == 0.05
    pool = result["user_config"]["kv_cache_pool_config"]
    assert "eviction_ratio" not in pool  # PyMotor's file stays as written; the kv_pool env comes from the summary
    assert pool["port"] == 50088 and pool["default_kv_lease_ttl"] == 11000


def test_equal_spellings_are_merged():
    user, env = load_pair("vllm")
    user["motor_engine_prefill_config"]["engine_config"]["enforce_eager"] = True
    result = normalize(user, env)
    engine_config = result["user_config"]["motor_engine_prefill_config"]["engine_config"]
    assert engine_config["enforce_eager"] is True and "enforce-eager" not in engine_config


def test_dispatch_profile_overrides_unknown_connector():
    user, env = load_pair("vllm")
    for role in ("prefill", "decode"):
        section = user["motor_engine_%s_config" % role]
        section["dispatch_profile"] = "handoff"
        section["engine_config"]["kv_transfer_config"]["kv_connector"] = "CustomConnector"
    transfer = normalize(user, env)["engines"]["decode"]["transfer"]
    assert transfer == {"connector": "CustomConnector", "store_connector": None,
                        "capability": "handoff", "source": "dispatch_profile"}


def test_connector_names_are_case_insensitive():
    user, env = load_pair("vllm")
    for role in ("prefill", "decode"):
        user["motor_engine_%s_config" % role]["engine_config"]["kv_transfer_config"]["kv_connector"] = "nixlconnector"
    assert normalize(user, env)["engines"]["prefill"]["transfer"]["capability"] == "handoff"


def test_env_values_become_strings():
    user, env = load_pair("vllm")
    env["motor_engine_decode_env"].update({"FLAG": True, "OFF": False, "RATIO": 0.5, "COUNT": 3})
    result = normalize(user, env)
    decode = result["env"]["decode"]
    # PyMotor's generator exports a non-string as Python prints it (lib/utils.py update_shell_safely)
    assert (decode["FLAG"], decode["OFF"], decode["RATIO"], decode["COUNT"]) == ("True", "False", "0.5", "3")
    assert result["env"]["common"]["SERVICE_ID"] == "mindie-motor"
    assert result["env"]["common"]["NORTH_PLATFORM"] == "None"  # north_config.name unset: PyMotor prints None
    assert result["env"]["common"]["ENGINE_TYPE"] == "vllm"
    assert result["env"]["common"]["MODEL_NAME"] == "qwen3-8B"
    assert list(decode) == sorted(decode)


def test_env_config_optional():
    result = normalize(load_pair("vllm")[0])
    assert result["env_config"] == {}
    assert result["env"]["prefill"] == {"ENGINE_TYPE": "vllm", "MODEL_NAME": "qwen3-8B", "NORTH_PLATFORM": "None",
                                        "SERVICE_ID": "mindie-motor"}


# --- overrides -----------------------------------------------------------------------------------------------

def test_overrides_merge_replace_delete_and_record():
    user, env = load_pair("seed_pd_separation")
    overrides = [
        {"motor_deploy_config": {"image_name": "site:1", "job_id": "site"}},
        {"motor_engine_prefill_config": {"engine_config": {"max-model-len": 4096, "enforce_eager": None}},
         "kv_conductor_config": {"kvevent_instance": {"mooncake_master": {"type": "Mooncake"}}}},
        {"motor_deploy_config": {"job_id": "site-b"}},
    ]
    result = normalize(user, env, overrides)
    deploy = result["user_config"]["motor_deploy_config"]
    engine_config = result["user_config"]["motor_engine_prefill_config"]["engine_config"]
    assert deploy["image_name"] == "site:1" and deploy["job_id"] == "site-b"
    assert engine_config["max_model_len"] == 4096 and "enforce_eager" not in engine_config
    assert result["overridden"] == {
        "kv_conductor_config.kvevent_instance.mooncake_master.type": 1,
        "motor_deploy_config.image_name": 0,
        "motor_deploy_config.job_id": 2,
        "motor_engine_prefill_config.engine_config.enforce_eager": 1,
        "motor_engine_prefill_config.engine_config.max_model_len": 1,
    }
    assert result["env"]["common"]["SERVICE_ID"] == "site-b"
    again = normalize(result["user_config"], env, overrides)
    assert again == result


def test_override_lists_replace():
    user, env = load_pair("vllm_models_deepseek_v3_1")
    override = {"motor_engine_decode_config": {"engine_config": {"compilation_config": {"cudagraph_capture_sizes": [8]}}}}
    result = normalize(user, env, [override])
    assert result["user_config"]["motor_engine_decode_config"]["engine_config"]["compilation_config"] == {
        "cudagraph_capture_sizes": [8], "cudagraph_mode": "FULL_DECODE_ONLY"}
    assert result["overridden"] == {"motor_engine_decode_config.engine_config.compilation_config.cudagraph_capture_sizes": 0}


# --- errors --------------------------------------------------------------------------------------------------

def test_error_format_and_all_problems_reported():
    user, env = load_pair("vllm")
    user["version"] = "v1"
    user["motor_deploy_config"]["hardware_type"] = "800I-A3"
    env["motor_common_env"]["X"] = [1]
    with pytest.raises(MotorConfigError) as info:
        normalize(user, env)
    err = info.value
    assert [problem.path for problem in err.problems] == [
        "version", "motor_deploy_config.hardware_type", "env_config.motor_common_env.X"]
    lines = str(err).splitlines()
    assert len(lines) == 3
    for line, problem in zip(lines, err.problems):
        assert line == "%s: %s (%s)" % (problem.path, problem.message, problem.hint)
    assert isinstance(err.problems[0], Problem)


def test_load_json_text():
    assert load_json_text('{"a": 1}', "x.json") == {"a": 1}
    with pytest.raises(MotorConfigError) as info:
        load_json_text('{\n  "a": 1,\n}', "x.json")
    assert str(info.value).startswith("x.json: invalid JSON at line 3 column 1")


def test_broken_corpus_is_large_enough():
    assert len(CORPUS["cases"]) >= 40
    names = [case["name"] for case in CORPUS["cases"] + CORPUS["warn_cases"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", CORPUS["cases"], ids=[case["name"] for case in CORPUS["cases"]])
def test_broken_case(case):
    with pytest.raises(MotorConfigError) as info:
        user, env, overrides = build_case(case)
        normalize(user, env, overrides)
    err = info.value
    paths = [problem.path for problem in err.problems]
    text = str(err)
    for expected in case["paths"]:
        assert expected in paths, "expected path %r in:\n%s" % (expected, text)
        assert "%s: " % expected in text
    for fragment in case.get("contains", []):
        assert fragment in text, "expected %r in:\n%s" % (fragment, text)
    warning_paths = [problem.path for problem in err.warnings]
    for expected in case.get("warnings", []):
        assert expected in warning_paths


@pytest.mark.parametrize("case", CORPUS["warn_cases"], ids=[case["name"] for case in CORPUS["warn_cases"]])
def test_warning_case(case):
    user, env, overrides = build_case(case)
    result = normalize(user, env, overrides)
    paths = _warning_paths(result["warnings"])
    for expected in case["warnings"]:
        assert expected in paths, "expected warning %r in %s" % (expected, result["warnings"])
    text = "\n".join(result["warnings"])
    for fragment in case.get("contains", []):
        assert fragment in text
    assert normalize(result["user_config"], env, overrides) == without_conversions(result)


def test_values_from_ansible_variables_are_described_by_kind():
    class AnsibleFloat(float):  # Ansible hands over subclasses such as _AnsibleTaggedFloat
        pass

    with pytest.raises(MotorConfigError) as info:
        normalize(*load_pair("seed_pd_separation"), [{"motor_deploy_config": {"p_pod_npu_num": AnsibleFloat(4.5)}}])
    assert "motor_deploy_config.p_pod_npu_num: expected an integer, got float 4.5 (set by override 0)" in str(info.value)


def test_plan_ports_as_digit_strings_are_accepted():
    user, env = load_pair("seed_pd_separation")
    user["motor_coordinator_config"]["api_config"] = {"coordinator_api_infer_port": "8080"}
    user["motor_engine_prefill_config"]["motor_nodemanger_config"] = {"api_config": {"node_manager_port": 3100},
                                                                      "endpoint_config": {"base_port": "65532"}}
    normalize(user, env)
