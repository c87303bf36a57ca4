# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The rolling restart stops an instance's pods, waits until upstream's controller has separated the instance, and
only then starts the new pods (roll_instance.yml, reconcile/upgrade.py SEPARATION_S). The bound is checked against
the upstream sources in ../shared/upstream (MOTOR_UPSTREAM_PYMOTOR overrides; those tests skip when absent)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile import upgrade

REPO = Path(__file__).resolve().parents[4]
ROLL = REPO / "roles" / "motor_service" / "tasks" / "roll_instance.yml"


def pymotor() -> Path:
    override = os.environ.get("MOTOR_UPSTREAM_PYMOTOR")
    bases = [Path(override)] if override else [b / "shared" / "upstream" / "pymotor" for b in REPO.parents[:2]]
    return next((b for b in bases if (b / "motor").is_dir()), bases[0])


PYMOTOR = pymotor()
needs_upstream = pytest.mark.skipif(not (PYMOTOR / "motor").is_dir(),
                                    reason="upstream PyMotor not found at %s (set MOTOR_UPSTREAM_PYMOTOR)" % PYMOTOR)


def line(path: str, number: int) -> str:
    return (PYMOTOR / path).read_text(encoding="utf-8").splitlines()[number - 1]


def default_of(path: str, name: str):
    """The default value of a module-level constant, a dataclass field or a keyword argument ``name`` in ``path``."""
    for node in ast.walk(ast.parse((PYMOTOR / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets):
            return ast.literal_eval(node.value)
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == name and node.value is not None:
            return ast.literal_eval(node.value)
        if isinstance(node, ast.arguments):
            named = node.args[len(node.args) - len(node.defaults):]
            for arg, value in zip(named, node.defaults):
                if arg.arg == name:
                    return ast.literal_eval(value)
    raise AssertionError("%s not found in %s" % (name, path))


@needs_upstream
def test_the_separation_bound_is_upstreams_heartbeat_timeout_check_interval_and_status_query():
    assert default_of("motor/common/resources/instance.py", "DEFAULT_ACTIVE_HEARTBEAT_TIMEOUT") == \
        upgrade.HEARTBEAT_TIMEOUT_S
    assert default_of("motor/config/controller.py", "instance_manager_check_interval") == upgrade.CHECK_INTERVAL_S
    assert default_of("motor/common/http/http_client.py", "timeout") == upgrade.STATUS_QUERY_S
    assert upgrade.SEPARATION_S > upgrade.HEARTBEAT_TIMEOUT_S + upgrade.CHECK_INTERVAL_S


@needs_upstream
def test_the_upstream_lines_cited_say_what_the_roll_relies_on():
    assert "DEFAULT_ACTIVE_HEARTBEAT_TIMEOUT = " in line("motor/common/resources/instance.py", 27)
    assert "already registered" in line("motor/controller/core/instance_assembler.py", 300)
    assert "has_active_instance_by_job_name" in line("motor/controller/core/instance_assembler.py", 402)
    assert "InsStatus.ACTIVE" in line("motor/controller/core/instance_manager.py", 541)
    assert "is_all_endpoints_alive()" in line("motor/controller/core/instance_manager.py", 593)


def test_the_decision_hands_the_roll_the_separation_bound():
    assert upgrade.upgrade_work({}, {}, "", [])["separation_s"] == upgrade.SEPARATION_S


def test_each_instance_stops_all_its_pods_and_waits_the_bound_before_any_new_pod_starts():
    tasks = yaml.safe_load(ROLL.read_text(encoding="utf-8"))
    kinds = []
    for task in tasks:
        run = task.get("pymotor.ascend.motor_containers")
        if run is not None:
            kinds.append("stop" if run.get("stop") and run.get("containers") == [] else "start")
        elif "ansible.builtin.pause" in task:
            assert "motor_decision.upgrade.separation_s" in str(task["ansible.builtin.pause"]["seconds"])
            kinds.append("wait")
    assert kinds == ["stop", "wait", "start"]
    stop, start = (t for t in tasks if "pymotor.ascend.motor_containers" in t)
    assert stop["loop"] == start["loop"] == "{{ motor_service_instance.runs }}"  # every host of the instance
