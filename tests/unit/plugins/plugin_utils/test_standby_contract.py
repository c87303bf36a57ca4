# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Issue 49: master/standby is accepted by validation; its inventory contract (two control hosts at least, motor_vip a
free IP address) is refused by name, through validate.yml too, and a valid inventory passes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.standby import standby_problems, standby_sections

REPO = Path(__file__).resolve().parents[4]
VLLM = REPO / "tests" / "unit" / "fixtures" / "configs" / "vllm"
CTRL, COORD = "motor_controller_config", "motor_coordinator_config"


def user_config(*sections):
    config = json.loads((VLLM / "user_config.json").read_text(encoding="utf-8"))
    for key in sections:
        config.setdefault(key, {}).setdefault("standby_config", {})["enable_master_standby"] = True
    return config


def paths(problems):
    return [p.path for p in problems]


def test_off_means_no_contract():
    assert standby_sections(user_config()) == []
    assert standby_problems(user_config(), ["ctl"], None) == []
    assert standby_problems(None, [], None) == []


def test_one_control_host_and_no_vip_are_refused_by_name():
    problems = standby_problems(user_config(CTRL, COORD), ["ctl"], None)
    assert paths(problems) == ["motor_control_hosts", "motor_vip"]
    assert "the inventory has 1 (ctl)" in problems[0].message
    assert CTRL + ".standby_config.enable_master_standby" in problems[0].message
    assert COORD + ".standby_config.enable_master_standby" in problems[0].message
    assert "motor_vip is not set" in problems[1].message and "motor_vip_interface" in problems[1].hint


def test_two_control_hosts_and_a_free_vip_pass_the_contract():
    assert standby_problems(user_config(COORD), ["ctl1", "ctl2"], "10.0.0.100",
                            {"ctl1": "10.0.0.1", "ctl2": "10.0.0.2"}) == []
    assert standby_problems(user_config(CTRL), ["ctl1", "ctl1", "ctl2"], "fd00::64") == []


def test_a_vip_that_is_no_ip_or_a_host_address_is_refused():
    (bad,) = standby_problems(user_config(CTRL), ["a", "b"], "vip.example.org")
    assert bad.path == "motor_vip" and "not an IP address" in bad.message
    (taken,) = standby_problems(user_config(CTRL), ["a", "b"], "10.0.0.2", {"a": "10.0.0.1", "b": "10.0.0.2"})
    assert taken.path == "motor_vip" and "is the address of b" in taken.message


def test_management_tls_is_refused_by_name_haproxy_checks_speak_plain_http():
    config = user_config(CTRL)
    config["motor_deploy_config"].setdefault("tls_config", {})["mgmt_tls_config"] = {"enable_tls": True}
    (problem,) = standby_problems(config, ["a", "b"], "10.0.0.100")
    assert problem.path == "motor_deploy_config.tls_config.mgmt_tls_config.enable_tls"
    assert "plain HTTP" in problem.message
    config["motor_deploy_config"]["tls_config"]["mgmt_tls_config"]["enable_tls"] = False
    assert standby_problems(config, ["a", "b"], "10.0.0.100") == []


def test_validation_refuses_no_etcd_client_certificate_directory_by_name():
    (problem,) = standby_problems(user_config(CTRL), ["a", "b"], "10.0.0.100", etcd_tls_dir="")
    assert problem.path == "motor_service_etcd_tls_dir" and "client.key" in problem.hint
    assert standby_problems(user_config(CTRL), ["a", "b"], "10.0.0.100", etcd_tls_dir="/etc/pki/etcd") == []


def test_the_mode_itself_is_no_longer_refused():
    config = normalize(user_config(CTRL, COORD))
    for key in (CTRL, COORD):
        assert config["user_config"][key]["standby_config"]["enable_master_standby"] is True


@pytest.mark.skipif(shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None,
                    reason="ansible-playbook not installed")
def run_validate(tmp_path, inventory_text):
    config_dir = tmp_path / "config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "user_config.json").write_text(json.dumps(user_config(CTRL)), encoding="utf-8")
    shutil.copy(VLLM / "env.json", config_dir / "env.json")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(inventory_text, encoding="utf-8")
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".build" / "collections"), "ANSIBLE_NOCOLOR": "1"}
    if REPO.parent.name == "pymotor" and REPO.parent.parent.name == "ansible_collections":
        env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO.parent.parent.parent)  # under ansible-test
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           str(REPO / "playbooks" / "validate.yml"), "-e", f"motor_config_dir={config_dir}"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_validate_playbook_refuses_the_broken_inventory_contract_by_name(tmp_path):
    rc, output = run_validate(tmp_path, "motor_control_hosts:\n  hosts:\n    ctl1: {motor_host_ip: 10.0.0.1}\n")
    assert rc != 0, output
    assert "not yet deployed" not in output
    assert "motor_control_hosts: master/standby (" + CTRL in output and "the inventory has 1 (ctl1)" in output
    assert "motor_vip: master/standby" in output
    assert "motor_service_etcd_tls_dir: master/standby" in output


@pytest.mark.skipif(shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None,
                    reason="ansible-playbook not installed")
def test_validate_playbook_accepts_master_standby_with_two_control_hosts_and_a_vip(tmp_path):
    rc, output = run_validate(tmp_path, "motor_control_hosts:\n  vars: {motor_vip: 10.0.0.100, motor_service_etcd_tls_dir: /e}\n"
                                        "  hosts:\n"
                                        "    ctl1: {motor_host_ip: 10.0.0.1}\n    ctl2: {motor_host_ip: 10.0.0.2}\n")
    assert rc == 0, output
