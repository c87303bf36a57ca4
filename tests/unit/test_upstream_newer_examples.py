# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A newer PyMotor's example configs, pasted as they are (issue 45): validate and plan pass with warnings only (keys our
lists, read from PyMotor 7d15c04 and vLLM 99d7eb5d, do not know are warnings naming that commit); a mode this collection
does not deploy is refused by name; motor_unknown_keys=error refuses a far key and a typo still fails by name.

Every example goes through the validation and the planner in Python (what validate.yml's motor_validate and plan.yml's
motor_plan_job run); two of them, and the refusal, go through the playbooks with ansible-playbook."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
NEWER = REPO / "tests" / "fixtures" / "upstream_newer"
BIN = Path(sys.executable).parent
EXAMPLES = sorted(str(path.parent.relative_to(NEWER)) for path in NEWER.rglob("user_config.json"))
ENGINE_SECTIONS = ("motor_engine_prefill_config", "motor_engine_decode_config", "motor_engine_union_config")
# the examples this collection refuses by name: (path of the problem, words of its message or hint)
REFUSED = {
    "examples/infer_engines/vllm/ucm_pd": ("kv_cache_store_config", "did you mean 'kv_cache_pool_config'?"),
}


def load(name):
    folder = NEWER / name
    return (json.loads((folder / "user_config.json").read_text(encoding="utf-8")),
            json.loads((folder / "env.json").read_text(encoding="utf-8")))


def _placeholder(value):
    return isinstance(value, str) and value.startswith("<") and value.endswith(">")


def fill_in(user):
    """The overrides a user writes for upstream's template fields ("<请按实际情况填写…>": fill in as the case may be)."""
    deploy, override = user.get("motor_deploy_config") or {}, {}
    filled = {"weight_mount_path": "/mnt/weight", "image_name": "pymotor:example"}
    deploy_override = {key: value for key, value in filled.items() if _placeholder(deploy.get(key))}
    if deploy_override:
        override["motor_deploy_config"] = deploy_override
    for section in ENGINE_SECTIONS:
        if _placeholder(((user.get(section) or {}).get("engine_config") or {}).get("model")):
            override[section] = {"engine_config": {"model": "/mnt/weight/model"}}
    return [override] if override else []


def engine_hosts(config):
    """One engine host per pod (a pod never spans hosts), of the example's hardware type."""
    return sum(engine["count"] * engine["pods"] for engine in config["engines"].values())


def test_the_newer_snapshot_is_there():
    assert len(EXAMPLES) >= 20, EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_newer_example_validates_and_plans_with_warnings_only(name):
    user, env = load(name)
    if name in REFUSED:
        path, words = REFUSED[name]
        with pytest.raises(MotorConfigError) as err:
            normalize(user, env, fill_in(user))
        problem = next((p for p in err.value.problems if p.path == path), None)
        assert problem is not None and words in problem.message + problem.hint, str(err.value)
        return
    config = normalize(user, env, fill_in(user))
    hosts = {"e%d" % i: {"motor_host_ip": "10.0.0.%d" % (i + 1), "group_names": ["motor_engine_hosts"],
                         "motor_hardware_type": config["hardware_type"]} for i in range(engine_hosts(config))}
    hosts["c0"] = {"motor_host_ip": "10.0.1.1", "group_names": ["motor_control_hosts"]}
    plan = build_plan(config, hosts)
    if user["motor_deploy_config"].get("deploy_mode") == "single_container":  # every role in one container
        assert [c["role"] for c in plan["containers"]] == ["single_container"]
    else:
        assert {c["role"] for c in plan["containers"]} >= {"controller", "coordinator"}
    # every key unknown to our lists is a warning naming the list's commit, never a silent pass
    unknown = [w for w in config["warnings"] if "not known to " in w]
    assert all(" 7d15c04" in w or " 99d7eb5d" in w or " 3d88bf917" in w for w in unknown), unknown


def test_the_newer_keys_are_the_warnings():
    """The keys the newer examples add (a motor_deploy_config key, a coordinator section, vLLM's profiler_config) are
    warnings; no_ booleans of known vLLM flags are not even that."""
    warned = set()
    for name in EXAMPLES:
        if name in REFUSED:
            continue
        user, env = load(name)
        warned.update(w.split(":")[0] for w in normalize(user, env, fill_in(user))["warnings"] if "not known to" in w)
    assert {"motor_deploy_config.env_path", "motor_coordinator_config.request_limit",
            "motor_engine_prefill_config.engine_config.profiler_config"} <= warned, warned
    assert not [path for path in warned if ".no_" in path], warned


def write_inventory(tmp_path, hardware, engines):
    lines = ["all:", "  children:", "    motor_engine_hosts:", "      vars: {motor_hardware_type: %s}" % hardware,
             "      hosts:"]
    lines += ["        e%d: {ansible_host: 192.0.2.%d, motor_host_ip: 192.0.2.%d}" % (i, 20 + i, 20 + i)
              for i in range(engines)]
    lines += ["    motor_control_hosts:", "      hosts:", "        c0: {ansible_host: 192.0.2.10, motor_host_ip: 192.0.2.10}"]
    path = tmp_path / "hosts.yml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_playbook(tmp_path, playbook, name, *extra):
    user, env = load(name)
    config = normalize(user, env, fill_in(user))
    inventory = write_inventory(tmp_path, config["hardware_type"], engine_hosts(config))
    variables = {"motor_config_dir": str(NEWER / name), "motor_user_config_overrides": fill_in(user),
                 "motor_plan_output": str(tmp_path / "plan.json")}
    for more in extra:
        variables.update(more)
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / playbook),
           "-e", json.dumps(variables)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300,
                          check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("name, warned", [
    ("examples/infer_engines/vllm/models/GLM/5", "motor_deploy_config.env_path: not known to PyMotor 7d15c04"),
    ("examples/infer_engines/vllm/models/deepseek/v4/flash",
     "motor_engine_decode_config.engine_config.profiler_config: not known to vLLM 99d7eb5d"),
])
def test_plan_playbook_on_a_newer_example(tmp_path, name, warned):
    """plan.yml (validate.yml first) on the example as pasted, template fields filled: a plan, the warning shown."""
    rc, output = run_playbook(tmp_path, "plan.yml", name)
    assert rc == 0, output
    assert warned in " ".join(output.split()), output
    assert json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))["job_id"]


def test_unknown_keys_error_refuses_the_far_key_and_a_typo_still_fails_by_name(tmp_path):
    name = "examples/infer_engines/vllm/models/GLM/5"
    typo = {"motor_coordinator_config": {"scheduler_config": {"schedular_type": "kv_cache_affinity"}}}
    user = load(name)[0]
    variables = {"motor_unknown_keys": "error", "motor_user_config_overrides": fill_in(user) + [typo]}
    rc, output = run_playbook(tmp_path, "validate.yml", name, variables)
    text = " ".join(output.split())
    assert rc != 0, output
    assert "motor_deploy_config.env_path: unknown key of motor_deploy_config: not known to PyMotor 7d15c04" in text
    assert "motor_coordinator_config.scheduler_config.schedular_type:" in text
    assert "did you mean 'scheduler_type'?" in text
