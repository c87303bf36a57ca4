"""Integration tests run real containers. Tests marked ``docker`` are skipped when no Docker
engine answers ``docker info``; with ``MOTOR_REQUIRE_DOCKER=1`` (CI, where Docker is always
there) a missing engine fails them instead, so a broken CI machine cannot pass silently."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The tests import the simulation tooling and their shared helpers as plain modules.
REPO_ROOT = Path(__file__).resolve().parents[2]
for _sub in ("tests/integration", "tests/sim", "tests/sim/motor_image", "tests/fixtures/mooncake"):
    if str(REPO_ROOT / _sub) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / _sub))


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs a running Docker engine (real containers)")


@functools.cache
def _docker_problem() -> str | None:
    """Why no Docker engine is usable, or None when ``docker info`` answers."""
    try:
        result = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if result.returncode != 0:
        return f"docker info failed: {result.stderr.strip()[-300:]}"
    return None


def pytest_runtest_setup(item):
    if item.get_closest_marker("docker") is None:
        return
    problem = _docker_problem()
    if problem is None:
        return
    if os.environ.get("MOTOR_REQUIRE_DOCKER") == "1":
        pytest.fail(f"MOTOR_REQUIRE_DOCKER=1 but {problem}", pytrace=False)
    pytest.skip(problem)
