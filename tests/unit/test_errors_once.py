# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Errors an operator reads once (issue 36, step 5): a bad job_id and a bad inventory through validate.yml and
plan.yml give one list of every problem, config and inventory together, each on its own numbered line, printed once;
the task's own failure message is one short line. The same with our ansible.cfg and with an empty one (an installed
collection, run by its FQCN playbook name: default callback, JSON results)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import BIN, REPO, ansible_env

SEED = REPO / "examples" / "seed_pd_separation"
INVENTORY = """\
all:
  children:
    motor_engine_hosts:
      hosts:
        npu-a2-01: {ansible_host: npu-a2-01.dc1.example.com, motor_npu_ids: "0-3,9", motor_nicc: eth1}
        npu-a2-02: {ansible_host: 192.0.2.12, motor_hardware_type: 800I_B9}
    motor_control_hosts:
      hosts:
        motor-ctl-01: {ansible_host: 192.0.2.12, motor_nic: "bad nic!"}
"""
# every independent problem of that inventory: (path, a piece of its message)
INVENTORY_PROBLEMS = [
    ("hosts.npu-a2-01.motor_host_ip", "is a host name, not an IP address"),
    ("hosts.npu-a2-01.motor_npu_ids[0]", "'9' is outside 0..7"),
    ("hosts.npu-a2-01.motor_nicc", "did you mean motor_nic?"),
    ("hosts.npu-a2-02.motor_hardware_type", "'800I_B9' is not supported"),
    ("hosts.motor-ctl-01.motor_host_ip", "192.0.2.12 is also the address of host npu-a2-02"),
    ("hosts.motor-ctl-01.motor_nic", "'bad nic!' is not a network interface name"),
]
# a valid inventory of one 800I_A3 engine host
INVENTORY_A3 = """\
all:
  children:
    motor_engine_hosts:
      hosts:
        npu-a3-01: {ansible_host: 192.0.2.21, motor_hardware_type: 800I_A3}
    motor_control_hosts:
      hosts:
        motor-ctl-01: {ansible_host: 192.0.2.20}
"""
JOB_ID_PROBLEM = ("motor_deploy_config.job_id", '"Bad_Job" cannot prefix container names')
HEADER = re.compile(r"^PyMotor: (\d+) problem\(s\) to fix, one a line as 'path: what \(fix\)':$", re.M)


def write_case(tmp_path: Path, job_id: str) -> tuple[Path, Path]:
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(SEED / "env.json", config / "env.json")
    user = json.loads((SEED / "user_config.json").read_text(encoding="utf-8"))
    user["motor_deploy_config"]["job_id"] = job_id
    (config / "user_config.json").write_text(json.dumps(user, indent=2), encoding="utf-8")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY, encoding="utf-8")
    return config, inventory


def run(tmp_path: Path, playbook: str, job_id: str, installed: bool) -> tuple[int, str]:
    config, inventory = write_case(tmp_path, job_id)
    return run_written(tmp_path, playbook, config, inventory, installed)


def run_written(tmp_path: Path, playbook: str, config: Path, inventory: Path, installed: bool = False) -> tuple[int, str]:
    env = ansible_env(tmp_path)
    if installed:  # as an installed collection: no ansible.cfg of ours, the playbook by its FQCN name
        empty = tmp_path / "empty.cfg"
        empty.write_text("", encoding="utf-8")
        env["ANSIBLE_CONFIG"] = str(empty)
        target = f"pymotor.ascend.{playbook}"
    else:
        target = str(REPO / "playbooks" / f"{playbook}.yml")
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inventory), target, "-e", f"motor_config_dir={config}",
           "-e", f"motor_plan_output={tmp_path / 'plan.json'}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert not (tmp_path / "plan.json").exists()
    return proc.returncode, proc.stdout + proc.stderr


def assert_listed_once(output: str, expected: list) -> None:
    headers = HEADER.findall(output)
    assert headers == [str(len(expected))], output[-4000:]
    for path, piece in expected:
        assert output.count(f"{path}:") == 1, (path, output[-4000:])
        line = next(line for line in output.splitlines() if f" {path}:" in line)
        assert re.match(r"^\d+\. " + re.escape(path) + r": .+ \(.+\)$", line) and piece in line, line
    # the task's result: one short message (JSON on the fatal line, or YAML on the lines below it), no list in it
    assert output.count("fatal: [localhost]: FAILED!") == 1, output[-4000:]
    result = output.split("fatal: [localhost]: FAILED!", 1)[1].split("\n\n", 1)[0]
    assert f"{len(expected)} problem(s), listed above: fix them all, then re-run" in result, result
    assert "\\n" not in result and len(result) < 200, result
    assert "Traceback" not in output


@pytest.mark.parametrize("installed", [False, True], ids=["our_ansible_cfg", "installed_empty_cfg"])
@pytest.mark.parametrize("playbook", ["validate", "plan"])
def test_bad_job_id_and_bad_inventory_in_one_list(tmp_path, playbook, installed):
    rc, output = run(tmp_path, playbook, "Bad_Job", installed)
    assert rc != 0, output[-3000:]
    assert_listed_once(output, [JOB_ID_PROBLEM] + INVENTORY_PROBLEMS)


@pytest.mark.parametrize("installed", [False, True], ids=["our_ansible_cfg", "installed_empty_cfg"])
def test_good_config_bad_inventory_listed_once_by_the_validation(tmp_path, installed):
    # validate.yml -i <inventory> judges the hosts by the plan's own rules: plan.yml fails at its validation, which
    # lists what the plan would (and validate.yml alone refuses the same inventory)
    rc, output = run(tmp_path, "plan", "mindie-motor", installed)
    assert rc != 0, output[-3000:]
    assert "Build the deployment plan" not in output
    assert_listed_once(output, INVENTORY_PROBLEMS)


def test_validate_with_an_inventory_checks_host_types(tmp_path):
    config, inventory = write_case(tmp_path, "mindie-motor")  # the seed config: an 800I_A2 job
    inventory.write_text(INVENTORY_A3, encoding="utf-8")
    rc, output = run_written(tmp_path, "validate", config, inventory)
    assert rc != 0, output[-3000:]
    assert_listed_once(output, [("hosts.npu-a3-01.motor_hardware_type",
                                 "800I_A3 host in motor_engine_hosts, but the job's hardware_type is 800I_A2")])


def test_wrong_hardware_type_is_one_error_not_a_second_about_the_hosts(tmp_path):
    config, inventory = write_case(tmp_path, "mindie-motor")
    user = json.loads((config / "user_config.json").read_text(encoding="utf-8"))
    user["motor_deploy_config"]["hardware_type"] = "800I_A9"
    (config / "user_config.json").write_text(json.dumps(user), encoding="utf-8")
    inventory.write_text(INVENTORY_A3, encoding="utf-8")
    rc, output = run_written(tmp_path, "validate", config, inventory)
    assert rc != 0, output[-3000:]
    assert_listed_once(output, [("motor_deploy_config.hardware_type", 'unsupported hardware_type string "800I_A9"')])
    assert "the job's hardware_type is" not in output
