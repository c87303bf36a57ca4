# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Write a file on the Ansible controller, in the worker process (no module run): the plan file of plan.yml."""

from __future__ import annotations

import os
import stat
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.action import ActionBase

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import mask_document


class ActionModule(ActionBase):
    """pymotor.ascend.motor_controller_file (documentation in plugins/modules/motor_controller_file.py)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dest", "content", "mode"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        dest = self._task.args.get("dest")
        content = self._task.args.get("content")
        if not dest or content is None:
            raise AnsibleActionFail("motor_controller_file: dest and content are required")
        try:
            mode = int(str(self._task.args.get("mode", "0600")), 8)
        except ValueError:
            raise AnsibleActionFail("motor_controller_file: mode must be octal, like 0600")
        path = os.path.abspath(os.path.expanduser(to_native(dest)))
        data = to_bytes(content, errors="surrogate_or_strict")
        result.update(dest=path, changed=False)
        try:
            current = None
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    current = handle.read()
                if current == data and stat.S_IMODE(os.stat(path).st_mode) == mode:
                    return result
            result["changed"] = True
            if self._task.diff:  # secrets masked on both sides: an older file may still hold them in clear
                before, before_header = "", "%s (absent)" % path
                if current is not None:
                    before = mask_document(to_native(current, errors="surrogate_or_replace"))
                    before_header = "%s (mode %04o)" % (path, stat.S_IMODE(os.stat(path).st_mode))
                result["diff"] = {"before_header": before_header, "after_header": "%s (mode %04o)" % (path, mode),
                                  "before": before, "after": mask_document(to_native(content))}
            if self._play_context.check_mode:
                return result
            directory = os.path.dirname(path)
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o750)
            handle, tmp_path = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.chmod(tmp_path, mode)
                os.replace(tmp_path, path)
            except BaseException:
                os.unlink(tmp_path)
                raise
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("motor_controller_file: cannot write %s: %s" % (path, to_native(exc)))
        return result
