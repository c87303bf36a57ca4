"""Helpers shared by the integration tests (conftest.py puts this directory on sys.path)."""

from __future__ import annotations

import time


def wait_for(predicate, timeout: float = 20, what: str = "condition", interval: float = 0.2):
    """Poll ``predicate`` until it returns something truthy; return that, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
