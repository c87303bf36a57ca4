# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""CPU/NUMA placement of engine containers (no I/O): the cpuset of an engine is the union of the CPU Affinity of its
NPUs (``npu-smi info -t topo``, read by motor_host_probe as ``npu_topo``), with the role variable
``motor_service_engine_cpu_affinity``:

- ``none`` (default): no cpuset, Docker's default (every CPU), as upstream (its Kubernetes templates request/limit a
  number of CPUs, never a CPU set; ``examples/deployer/lib/generator`` has no cpuset or topology);
- ``npu``: ``HostConfig.CpusetCpus`` = the CPUs local to the container's NPUs (on an A2 a pair of NPUs shares one
  24-core range, e.g. NPU0/1 -> 144-167), so the engine's host threads and memory stay on its NPUs' NUMA node.

An NPU the topology does not list, or CPUs that are not online on the host, leave that engine without a cpuset (a
cpuset outside the online CPUs fails ``docker create``) and give a precheck warning.
"""

from __future__ import annotations

import re

CPU_AFFINITY_MODES = ("none", "npu")


def cpu_set(text) -> set:
    """The CPUs of a kernel CPU list (``0-23,48-71``)."""
    out = set()
    for item in str(text or "").split(","):
        match = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", item)
        if match:
            out.update(range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1))
    return out


def cpu_list(cpus) -> str:
    """The kernel CPU list of a set of CPUs (``{0, 1, 2, 5}`` -> ``0-2,5``)."""
    out, ordered = [], sorted(cpus)
    start = prev = None
    for cpu in ordered + [None]:
        if start is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            out.append(str(start) if start == prev else "%d-%d" % (start, prev))
        start = prev = cpu
    return ",".join(out)


def engine_cpusets(containers: list, probe: dict, mode) -> tuple:
    """(container name -> cpuset, findings): the cpuset of every engine container of a host when ``mode`` is
    ``npu``; each finding (check, what, fix) is a warning naming the container it leaves without a cpuset."""
    if str(mode or "none") != "npu":
        return {}, []
    topo = probe.get("npu_topo") if isinstance(probe.get("npu_topo"), dict) else {}
    affinity = topo.get("cpus") or {}
    online = cpu_set(topo.get("online")) if topo.get("online") else None
    out, findings = {}, []
    for cont in containers:
        if not cont.get("npu_ids"):
            continue
        missing = [n for n in cont["npu_ids"] if not cpu_set(affinity.get(str(n)))]
        cpus = set().union(*(cpu_set(affinity.get(str(n))) for n in cont["npu_ids"]))
        if missing:
            said = topo.get("error") or "npu-smi info -t topo lists no CPU Affinity for NPU %s" % ", ".join(
                str(n) for n in missing)
            findings.append(("CPU affinity of %s" % cont["name"], "%s; no cpuset" % said,
                             "check npu-smi info -t topo, or set motor_service_engine_cpu_affinity=none"))
        elif online is not None and not cpus <= online:
            findings.append(("CPU affinity of %s" % cont["name"], "CPUs %s of its NPUs are not online (online: %s); "
                             "no cpuset" % (cpu_list(cpus - online), topo.get("online")),
                             "bring the CPUs online, or set motor_service_engine_cpu_affinity=none"))
        else:
            out[cont["name"]] = cpu_list(cpus)
    return out, findings
