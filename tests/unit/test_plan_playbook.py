# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""playbooks/plan.yml on the example inventory: prints the table, writes the JSON plan, touches no host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SEED = REPO / "examples" / "seed_pd_separation"  # the shipped inventory names no configuration: each run passes it


def run_plan(tmp_path, *extra):
    output = tmp_path / "out" / "plan.json"
    env = ansible_env(tmp_path)
    cmd = [str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "example" / "hosts.yml"),
           str(REPO / "playbooks" / "plan.yml"), "-e", f"motor_plan_output={output}", "-e", f"motor_config_dir={SEED}",
           *extra]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc, output


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    if not (REPO / "playbooks" / "validate.yml").is_file():
        pytest.skip("playbooks/validate.yml is not there yet")
    return run_plan(tmp_path_factory.mktemp("plan"))


def test_plan_playbook_prints_table_and_writes_json(example_run):
    proc, output = example_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "HOST" in out and "CONTAINER" in out and "PORTS" in out
    for line in ("npu-a2-01     192.0.2.11  mindie-motor-d0-0",
                 "npu-a2-01     192.0.2.11  mindie-motor-p0-0",
                 "motor-ctl-01  192.0.2.10  mindie-motor-coordinator   coordinator   1     -     1025-1027,12000-12003",
                 "motor-ctl-01  192.0.2.10  mindie-motor-kv-pool       kv_pool       0     -     9003,50088"):
        assert line in out, out
    assert "unreachable=0" in out and "failed=0" in out
    # plain lines, each whole on its own line: no YAML list quoting or wrapping (motor_show), and the example
    # configuration warns about nothing
    lines = out.splitlines()
    table = lines.index(next(line for line in lines if line.startswith("HOST ")))
    assert lines[table + 9] == ("job mindie-motor (pd_separation, 800I_A2): 7 containers on 2 hosts; OpenAI API at "
                                "http://192.0.2.10:1025"), lines[table:table + 10]
    assert "mode: pd_separation" in lines and "affinity: True" in lines
    assert "WARNING" not in out and "- '" not in out and "msg:" not in out, out
    # only localhost ran tasks: the example hosts do not exist, and the discover play (motor_plan_discover is
    # false here) skipped them without connecting
    recap = out[out.index("PLAY RECAP"):]
    for host in ("npu-a2-01", "motor-ctl-01"):
        line = next(row for row in recap.splitlines() if row.startswith(host))
        assert "ok=0 " in line and "changed=0 " in line and "unreachable=0 " in line, line
    plan = json.loads(output.read_text(encoding="utf-8"))
    assert oct(output.stat().st_mode & 0o777) == "0o600"
    names = [c["name"] for c in plan["containers"]]
    assert names == ["mindie-motor-kv-pool", "mindie-motor-controller", "mindie-motor-coordinator",
                     "mindie-motor-kv-conductor", "mindie-motor-kv-watcher", "mindie-motor-d0-0",
                     "mindie-motor-p0-0"]
    assert plan["hosts"]["npu-a2-01"]["ip"] == "192.0.2.11"
    assert plan["hosts"]["npu-a2-01"]["nic"] == "enp189s0f0"
    assert plan["hosts"]["npu-a2-02"]["reserved_ports"] == [[9100, 9100], [20000, 20010]]
    assert plan["coordinator"]["url"] == "http://192.0.2.10:1025"
    p0 = next(c for c in plan["containers"] if c["name"] == "mindie-motor-p0-0")
    assert p0["env"]["HCCL_SOCKET_IFNAME"] == "enp189s0f0" and p0["env"]["COORDINATOR_SERVICE"] == "192.0.2.10"


def test_plan_playbook_reports_planning_errors(tmp_path):
    if not (REPO / "playbooks" / "validate.yml").is_file():
        pytest.skip("playbooks/validate.yml is not there yet")
    overrides = json.dumps({"motor_user_config_overrides": [{"motor_deploy_config": {"p_instances_num": 4}}]})
    proc, output = run_plan(tmp_path, "-e", overrides)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "motor_deploy_config" in text and "need 20 NPUs" in text and "available 16 NPUs on 2 hosts" in text, text
    assert not output.exists()


def test_plan_playbook_without_discovery_names_the_hosts_that_need_motor_host_ip(tmp_path):
    """ansible_host a DNS name, no motor_host_ip: without discovery nothing tells the address; one problem per host
    (not 'is not an IP address'), and a host with motor_host_ip set plans."""
    if not (REPO / "playbooks" / "validate.yml").is_file():
        pytest.skip("playbooks/validate.yml is not there yet")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n"
        "    motor_engine_hosts:\n      hosts:\n"
        "        npu-a2-01: {ansible_host: npu-a2-01.dc1.example.com}\n"
        "        npu-a2-02: {ansible_host: npu-a2-02.dc1.example.com, motor_host_ip: 192.0.2.12}\n"
        "    motor_control_hosts:\n      hosts:\n"
        "        motor-ctl-01: {ansible_host: motor-ctl-01.dc1.example.com}\n", encoding="utf-8")
    output = tmp_path / "out" / "plan.json"
    cmd = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "plan.yml"),
           "-e", f"motor_plan_output={output}", "-e", f"motor_config_dir={REPO / 'examples' / 'seed_pd_separation'}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode != 0
    text = " ".join((proc.stdout + proc.stderr).split())
    for host in ("npu-a2-01", "motor-ctl-01"):
        assert text.count(f"hosts.{host}.motor_host_ip:") == 1, text[-3000:]  # listed once, above the failure
        assert (f"hosts.{host}.motor_host_ip: missing, and ansible_host '{host}.dc1.example.com' is a host name, not "
                "an IP address (set motor_host_ip to the address other hosts reach this one on, or plan with "
                "discovery") in text, text[-3000:]
    assert "npu-a2-02.motor_host_ip" not in text and "is not an IP address (" not in text
    assert not output.exists()
