# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a host's device pings as one standard-library script on the host (no AnsiballZ, not one module run per ping)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_npu_reach
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import NPU_REACH_ARGUMENT_SPEC
from ansible_collections.pymotor.ascend.plugins.plugin_utils.host_script import HostScriptAction


class ActionModule(HostScriptAction):
    """pymotor.ascend.motor_npu_reach (documentation in plugins/modules/motor_npu_reach.py)."""

    SPEC = NPU_REACH_ARGUMENT_SPEC
    ENTRY = (motor_npu_reach, "reach")
    MODULES = (motor_npu_reach,)

    def run(self, tmp=None, task_vars=None):
        if self._task.args.get("pings") == []:  # nothing to ping (the second host of all its pairs): no round trip
            result = ActionBase.run(self, tmp, task_vars)
            result.update(changed=False, results=[])
            return result
        return super(ActionModule, self).run(tmp, task_vars)
