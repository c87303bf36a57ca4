# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""``npu-smi``'s NPU health, read one way everywhere (standard library only): the host probe of the deploy's
precheck (``motor_host_probe.py``) and every engine pod's healer (``plugin_utils/heal.py``, which gets this file
next to it in its config directory and records the health of its own NPUs for its host's healer)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

# npu-smi's Health column: OK, Warning (a minor alarm; the chip works), Alarm (major), Critical
HEALTH_OK = "OK"
_FIRST = re.compile(r"^\|\s*(\d+)\s+\S[^|]*\|\s*([A-Za-z]+)\s*\|")
_SECOND = re.compile(r"^\|\s*(\d+)(?:\s+\d+)?\s*\|\s*[0-9A-Fa-f]{4}:")


def parse_npu_smi(mapping_out, info_out):
    """NPU (device) id -> health from `npu-smi info -m` (NPU/chip -> logic id) and `npu-smi info` (pure)."""
    logic = {}
    for line in mapping_out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit() and fields[2].isdigit():
            logic[(int(fields[0]), int(fields[1]))] = int(fields[2])
    health = {}
    pending = None
    for line in info_out.splitlines():
        match = _FIRST.match(line)
        if match and pending is None:
            pending = (int(match.group(1)), match.group(2))
            continue
        match = _SECOND.match(line)
        if match and pending is not None:
            npu, state = pending
            health[str(logic.get((npu, int(match.group(1))), npu))] = state
        pending = None
    return health


def find_tool():
    """The path of npu-smi (PATH, then where the driver installs it and the engines get it mounted), or None."""
    return shutil.which("npu-smi", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/local/bin")


def _run(tool, args, timeout):
    """(stdout, error) of ``npu-smi <args>``."""
    try:
        proc = subprocess.run([tool] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", "npu-smi %s: %s" % (" ".join(args), exc)
    if proc.returncode != 0:
        return "", "npu-smi %s failed: %s" % (" ".join(args), (proc.stdout + proc.stderr).strip()[:200])
    return proc.stdout, ""


class HealthReader:
    """Reads (NPU (device) id -> health, error) with ``npu-smi info`` each call, read-only. The NPU/chip -> logic id
    mapping (``npu-smi info -m``) is read once: it does not change while the devices stay. Where it runs in a
    container it lists that container's NPUs only (the driver shows the devices the container got)."""

    def __init__(self, timeout=30):
        self.timeout = timeout
        self.mapping = None

    def __call__(self):
        tool = find_tool()
        if not tool:
            return {}, "npu-smi not found"
        if self.mapping is None:
            mapping, error = _run(tool, ["info", "-m"], self.timeout)
            if error:
                return {}, error
            self.mapping = mapping
        info, error = _run(tool, ["info"], self.timeout)
        if error:
            return {}, error
        return parse_npu_smi(self.mapping, info), ""
