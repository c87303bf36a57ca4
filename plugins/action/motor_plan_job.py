# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The plan phase's entry point, on the controller: read the inventory (groups, host variables, the discovery's
results) and plan every container of the job."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONFIG_ROOT
from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import (
    host_view,
    no_hosts_problem,
    pymotor_hosts,
    unread_hosts,
    unread_message,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import previous_placement


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_plan_job (documentation in plugins/modules/motor_plan_job.py)."""

    ARGUMENT_SPEC = {"config": {"type": "raw", "required": True}, "discovery": {"type": "str"},
                     "previous": {"type": "dict"}, "config_root": {"type": "path", "default": CONFIG_ROOT}}
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        hosts = pymotor_hosts(task_vars.get("groups"))
        if not hosts:
            return self.failed([no_hosts_problem()])
        previous = None
        probes = {}
        if args["discovery"]:  # the name the discovery registered its motor_host_probe result under
            probes = {h: self.host_vars(task_vars, h).get(args["discovery"]) or {} for h in hosts}
            unread = unread_hosts(hosts, probes)
            if unread:
                return {"failed": True, "msg": unread_message(unread, probes)}
            previous = previous_placement({h: probes[h].get("containers") or [] for h in hosts})
        if args["previous"]:  # a placement given explicitly wins over the one the containers' labels tell
            previous = args["previous"]
        # the probed interfaces give motor_nic and motor_host_ip where the inventory does not set them
        views = {h: host_view(self.host_vars(task_vars, h), probes.get(h)) for h in hosts}
        try:
            plan = build_plan(args["config"], views, previous, args["config_root"])
        except MotorPlanError as err:
            return self.failed(err.problems, err.warnings)
        return self.facts(motor_plan_result=plan)
