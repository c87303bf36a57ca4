# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Write a file on the Ansible controller, in the worker process (no module run): the plan file of plan.yml."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.plugins.action import ActionBase

from ansible_collections.pymotor.ascend.plugins.plugin_utils.controller_file import write_file


class ActionModule(ActionBase):
    """pymotor.ascend.motor_controller_file (documentation in plugins/modules/motor_controller_file.py)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dest", "content", "mode", "directory_mode"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        dest = self._task.args.get("dest")
        content = self._task.args.get("content")
        if not dest or content is None:
            raise AnsibleActionFail("motor_controller_file: dest and content are required")
        try:
            mode = int(str(self._task.args.get("mode", "0600")), 8)
            directory_mode = self._task.args.get("directory_mode")
            directory_mode = None if directory_mode is None else int(str(directory_mode), 8)
        except ValueError:
            raise AnsibleActionFail("motor_controller_file: mode and directory_mode must be octal, like 0600")
        try:
            result.update(write_file(to_native(dest), to_text(content, errors="surrogate_or_strict"), mode,
                                     self._play_context.check_mode, bool(self._task.diff), directory_mode))
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("motor_controller_file: cannot write %s: %s" % (dest, to_native(exc)))
        return result
