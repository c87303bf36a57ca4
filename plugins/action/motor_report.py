# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The end of a deploy, on the controller: stop when a host did not finish its tier steps, else the summary."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.report import (
    deploy_summary,
    unfinished_hosts,
    unfinished_message,
)

ARGUMENT_SPEC = {
    "plan": {"type": "dict", "required": True},
    "decision": {"type": "dict", "required": True},
    "host_record": {"type": "str", "required": True},
    "states": {"type": "dict", "default": {}},
    "summary": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    """pymotor.ascend.motor_report (documentation in plugins/modules/motor_report.py)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("motor_report: %s" % "; ".join(validated.error_messages))
        args = validated.validated_parameters
        hostvars = (task_vars or {}).get("hostvars") or {}
        plan, decision = args["plan"], args["decision"]
        hosts = list(dict.fromkeys(c["host"] for c in plan.get("containers") or []))
        records = {h: (hostvars[h] if h in hostvars else {}).get(args["host_record"]) or {} for h in hosts}
        missing = unfinished_hosts(plan, {h: r.get("step") for h, r in records.items()}, len(decision["steps"]) - 1)
        if missing:
            result.update(failed=True, changed=False, msg=unfinished_message(missing))
            return result
        result["changed"] = False
        if args["summary"]:
            states = [decision.get("states") or {}, {h: r.get("states") or {} for h, r in records.items()},
                      args["states"]]
            result["summary"] = deploy_summary(plan, states)
        return result
