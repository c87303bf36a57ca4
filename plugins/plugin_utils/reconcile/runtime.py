# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Runtime settings of the containers that upstream's templates and docker-only guide set (docs/design.md, "Container
settings: upstream vs us"), each from a role variable (``settings`` by short name, see precheck.OPTIONAL_SETTINGS):

- ``npu_log_dir``: the host's device log directory, read-write at ``/usr/slog`` in engines (the docker-only guide's
  ``-v /var/log/npu/:/usr/slog``), so slog survives a recreated container;
- ``coredump_dir``: the host directory at ``/var/coredump`` in every container (every upstream template's hostPath
  ``/var/coredump``; ``SAVE_CORE_DUMP_FILE_ENABLE=1`` makes ``common.sh`` write core files there);
- ``engine_cap_add``: capabilities engines get on top of Docker's default set; ``SYS_NICE`` lets NUMA memory binding
  (``mbind``/``set_mempolicy``) through Docker's default seccomp profile, which allows those calls only to a
  container with CAP_SYS_NICE; upstream runs everything seccomp-unconfined instead;
- ``seccomp_profile``: ``""`` (Docker's default profile), ``unconfined`` (upstream) or a profile file on the host;
- ``engine_memory``: the engines' memory limit (upstream: limit 256Gi, request 64Gi); none when empty;
- ``cpusets``: container name -> its cpuset (``cpu_affinity.py``, motor_service_engine_cpu_affinity=npu).
"""

from __future__ import annotations

SLOG_PATH = "/usr/slog"
COREDUMP_PATH = "/var/coredump"


def runtime_volumes(container: dict, settings: dict) -> list:
    out = []
    if settings.get("npu_log_dir") and container.get("mounts_profile") == "engine":
        out.append("%s:%s:rw" % (str(settings["npu_log_dir"]).rstrip("/") or "/", SLOG_PATH))
    if settings.get("coredump_dir"):
        out.append("%s:%s:rw" % (str(settings["coredump_dir"]).rstrip("/") or "/", COREDUMP_PATH))
    return out


def runtime_options(container: dict, settings: dict) -> dict:
    """cap_add, security_opt, memory and cpuset_cpus of a motor_containers spec (only those set)."""
    engine = container.get("mounts_profile") == "engine"
    out = {}
    if engine and settings.get("engine_cap_add"):
        out["cap_add"] = [str(c) for c in settings["engine_cap_add"]]
    if settings.get("seccomp_profile"):
        out["security_opt"] = ["seccomp=%s" % settings["seccomp_profile"]]
    if engine and settings.get("engine_memory"):
        out["memory"] = str(settings["engine_memory"])
    if engine and (settings.get("cpusets") or {}).get(container.get("name")):
        out["cpuset_cpus"] = settings["cpusets"][container["name"]]
    return out
