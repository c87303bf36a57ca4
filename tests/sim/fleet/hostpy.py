# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The Python interpreter of one simulated fleet host (tests/sim/fleet/fleet.py): ``hostpy.py <host dir> [script]``
runs the script (or, as Ansible pipelines a module or host script, the program on stdin) with that host's view of
the machine: DOCKER_HOST is the host's own socket, its ``bin/`` (``ip``, ``npu-smi``) comes first in PATH, its NPU
device nodes exist (``/dev/davinciN``, the management devices), and no TCP port listens (/proc/net/tcp is empty:
port conflicts are not simulated). Each run adds its CPU seconds to ``<host dir>/cpu``. Everything else is the real
machine and the collection's unchanged code."""

import atexit
import builtins
import glob
import io
import json
import os
import resource
import runpy
import sys

ROOT = sys.argv.pop(1)
with open(os.path.join(ROOT, "host.json")) as _handle:
    HOST = json.load(_handle)

os.environ["DOCKER_HOST"] = "unix://" + HOST["socket"]
os.environ["PATH"] = os.path.join(ROOT, "bin") + os.pathsep + os.environ.get("PATH", "")
DEVICES = ["/dev/davinci%d" % i for i in range(HOST["devices"])]
NODES = set(DEVICES + (["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc", "/dev/infiniband"]
                       if DEVICES else []))
EMPTY_TCP = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

_glob, _exists, _open = glob.glob, os.path.exists, builtins.open


def _sim_glob(pattern, *args, **kwargs):
    if pattern.startswith("/dev/davinci"):
        return list(DEVICES)
    return _glob(pattern, *args, **kwargs)


def _sim_exists(path):
    if isinstance(path, str) and path.startswith("/dev/") and (path in NODES or path.startswith("/dev/davinci")):
        return path in NODES
    return _exists(path)


def _sim_open(file, *args, **kwargs):
    if file in ("/proc/net/tcp", "/proc/net/tcp6"):
        return io.StringIO(EMPTY_TCP)
    return _open(file, *args, **kwargs)


def _account():
    """Add this run's CPU seconds (the script and what it ran) to the host's ``cpu`` file: what the hosts spent,
    which bench/fleet subtracts from the controller's total (with connection local both run on this machine)."""
    used = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))
    with _open(os.path.join(ROOT, "cpu"), "a") as handle:
        handle.write("%.4f\n" % used)


atexit.register(_account)
glob.glob, os.path.exists, builtins.open = _sim_glob, _sim_exists, _sim_open

if len(sys.argv) > 1:
    sys.argv.pop(0)
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    sys.argv = [sys.argv[0]]
    code = compile(sys.stdin.read(), "<stdin>", "exec")
    exec(code, {"__name__": "__main__", "__builtins__": builtins})  # pylint: disable=exec-used
