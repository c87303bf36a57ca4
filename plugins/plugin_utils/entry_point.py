# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The base of the phase entry points (plugins/action/motor_*.py): the one piece of plugin_utils that knows Ansible.

An entry point runs on the controller in the worker process (no module run), validates its arguments against its
ARGUMENT_SPEC and hands them, with the inventory it reads (``groups``, ``hostvars``), to the pure logic of config/,
plan/, reconcile/ or operations/. What it returns as facts is never shown (plans and decisions carry user_config,
which holds secrets); a failure's message is: every problem once, one a line.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import failure_text, problem_lines

# The header of the printed list; tests/integration/test_bad_input_deploy.py reads the lines after it.
LIST_HEADER = "PyMotor: %d problem(s) to fix, one a line as 'path: what (fix)':"


class EntryPoint(ActionBase):
    """Validate the arguments, then ``self.phase(args, task_vars)`` returns the result to merge."""

    TRANSFERS_FILES = False
    ARGUMENT_SPEC: dict = {}

    def run(self, tmp=None, task_vars=None):
        result = super(EntryPoint, self).run(tmp, task_vars)
        validated = ArgumentSpecValidator(self.ARGUMENT_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("%s: %s" % (self._task.action, "; ".join(validated.error_messages)))
        result["changed"] = False
        result.update(self.phase(validated.validated_parameters, task_vars or {}))
        return result

    def phase(self, args, task_vars):
        """The entry point's work: a dict merged into the result."""
        raise NotImplementedError

    @staticmethod
    def host_vars(task_vars, host):
        """The variables of one inventory host (empty when unknown)."""
        hostvars = task_vars.get("hostvars") or {}
        return hostvars[host] if host in hostvars else {}

    @staticmethod
    def show_lines(lines):
        """Print ``lines`` as they are, in one block (motor_show, the problem list)."""
        if lines:
            Display().display("\n".join(list(lines) + [""]))

    @staticmethod
    def show_problems(problems, warnings=()):
        """Print the list once (header, every problem once numbered, then the warnings); return its lines."""
        lines = problem_lines(problems)
        EntryPoint.show_lines([LIST_HEADER % len(lines), failure_text(lines, warnings)])
        return lines

    @staticmethod
    def failed(problems, warnings=()):
        """A failure an operator reads once: the list (every problem once, numbered, then the warnings) printed once
        as plain lines, whatever the callback and result format; the task's message one short line pointing at it."""
        lines = EntryPoint.show_problems(problems, warnings)
        return {"failed": True, "msg": "%d problem(s), listed above: fix them all, then re-run" % len(lines)}

    @staticmethod
    def facts(**facts):
        """A result that sets facts on the controller, never shown (they carry user_config)."""
        return {"ansible_facts": facts, "_ansible_no_log": True}
