# -*- coding: utf-8 -*-
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Tests of the pymotor.ascend.motor_config filter shim."""

from __future__ import annotations

import json
import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.filter.motor_config import FilterModule
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "configs"


@pytest.fixture(name="motor_config")
def fixture_motor_config():
    return FilterModule().filters()["motor_config"]


def _texts(name):
    folder = FIXTURES / name
    return (folder / "user_config.json").read_text(encoding="utf-8"), (folder / "env.json").read_text(encoding="utf-8")


def test_filter_is_registered():
    assert set(FilterModule().filters()) == {"motor_config"}


def test_accepts_dicts_and_json_text(motor_config):
    user_text, env_text = _texts("seed_pd_separation")
    expected = normalize(json.loads(user_text), json.loads(env_text))
    assert motor_config(json.loads(user_text), json.loads(env_text)) == expected
    assert motor_config(user_text, env_text) == expected
    assert motor_config(user_text.encode("utf-8"), env_text) == expected


def test_env_and_overrides_are_optional(motor_config):
    user_text = _texts("vllm_pd_hybrid")[0]
    result = motor_config(user_text)
    assert result["mode"] == "pd_hybrid" and result["env_config"] == {}
    result = motor_config(user_text, None, [{"motor_deploy_config": {"image_name": "site:1"}}])
    assert result["overridden"] == {"motor_deploy_config.image_name": 0}


def test_errors_become_filter_errors(motor_config):
    user_text, env_text = _texts("vllm")
    user = json.loads(user_text)
    user["motor_deploy_config"]["hardware_type"] = "800I-A3"
    user["motor_engine_decode_config"]["engine_config"]["kv_transfer_config"]["kv_connector"] = "FooConnector"
    with pytest.raises(AnsibleFilterError) as info:
        motor_config(user, env_text)
    lines = str(info.value).splitlines()
    assert lines[0].startswith("motor_deploy_config.hardware_type: ")
    assert lines[1].startswith("motor_engine_decode_config.engine_config.kv_transfer_config.kv_connector: ")
    assert "dispatch_profile" in lines[1]


def test_malformed_json_names_line_and_column(motor_config):
    env_text = _texts("vllm")[1]
    with pytest.raises(AnsibleFilterError, match=r"^user_config\.json: invalid JSON at line 2 column 3"):
        motor_config('{\n  version: "v2.0"}', env_text)
    with pytest.raises(AnsibleFilterError, match=r"^env\.json: invalid JSON at line 1 column 2"):
        motor_config(_texts("vllm")[0], "{]")


def test_override_problem_is_tagged(motor_config):
    user_text, env_text = _texts("vllm")
    with pytest.raises(AnsibleFilterError, match=r"\(set by override 1\)"):
        motor_config(user_text, env_text, [{}, {"motor_deploy_config": {"p_pod_npu_num": 32}}])
