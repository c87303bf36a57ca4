# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""verify on SGLang jobs: KV-cache affinity is "not applicable" (the conductor decodes vLLM KV events only)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.verify import (
    engine_type,
    verify_report,
    verify_table,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan

_SPEC = importlib.util.spec_from_file_location("motor_plan_helpers", Path(__file__).with_name("test_motor_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)


def healthy_raw(plan):
    """Observations of a healthy job: every container running its image, every status normal, inference 200."""
    return {
        "image_ids": {c["host"]: "sha256:x" for c in plan["containers"]},
        "containers": {c["name"]: {"exists": True, "running": True, "image": "sha256:x", "restarts": 0,
                                   "status": "running"} for c in plan["containers"]},
        "controller": {"status": 200}, "coordinator": {"status": 200, "json": {"ready": True, "message": "ready"}},
        "node_managers": {c["name"]: {"status": 200, "json": {"status": True}}
                          for c in plan["containers"] if c["tier"] == 2},
        "engines": {f"{c['name']}/{ep['dp_rank']}": {"status": 200, "json": {"status": "normal"}}
                    for c in plan["containers"] if c["tier"] == 2 for ep in c["endpoints"]},
        "inference": {"status": 200},
    }


def test_sglang_verify_reports_affinity_not_applicable_and_passes():
    plan = build_plan(_HELPERS.load_fixture("sglang_pd_separation"), _HELPERS.inventory(engine=2, control=1))
    assert engine_type(plan) == "sglang" and plan["affinity"] is False
    report = verify_report(plan, healthy_raw(plan))
    assert report["passed"], [c for c in report["checks"] if not c["ok"]]
    affinity = report["affinity"]
    assert affinity["applicable"] is False and affinity["verdict"] == "not applicable"
    assert "decodes vLLM KV events only" in affinity["reason"] and "load_balance" in affinity["reason"]
    check = [c for c in report["checks"] if c["check"] == "affinity"]
    assert len(check) == 1 and check[0]["ok"] and check[0]["detail"].startswith("not applicable: engine_type sglang")
    table = verify_table(report)
    assert "n/a" in table and "not applicable" in table and ", 0 failed" in table


def test_sglang_verify_still_fails_on_a_dead_engine():
    plan = build_plan(_HELPERS.load_fixture("sglang_pd_separation"), _HELPERS.inventory(engine=2, control=1))
    raw = healthy_raw(plan)
    raw["inference"] = {"status": 502}
    report = verify_report(plan, raw)
    assert not report["passed"] and report["affinity"]["verdict"] == "not applicable"


def test_vllm_verify_without_affinity_has_no_affinity_entry():
    plan = build_plan(_HELPERS.load_fixture("vllm_a5_pd_heterogeneous"),
                      _HELPERS.inventory(engine=2, control=1, e1={"motor_host_labels": {"card_type": "Ascend950PR"}},
                                         e2={"motor_host_labels": {"card_type": "Ascend950DT"}}))
    assert engine_type(plan) == "vllm"
    report = verify_report(plan, healthy_raw(plan))
    assert report["passed"] and report["affinity"] is None
    assert not [c for c in report["checks"] if c["check"] == "affinity"]
