# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The motor_operations monitoring entry point (playbooks/monitoring.yml's and the deploy's refresh) on the example
inventory's plan: writes the four files of the job on the controller, a second run changes nothing, the refresh
writes only where the job's targets file exists. (monitoring.yml itself reads the hosts first: integration.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

PLAYBOOK = """
- name: Plan the example job
  ansible.builtin.import_playbook: {plan}

- name: Write its monitoring files
  hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Monitoring
      ansible.builtin.include_role:
        name: pymotor.ascend.motor_operations
        tasks_from: monitoring
      vars:
        motor_operations_plan: "{{{{ motor_plan_result }}}}"
"""


def run(tmp_path, directory, *extra):
    book = tmp_path / "monitoring_test.yml"
    book.write_text(PLAYBOOK.format(plan=REPO / "playbooks" / "plan.yml"), encoding="utf-8")
    cmd = [str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "example" / "hosts.yml"), str(book),
           "-e", f"motor_plan_output={tmp_path / 'plan.json'}", "-e", f"motor_monitoring_dir={directory}",
           "-e", f"motor_config_dir={REPO / 'examples' / 'seed_pd_separation'}", *extra]
    proc = subprocess.run(cmd, cwd=tmp_path, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the changes of the role's tasks (plan.yml writes its own plan.json)
    blocks = [b for b in re.split(r"\nTASK \[", proc.stdout) if b.startswith("pymotor.ascend.motor_operations :")]
    return sum(b.count("\nchanged: ") for b in blocks)


def test_monitoring_writes_the_files_idempotently_and_refreshes_only_existing(tmp_path):
    directory = tmp_path / "mon"
    assert run(tmp_path, directory, "-e", "motor_operations_monitoring_refresh=true") == 0
    assert not directory.exists()  # the deploy's refresh: nothing where monitoring.yml never wrote
    assert run(tmp_path, directory) > 0
    job = "mindie-motor"
    files = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())
    assert files == [f"dashboards/{job}.json", f"prometheus/{job}.yml", f"rules/{job}.rules.yml", f"targets/{job}.json"]
    plan = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    targets = json.loads((directory / "targets" / f"{job}.json").read_text(encoding="utf-8"))
    engines = sum(len(c["endpoints"]) for c in plan["containers"] if c["tier"] == 2)
    assert len([t for t in targets if "dp_rank" in t["labels"]]) == engines
    config = yaml.safe_load((directory / "prometheus" / f"{job}.yml").read_text(encoding="utf-8"))
    assert config["rule_files"] == [f"{directory}/rules/{job}.rules.yml"]
    assert run(tmp_path, directory) == 0  # idempotent
    assert run(tmp_path, directory, "-e", "motor_operations_monitoring_refresh=true") == 0  # same plan: unchanged
    assert run(tmp_path, "relative") > 0  # taken from the current directory, named absolute in the config
    config = yaml.safe_load((tmp_path / "relative" / "prometheus" / f"{job}.yml").read_text(encoding="utf-8"))
    assert config["rule_files"] == [f"{tmp_path}/relative/rules/{job}.rules.yml"]
