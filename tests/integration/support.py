"""Helpers shared by the integration tests (conftest.py puts this directory on sys.path)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path


def wait_for(predicate, timeout: float = 20, what: str = "condition", interval: float = 0.2):
    """Poll ``predicate`` until it returns something truthy; return that, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def ansible_env() -> dict:
    return {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1", "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}


def playbook_argv(name: str, inventory: Path, config_dir: Path, *extra: str, image: str) -> list[str]:
    """ansible-playbook of playbooks/<name> with the config dir, the image and the plan file under the config dir."""
    return [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), f"playbooks/{name}",
            "-e", f"motor_config_dir={config_dir}", "-e", f"motor_image={image}",
            "-e", f"motor_plan_output={config_dir}/motor_plan.json", *extra]


def playbook(name: str, inventory: Path, config_dir: Path, *extra: str, image: str, check: bool = True,
             timeout: float = 900):
    result = subprocess.run(playbook_argv(name, inventory, config_dir, *extra, image=image), cwd=REPO,
                            env=ansible_env(), capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, f"{name} failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    return result


def recap_changed(output: str) -> int:
    """Sum of changed= over the PLAY RECAP lines."""
    total = 0
    for line in output.splitlines():
        if "changed=" in line and "ok=" in line:
            total += int(line.split("changed=")[1].split()[0])
    return total


def deployed_containers(plan: dict) -> dict[str, str]:
    """{container name: host} of what a deploy of ``plan`` runs: the plan's containers and per host one
    ``<job_id>-healer-<host>`` and its Docker socket proxy ``<job_id>-sockproxy-<host>`` (the per-host agents the
    decide step adds, plan/healer.py)."""
    out = {c["name"]: c["host"] for c in plan["containers"]}
    for host in {c["host"] for c in plan["containers"]}:
        for agent in HOST_AGENTS:
            out["%s-%s-%s" % (plan["job_id"], agent, re.sub(r"[^a-zA-Z0-9_.-]", "-", host))] = host
    return out


# the name parts of the per-host agents (plan/healer.py): <job_id>-<agent>-<host>
HOST_AGENTS = ("healer", "sockproxy")


def is_host_agent(name: str, job_id: str) -> bool:
    """The per-host healer or its Docker socket proxy (no container of the service)."""
    return any(name.startswith("%s-%s-" % (job_id, agent)) for agent in HOST_AGENTS)
