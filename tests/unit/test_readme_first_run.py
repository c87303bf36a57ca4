# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The README's first run works as written (issue 36): in a fresh copy of the tracked files, the commands of the first
block of the quick start's "Install the collection on the controller, validate and plan" up to the commands for the
operator's own site (``make venv``, activate, validate, plan on the shipped example) run in
bash as a new shell would, with none of the variables ``make unit`` exports. The venv is this checkout's (PyPI is not
contacted): a fresh ``.venv`` directory whose parts link to it, so ``make venv`` does what it does once the pins are
installed, i.e. links the collection."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix).resolve()  # the venv running the tests


def readme_first_run() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### 2. Install the collection on the controller, validate and plan", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = []
    for line in block.splitlines():
        if line.startswith("# then the same on your site"):
            break  # the operator's own inventory and configuration: not in a fresh clone
        lines.append(line)
    return lines


def fresh_copy(dest: Path) -> None:
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = REPO / name
        if source.is_file() or source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    venv = dest / ".venv"
    venv.mkdir()
    for part in VENV.iterdir():
        if part.name != ".installed":
            (venv / part.name).symlink_to(part)
    (venv / ".installed").touch()  # newer than the copied pins: make venv only links the collection


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None, reason="needs git and make")
def test_readme_validate_and_plan_run_as_written(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    fresh_copy(clone)
    commands = readme_first_run()
    assert commands[0].startswith("make venv") and any("playbooks/plan.yml" in c for c in commands)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "PYTHONPATH", "VIRTUAL_ENV", "MAKE", "MFLAGS"))}
    venvs = {str(VENV), sys.prefix}  # a new shell has no venv on PATH until the README's activate line
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not any(v in p for v in venvs))
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = sum(c.startswith("ansible-playbook ") for c in commands)  # each prints one recap
    assert runs >= 2 and proc.stdout.count("PLAY RECAP") == runs and not re.search(r"failed=[1-9]", proc.stdout), proc.stdout[-3000:]
    plan = json.loads((clone / "plan.json").read_text(encoding="utf-8"))
    assert {c["host"] for c in plan["containers"]} >= {"npu-a2-01", "motor-ctl-01"}
