# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What a PyMotor service answer means (pure, no I/O): used by the motor_wait module on the controller and by the
motor_ops filters (verify), so both judge an answer the same way."""

from __future__ import annotations

CONDITIONS = ("answers", "ready", "status_ok", "endpoints")


def status_ok(body):
    """A node manager / engine status answer that means healthy (``{"status": true}`` or ``"normal"``...)."""
    if isinstance(body, dict):
        value = body.get("status")
        return value is True or str(value).lower() in ("normal", "ok", "healthy", "true", "running")
    return False


def missing_endpoints(body, expected):
    """The expected KV-event endpoints the conductor's ``GET /services`` answer does not list."""
    services = body.get("services") if isinstance(body, dict) else None
    listed = set(s.get("Endpoint") for s in services or [] if isinstance(s, dict))
    return [e for e in expected or [] if e not in listed]


def condition_met(until, status, body, expected=None):
    """Whether one HTTP answer (status -1: no answer; body: parsed JSON or None) meets a readiness condition.

    answers: the port answers HTTP at all; ready: ``{"ready": true}`` (controller/coordinator /readiness);
    status_ok: HTTP 200 with a healthy status (node manager); endpoints: the conductor lists every expected one.
    """
    if until == "answers":
        return status != -1
    if until == "ready":
        return isinstance(body, dict) and body.get("ready") is True
    if until == "status_ok":
        return status == 200 and status_ok(body)
    if until == "endpoints":
        return status == 200 and not missing_endpoints(body, expected)
    raise ValueError("unknown condition %r (one of %s)" % (until, ", ".join(CONDITIONS)))
