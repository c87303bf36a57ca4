# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The end of a deploy, on the controller: stop when more hosts did not finish their tier steps than allowed, else
go on without them (what to wait for), or the summary (printed with the decision's changes)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import readiness_checks
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import change_table
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.degraded import (
    exceeded,
    left_out,
    left_out_message,
    live_decision,
    live_plan,
)
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
        "down": {"type": "list", "elements": "str", "default": []},
        "max_fail_percentage": {"type": "float", "default": 0},
        "ready_timeout": {"type": "int", "default": 1800},
        "port_timeout": {"type": "int", "default": 300},
    }
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        plan, decision = args["plan"], args["decision"]
        runs = {h: self.host_vars(task_vars, h).get(args["host_run"]) for h in decision.get("work") or {}}
        gone = decision.get("left_out")
        if args["summary"]:
            states = [decision.get("states") or {}, {h: (r or {}).get("states") or {} for h, r in runs.items()},
                      args["states"]]
            if gone:
                left = {}
                for c in gone["containers"]:
                    left.setdefault(c["host"], {})[c["name"]] = "left-out"
                states.append(left)
            summary = deploy_summary(plan, states)
            # one task prints both (a task of its own per block cost every deploy a worker process each)
            self.show_lines(list(summary) + change_table(decision.get("reconcile") or {}).splitlines())
            return {"summary": summary, "incomplete": gone["message"] if gone else ""}
        down = sorted(set(unfinished_hosts(decision, runs)) | set(args["down"]))
        if not down:
            return {}
        gone = left_out(plan, down)
        if exceeded(down, decision.get("work") or {}, args["max_fail_percentage"]) or not gone["serving"]:
            return {"failed": True, "msg": unfinished_message(down) + " " + left_out_message(gone)}
        timeouts = {"ready": args["ready_timeout"], "port": args["port_timeout"]}
        readiness = readiness_checks(live_plan(plan, gone), timeouts)
        return self.facts(motor_decision=live_decision(decision, gone, readiness))
