"""Conformance suite: the collection against upstream PyMotor and Mooncake (../shared/upstream). Every test here
skips with the reason when the upstream trees are absent; Docker must be up (make images)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build_image  # noqa: E402
import conductor_image  # noqa: E402


def _docker_ok() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="session")
def conformance_image() -> str:
    reason = build_image.absent_reason()
    if reason:
        pytest.skip(reason)
    if not _docker_ok():
        if os.environ.get("MOTOR_REQUIRE_DOCKER") == "1":
            pytest.fail("Docker is not available but MOTOR_REQUIRE_DOCKER=1 (make docker images)")
        pytest.skip("Docker is not available (make docker images)")
    return build_image.ensure_conformance_image()


@pytest.fixture(scope="session")
def conformance_conductor_image(conformance_image) -> str:  # noqa: ARG001 (built first)
    reason = conductor_image.absent_reason()
    if reason:
        pytest.skip(reason)
    return conductor_image.ensure_conductor_image()


def pytest_configure(config):
    config.addinivalue_line("markers", "rolls: the rolling upgrade under load (make conformance-rolls, not in make "
                            "conformance)")
