# -*- coding: utf-8 -*-
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Run playbooks/validate.yml with ansible-playbook against good, broken and malformed configurations."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "configs"
PLAYBOOK = REPO / "playbooks" / "validate.yml"


def _ansible_playbook():
    candidate = pathlib.Path(sys.executable).parent / "ansible-playbook"
    return str(candidate) if candidate.exists() else shutil.which("ansible-playbook")


def _collections_path():
    # In a checkout the collection is reachable through <repo>/.build/collections; under ansible-test the
    # repository itself already sits at ansible_collections/pymotor/ascend.
    if REPO.parent.name == "pymotor" and REPO.parent.parent.name == "ansible_collections":
        return str(REPO.parent.parent.parent)
    return str(REPO / ".build" / "collections")


pytestmark = pytest.mark.skipif(_ansible_playbook() is None, reason="ansible-playbook not installed")


def run_validate(*extra_vars):
    """Run the playbook with extra vars (each a dict); return (rc, combined output)."""
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = _collections_path()
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_CONFIG", None)
    command = [_ansible_playbook(), str(PLAYBOOK)]
    for variables in extra_vars:
        command += ["-e", json.dumps(variables)]
    proc = subprocess.run(command, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _write_pair(folder, user, env_text):
    folder.mkdir()
    (folder / "user_config.json").write_text(user if isinstance(user, str) else json.dumps(user), encoding="utf-8")
    (folder / "env.json").write_text(env_text, encoding="utf-8")
    return folder


def test_good_config_dir():
    rc, output = run_validate({"motor_config_dir": str(FIXTURES / "seed_pd_separation")})
    assert rc == 0, output
    assert "mode: pd_separation" in output
    assert "affinity: True" in output
    # the one line every job playbook starts with (they all import validate.yml): the job and where its config is
    assert f"\njob mindie-motor from {FIXTURES / 'seed_pd_separation'}\n" in output, output


def test_shipped_inventories_name_no_configuration():
    """A mistyped -e motor_config_dir must fail ("no PyMotor configuration given"), not fall back to a demo config
    deployed under the job id of every upstream example."""
    files = [p for p in (REPO / "inventories").rglob("*") if p.is_file()]
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        for key in ("motor_config_dir", "motor_user_config_path", "motor_env_config_path"):
            assert not any(line.split("#", 1)[0].strip().startswith(key + ":") for line in text.splitlines()), path


def test_good_config_paths_with_warnings_and_overrides():
    folder = FIXTURES / "vllm_models_qwen_3_30b"
    rc, output = run_validate({
        "motor_user_config_path": str(folder / "user_config.json"),
        "motor_env_config_path": str(folder / "env.json"),
        "motor_user_config_overrides": [{"motor_deploy_config": {"image_name": "site:1"}}],
    })
    assert rc == 0, output
    assert "kv_cache_pool_config.eviction_ratio" in output
    assert "mode: pd_separation" in output


def test_broken_config_fails_with_json_path(tmp_path):
    user = json.loads((FIXTURES / "seed_pd_hybrid" / "user_config.json").read_text(encoding="utf-8"))
    user["motor_coordinator_config"]["scheduler_config"]["deploy_mode"] = "pd_separate"
    folder = _write_pair(tmp_path / "broken", user, (FIXTURES / "seed_pd_hybrid" / "env.json").read_text(encoding="utf-8"))
    rc, output = run_validate({"motor_config_dir": str(folder)})
    assert rc != 0
    assert "motor_coordinator_config.scheduler_config.deploy_mode" in output


def test_override_problem_fails():
    rc, output = run_validate({"motor_config_dir": str(FIXTURES / "vllm")},
                              {"motor_user_config_overrides": [{"motor_deploy_config": {"d_instances_num": 0}}]})
    assert rc != 0
    assert "motor_deploy_config.d_instances_num" in output and "set by override 0" in output


def test_malformed_json_reports_line_and_column(tmp_path):
    env_text = (FIXTURES / "vllm" / "env.json").read_text(encoding="utf-8")
    folder = _write_pair(tmp_path / "malformed", '{\n  "version": "v2.0",\n  "motor_deploy_config": {,}\n}\n', env_text)
    rc, output = run_validate({"motor_config_dir": str(folder)})
    assert rc != 0
    assert "user_config.json: invalid JSON at line 3 column 27" in output


def test_no_source_given():
    rc, output = run_validate()
    assert rc != 0
    assert "motor_config_dir" in output and "motor_user_config_path" in output


def test_playbook_level_variables_are_checked_against_their_argument_spec():
    """motor_config_dir and the other variables every playbook reads have an argument spec (the motor_plan role's
    entry point validate), checked before the configuration is read."""
    rc, output = run_validate({"motor_config_dir": str(FIXTURES / "seed_pd_separation"), "motor_plan_discover": "maybe",
                               "motor_user_config_overrides": "not a list"})
    assert rc != 0, output
    assert "Validating arguments against arg spec 'validate'" in output
    assert "argument 'motor_plan_discover' is of type str and we were unable to convert to bool" in output
    assert "motor_user_config_overrides" in output
    assert "Normalize and validate the configuration" not in output
    spec = (REPO / "roles" / "motor_plan" / "meta" / "argument_specs.yml").read_text(encoding="utf-8")
    for name in ("motor_config_dir", "motor_user_config_path", "motor_env_config_path", "motor_user_config_overrides",
                 "motor_show_normalized", "motor_plan_output", "motor_plan_discover", "motor_image"):
        assert f"      {name}:\n" in spec.split("\n  main:\n")[0], name


def test_a_day2_verb_validates_the_configuration_without_judging_the_inventory(tmp_path):
    """validate.yml with an inventory judges its hosts by the plan's rules (a host name as ansible_host and no
    motor_host_ip: only a plan with discovery can place it); status, stop, destroy and collect_logs plan nothing and
    import it with motor_validate_inventory false, so the same inventory does not stop them."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    motor_engine_hosts:\n      hosts:\n        eng-1: {ansible_host: eng-1.example}\n"
                         "    motor_control_hosts:\n      hosts:\n        ctl-1: {ansible_host: ctl-1.example}\n",
                         encoding="utf-8")
    config = {"motor_config_dir": str(FIXTURES / "seed_pd_separation")}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_collections_path(), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)

    def run(*extra):
        command = [_ansible_playbook(), "-i", str(inventory), str(PLAYBOOK), "-e", json.dumps(config), *extra]
        return subprocess.run(command, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=120, check=False)

    judged = run()
    assert judged.returncode != 0 and "hosts.eng-1.motor_host_ip: missing" in judged.stdout, judged.stdout
    day2 = run("-e", "motor_validate_inventory=false")
    assert day2.returncode == 0, day2.stdout + day2.stderr
    assert "motor_validate_inventory: false" in (REPO / "playbooks" / "day2_job.yml").read_text(encoding="utf-8")
