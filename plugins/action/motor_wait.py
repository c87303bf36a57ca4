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
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import api_key_header
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import (
    controller_targets, controller_tls_variables)


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
        # the targets name the files of tls_config (paths in the containers): this runs on the controller, which
        # reads its own copies when the motor_tls_* variables name them
        tls_vars = controller_tls_variables(task_vars, self._templar.template)
        for key in ("checks", "stalls", "reads"):
            params[key] = controller_targets(params[key], tls_vars)
        if params["reads"]:
            # a POST target with api_key settings (targets.api_key_settings) gets motor_api_key in their header,
            # taken from the variables here: never an argument, so never in -vvv nor in the result
            api_key = self._templar.template((task_vars or {}).get("motor_api_key") or "")
            for targets in params["reads"].values():
                for tgt in (targets.values() if isinstance(targets, dict) else []):
                    if isinstance(tgt, dict) and tgt.get("body") is not None and tgt.get("api_key"):
                        tgt["headers"] = api_key_header(tgt["api_key"], api_key)
            try:
                result["answers"] = read_all(params["reads"], params["request_timeout"], params["concurrency"])
            except ValueError as exc:
                raise AnsibleActionFail("motor_wait: %s" % exc) from exc
        # progress lines reach the console while the wait goes on (a module's output would come only at its end)
        result.update(run_checks(params, progress=lambda line: display.display("%s: %s" % (self._task.get_name(), line))))
        return result
