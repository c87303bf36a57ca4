# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What pymotor.ascend.motor_npu_reach runs on a host, with the Python standard library only: every device ping of
the reach precheck (``hccn_tool -i N -ping -g address X``, read-only) in one run, one after the other as the tool
was run before, each answered in the shape of a looped ``ansible.builtin.command`` result (item, rc, stdout,
stderr), which plugin_utils/reconcile/npu_reach.py judges on the controller. Its action plugin runs it as a plain
script (plugin_utils/host_script.py): one host script per host instead of one module run per ping."""

from __future__ import annotations

import subprocess


def ping_once(hccn_tool, ping):
    """The answer of one ping: ``{item, cmd, rc, stdout, stderr}`` (``msg`` too when the tool could not start)."""
    argv = [hccn_tool, "-i", str(ping["npu"]), "-ping", "-g", "address", ping["address"]]
    answer = {"item": ping, "cmd": argv}
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              check=False)
    except OSError as exc:  # as ansible.builtin.command reports an executable it cannot run
        answer.update(rc=2, stdout="", stderr="", failed=True, msg=str(exc))
        return answer
    # ansible.builtin.command strips the trailing newline of both streams
    answer.update(rc=proc.returncode, stdout=proc.stdout.rstrip("\r\n"), stderr=proc.stderr.rstrip("\r\n"))
    return answer


def reach(params, check_mode=False, diff=False):
    """The module's result for validated params (NPU_REACH_ARGUMENT_SPEC in motor_arguments): read-only, so the same
    in check mode, and nothing to diff."""
    return {"changed": False, "results": [ping_once(params["hccn_tool"], ping) for ping in params["pings"]]}
