# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The plan phase's entry point, on the controller: read the inventory (groups, host variables, the discovery's
results) and plan every container of the job."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONFIG_ROOT, failure_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import (
    host_view,
    no_hosts_problem,
    pymotor_hosts,
    unread_hosts,
    unread_message,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import previous_placement


class ActionModule(ActionBase):
    """pymotor.ascend.motor_plan_job (documentation in plugins/modules/motor_plan_job.py)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("config", "discovery", "previous", "config_root"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        task_vars = task_vars or {}
        hostvars = task_vars.get("hostvars") or {}
        hosts = pymotor_hosts(task_vars.get("groups"))
        if not hosts:
            result.update(failed=True, changed=False, msg=failure_text([no_hosts_problem()]))
            return result
        previous = None
        if args.get("discovery"):  # the name the discovery registered its motor_host_probe result under
            probes = {h: (hostvars[h] if h in hostvars else {}).get(args["discovery"]) or {} for h in hosts}
            unread = unread_hosts(hosts, probes)
            if unread:
                result.update(failed=True, changed=False, msg=unread_message(unread, probes))
                return result
            previous = previous_placement({h: probes[h].get("containers") or [] for h in hosts})
        if args.get("previous"):  # a placement given explicitly wins over the one the containers' labels tell
            previous = args["previous"]
        views = {h: host_view(hostvars[h] if h in hostvars else {}) for h in hosts}
        try:
            plan = build_plan(args.get("config"), views, previous, args.get("config_root") or CONFIG_ROOT)
        except MotorPlanError as err:
            result.update(failed=True, changed=False, msg=failure_text(err.problems))
            return result
        # user_config holds API keys and TLS secrets: the result is never shown (-v neither); failures above are.
        result.update(changed=False, ansible_facts={"motor_plan_result": plan}, _ansible_no_log=True)
        return result
