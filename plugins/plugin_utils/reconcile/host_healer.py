# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The files and Docker options of the per-host healer containers and of their Docker socket proxies
(``plan/healer.py``, ``module_utils/motor_host_healer.py``, ``module_utils/motor_docker_proxy.py``).

The healer's config directory gets the healer (``motor_host_healer.py``), the collection's Docker API client it uses
(``motor_docker.py``, standard library), the table of healing rules (``motor_heal_rules.py``) and its config (the
job id, its own name, the state file, the proxy's socket); the proxy's gets the proxy and its config (the job id,
the host's Docker socket, the socket it serves); all count in their config hashes. Only the proxy gets the host's
Docker unix socket; it serves the healer's calls (and nothing else) on a unix socket in a host directory that only
the two mount (``<log_root>/<job_id>/<proxy>-socket``: the proxy read-write, the healer read-only, so the healer can
connect but not replace the socket). The healer also gets the host's ``/dev`` read-only at ``/host/dev`` (it only
checks that the NPU devices exist; without them in its device list the cgroup lets it open none) and the job's log
directory read-only at ``/host/job-logs`` (where every engine pod's healer writes the npu-smi health of its NPUs:
the healer reports, rule ``npu_unhealthy``, it never reads npu-smi itself). Both: no
capability, no new privileges, a read-only root filesystem, no port. The healer's state file is in its log
directory on the host (``<log_root>/<job_id>/<container>/``)."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.module_utils import (
    motor_docker,
    motor_docker_proxy,
    motor_heal_rules,
    motor_host_healer,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTAINER_LOG_PATH
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import (
    HOST_HEALER_CONFIG,
    HOST_HEALER_ROLE,
    HOST_HEALER_SCRIPT,
    SOCKPROXY_CONFIG,
    SOCKPROXY_ROLE,
    SOCKPROXY_SCRIPT,
    sockproxy_name,
)

DOCKER_SOCKET = "/var/run/docker.sock"
# the directory the proxy serves the healer's socket in (both containers; on the host: socket_dir)
PROXY_DIR = "/run/motor-docker"
PROXY_SOCKET = PROXY_DIR + "/docker.sock"
HOST_DEV = "/host/dev"
# the job's log directory on the host, read-only: each engine pod's NPU health reading (rule npu_unhealthy)
JOB_LOGS = "/host/job-logs"
STATE_FILE = "host_healer_state.json"
METRICS_FILE = "motor_host_healer.prom"  # motor_npu_unhealthy (node_exporter's textfile format)


def _read(module) -> str:
    with open(module.__file__.replace(".pyc", ".py"), encoding="utf-8") as handle:
        return handle.read()


def socket_dir(container: dict, log_root: str, job_id: str) -> str:
    """The host directory of the proxy's socket for the healer or the proxy ``container`` (one per host)."""
    return "%s/%s/%s-socket" % (str(log_root).rstrip("/"), job_id, sockproxy_name(job_id, container["host"]))


def host_healer_files(plan: dict) -> dict:
    """``{healer or proxy container: {file: text}}``."""
    out = {}
    for c in (plan or {}).get("containers") or []:
        if c.get("role") == SOCKPROXY_ROLE:
            config = {"job_id": plan["job_id"], "upstream": DOCKER_SOCKET, "listen": PROXY_SOCKET}
            out[c["name"]] = {SOCKPROXY_SCRIPT: _read(motor_docker_proxy),
                              SOCKPROXY_CONFIG: json.dumps(config, indent=2, sort_keys=True) + "\n"}
        if c.get("role") != HOST_HEALER_ROLE:
            continue
        config = {"job_id": plan["job_id"], "self": c["name"], "host": c["host"], "host_dev": HOST_DEV,
                  "job_logs": JOB_LOGS, "metrics": "%s/%s" % (CONTAINER_LOG_PATH, METRICS_FILE),
                  "docker_host": "unix://" + PROXY_SOCKET, "state": "%s/%s" % (CONTAINER_LOG_PATH, STATE_FILE),
                  "interval": motor_host_healer.DEFAULTS["interval"], "keep": motor_host_healer.DEFAULTS["keep"]}
        out[c["name"]] = {HOST_HEALER_SCRIPT: _read(motor_host_healer), "motor_docker.py": _read(motor_docker),
                          "motor_heal_rules.py": _read(motor_heal_rules),
                          HOST_HEALER_CONFIG: json.dumps(config, indent=2, sort_keys=True) + "\n"}
    return out


def host_healer_options(container: dict, log_root: str, job_id: str) -> dict:
    """The motor_containers options of a healer or proxy container beyond the common ones (``{}`` for any other).
    The proxy alone gets the host's Docker socket; the healer only the proxy's directory, read-only."""
    if container.get("role") == SOCKPROXY_ROLE:
        volumes = ["%s:%s:rw" % (DOCKER_SOCKET, DOCKER_SOCKET),
                   "%s:%s:rw" % (socket_dir(container, log_root, job_id), PROXY_DIR)]
    elif container.get("role") == HOST_HEALER_ROLE:
        volumes = ["%s:%s:ro" % (socket_dir(container, log_root, job_id), PROXY_DIR), "/dev:%s:ro" % HOST_DEV,
                   "%s/%s:%s:ro" % (str(log_root).rstrip("/"), job_id, JOB_LOGS)]
    else:
        return {}
    return {"volumes": volumes, "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "read_only": True}
