# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The plan phase's entry point, on the controller: read the inventory (groups, host variables, the discovery's
results), plan every container of the job, print the plan's table and write the plan file (secrets masked)."""

from __future__ import annotations

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.filter.core import to_nice_json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.controller_file import diff_text, write_file
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
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import mask_secrets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import plan_table
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import previous_placement


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_plan_job (documentation in plugins/modules/motor_plan_job.py)."""

    ARGUMENT_SPEC = {"config": {"type": "raw", "required": True}, "discovery": {"type": "str"},
                     "previous": {"type": "dict"}, "config_root": {"type": "path", "default": CONFIG_ROOT},
                     "output": {"type": "path"}}
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
        # here, not in tasks of their own: each cost every playbook run a worker process before the first start
        self.show_lines(plan_table(plan).splitlines())
        result = self.facts(motor_plan_result=plan)
        if args["output"]:  # no secret at rest: masked as collect_logs masks them, readable by its owner only
            try:
                result.update(write_file(args["output"], to_nice_json(mask_secrets(plan), indent=2) + "\n", 0o600,
                                         self._play_context.check_mode, bool(self._task.diff)))
            except OSError as exc:
                raise AnsibleActionFail("motor_plan_job: cannot write the plan file %s: %s" % (args["output"], exc))
            if result.get("diff"):  # the result is never shown (the facts): the diff, masked, printed here
                self.show_lines(diff_text(result.pop("diff"), C.DIFF_CONTEXT).splitlines())
        return result
