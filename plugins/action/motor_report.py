# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The end of a deploy, on the controller: stop when a host did not finish its tier steps, else the summary."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.report import (
    deploy_summary,
    unfinished_hosts,
    unfinished_message,
)


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_report (documentation in plugins/modules/motor_report.py)."""

    ARGUMENT_SPEC = {
        "plan": {"type": "dict", "required": True},
        "decision": {"type": "dict", "required": True},
        "host_run": {"type": "str", "required": True},
        "states": {"type": "dict", "default": {}},
        "summary": {"type": "bool", "default": False},
    }
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        plan, decision = args["plan"], args["decision"]
        runs = {h: self.host_vars(task_vars, h).get(args["host_run"]) for h in decision.get("work") or {}}
        missing = unfinished_hosts(decision, runs)
        if missing:
            return {"failed": True, "msg": unfinished_message(missing)}
        if not args["summary"]:
            return {}
        states = [decision.get("states") or {}, {h: (r or {}).get("states") or {} for h, r in runs.items()},
                  args["states"]]
        return {"summary": deploy_summary(plan, states)}
