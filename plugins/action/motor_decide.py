# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The decide phase's entry point, on the controller: judge every host's prechecks from what the discovery read,
decide what happens to every container, and hand each host and the controller their work."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_wait import get_answer
from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import (
    controller_tls_problems, controller_tls_variables, service_targets)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import pymotor_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import decide
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.precheck import PrecheckError, checked_hosts


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_decide (documentation in plugins/modules/motor_decide.py)."""

    ARGUMENT_SPEC = {
        "plan": {"type": "dict", "required": True},
        "discovery": {"type": "str", "required": True},
        "reach": {"type": "str", "default": ""},
        "settings": {"type": "dict", "required": True},
        "startup_cache": {"type": "str", "required": True},
        "startup_in_image": {"type": "str", "required": True},
        "ready_timeout": {"type": "int", "required": True},
        "port_timeout": {"type": "int", "required": True},
        "watcher_script": {"type": "str", "required": True},
        "max_fail_percentage": {"type": "float", "default": 0},
        "allow_outage": {"type": "bool", "default": False},
        "drain_timeout": {"type": "int", "default": 120},
    }
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        plan = args["plan"]
        hosts = checked_hosts(plan, pymotor_hosts(task_vars.get("groups")))
        own = {h: self.host_vars(task_vars, h) for h in hosts}
        probes = {h: with_pings(own[h].get(args["discovery"]) or {}, own[h].get(args["reach"]) if args["reach"] else None)
                  for h in hosts}
        # a host's own value (inventory host or group variable) of a setting wins for that host
        overrides = {h: {name: own[h][name] for name in args["settings"] if name in own[h]} for h in hosts}
        options = dict(args, registrations=registrations(plan))
        try:
            decision = decide(plan, hosts, probes, args["settings"], overrides, options)
        except PrecheckError as err:
            raise AnsibleActionFail("motor_decide: %s" % err)
        # the TLS files the waits of this deploy will open on the controller (motor_tls_*, else tls_config's paths)
        tls_problems = controller_tls_problems(plan, controller_tls_variables(task_vars, self._templar.template))
        if tls_problems:
            decision["problems"] = list(decision["problems"]) + tls_problems
        if decision["problems"]:  # listed once here; the role's next task fails with one short line
            self.show_problems(decision["problems"])
        return self.facts(motor_decision=decision)


def with_pings(probe, reach):
    """The host's discovery with the answers of its device pings (a motor_npu_reach result) as ``npu_pings``, which
    reconcile/npu_reach.py judges; the discovery as it is when the host ran none. A run that failed as a whole (its
    script did not answer) fails each of its pings with its message: a precheck that could not run does not pass."""
    if not isinstance(reach, dict) or reach.get("skipped"):
        return probe
    answers = reach.get("results")
    if answers is None and reach.get("failed"):
        pings = ((reach.get("invocation") or {}).get("module_args") or {}).get("pings") or []
        answers = [{"item": ping, "failed": True, "rc": reach.get("rc"), "msg": reach.get("msg") or "the run failed"}
                   for ping in pings]
    return dict(probe, npu_pings=answers) if answers else probe


def registrations(plan, get=get_answer):
    """The KV conductor's ``GET /services`` answer, or None when the plan has none or it does not answer (a first
    deploy): read here, in the worker, instead of a module run of its own."""
    conductor = service_targets(plan)["conductor"]
    if not conductor:
        return None
    status, body, dummy = get(conductor["url"] + "/services", 5, conductor["tls"])
    return body if status == 200 and isinstance(body, dict) else None
