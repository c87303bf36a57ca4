# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wait for PyMotor's readiness conditions on the controller, in the worker process (no module run)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_wait import ARGUMENT_SPEC, read_all, run_checks


display = Display()


class ActionModule(ActionBase):
    """pymotor.ascend.motor_wait (documentation in plugins/modules/motor_wait.py)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        validated = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("motor_wait: %s" % "; ".join(validated.error_messages))
        params = validated.validated_parameters
        if params["reads"]:
            try:
                result["answers"] = read_all(params["reads"], params["request_timeout"], params["concurrency"])
            except ValueError as exc:
                raise AnsibleActionFail("motor_wait: %s" % exc) from exc
        # progress lines reach the console while the wait goes on (a module's output would come only at its end)
        result.update(run_checks(params, progress=lambda line: display.display("%s: %s" % (self._task.get_name(), line))))
        return result
