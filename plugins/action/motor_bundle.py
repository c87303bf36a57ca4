# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The collect phase's entry point, on the controller: mask and pack what every host read into one archive."""

from __future__ import annotations

import io
import os
import tarfile
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.bundle import host_files


def _add(tar, name, data, mode, mtime):
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = mode, mtime
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_bundle (documentation in plugins/modules/motor_bundle.py)."""

    ARGUMENT_SPEC = {
        "job_id": {"type": "str", "required": True},
        "dest": {"type": "path", "default": "."},
        "config_root": {"type": "path", "required": True},
        "hosts": {"type": "list", "elements": "str", "required": True},
        "read": {"type": "dict", "required": True},
    }
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        now = time.time()
        name = "pymotor-logs-%s-%s" % (args["job_id"], time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)))
        dest = os.path.realpath(os.path.expanduser(args["dest"]))
        path = os.path.join(dest, name + ".tar.gz")
        result = {"changed": True, "dest": path}
        if self._play_context.check_mode:
            return result
        try:
            os.makedirs(dest, 0o750, exist_ok=True)
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(handle, "wb") as out, tarfile.open(fileobj=out, mode="w:gz") as tar:
                _add(tar, name, None, 0o700, now)
                for host in args["hosts"]:
                    own = self.host_vars(task_vars, host)
                    read = {key: own.get(var) or {} for key, var in args["read"].items()}
                    dirs = set()
                    for item in host_files(read, args["config_root"]):
                        parts = ("%s/%s" % (host, item["path"])).split("/")
                        for depth in range(1, len(parts)):
                            folder = "/".join(parts[:depth])
                            if folder not in dirs:
                                dirs.add(folder)
                                _add(tar, "%s/%s" % (name, folder), None, 0o700, now)
                        _add(tar, "%s/%s/%s" % (name, host, item["path"]), to_bytes(item["text"]), 0o600, now)
        except (IOError, OSError, tarfile.TarError) as exc:
            raise AnsibleActionFail("motor_bundle: cannot write %s: %s" % (path, to_native(exc)))
        return result
