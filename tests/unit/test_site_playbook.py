# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""playbooks/site.yml, the one entry point of a bring-up: a tag per stage (validate, plan, deploy, verify), each the
playbook of that name; one stage asked for runs that stage alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SEED = REPO / "examples" / "seed_pd_separation"
INVENTORY = REPO / "inventories" / "example" / "hosts.yml"


def site(tmp_path, *extra):
    cmd = [str(BIN / "ansible-playbook"), "-i", str(INVENTORY), str(REPO / "playbooks" / "site.yml"),
           "-e", f"motor_config_dir={SEED}", "-e", f"motor_plan_output={tmp_path / 'plan.json'}", *extra]
    return subprocess.run(cmd, cwd=tmp_path, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=300,
                          check=False)


def test_every_stage_is_a_tag_and_each_names_its_playbook(tmp_path):
    proc = site(tmp_path, "--list-tags")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tags = set(re.findall(r"TASK TAGS: \[([^\]]*)\]", proc.stdout))
    assert {t.strip() for line in tags for t in line.split(",")} == {"validate", "plan", "deploy", "verify"}
    text = (REPO / "playbooks" / "site.yml").read_text(encoding="utf-8")
    for stage in ("validate", "plan", "deploy", "verify"):
        assert f"import_playbook: {stage}.yml\n  tags: [{stage}]" in text


def test_one_stage_runs_that_stage_alone_and_touches_no_host(tmp_path):
    proc = site(tmp_path, "--tags", "plan")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    # plan.yml's own validation and plan, once each; nothing of the deploy or verify stages ran a task
    assert out.count("TASK [Normalize and validate the configuration]") == 1, out
    assert out.count("TASK [pymotor.ascend.motor_plan : Build the deployment plan]") == 1, out
    plays = out.split("PLAY RECAP")[0].split("PLAY [")[1:]
    after_plan = plays[[p.startswith("Plan hosts, NPUs and ports") for p in plays].index(True) + 1:]
    assert after_plan and not [p.splitlines()[0] for p in after_plan if "TASK [" in p], out
    assert (tmp_path / "plan.json").is_file()
    recap = out[out.index("PLAY RECAP"):]
    for host in ("npu-a2-01", "npu-a2-02", "motor-ctl-01"):
        assert re.search(rf"^{host}\s+: ok=0 +changed=0 +unreachable=0 +failed=0", recap, re.M), recap
