# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The files and Docker options of the per-host healer containers (``plan/healer.py``,
``module_utils/motor_host_healer.py``).

Its config directory gets the healer (``motor_host_healer.py``), the collection's Docker API client it uses
(``motor_docker.py``, standard library), the table of healing rules (``motor_heal_rules.py``) and its config (the
job id, its own name, the state file); all count in its config hash. The container gets its host's Docker unix
socket (the only way it reaches Docker: no Docker API on the network) and the host's ``/dev`` read-only at
``/host/dev`` (it only checks that the NPU devices exist; without them in its device list the cgroup lets it open
none); no capability, no new privileges, a read-only root filesystem, no port. Its state file is in its log
directory on the host (``<log_root>/<job_id>/<container>/``)."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_docker, motor_heal_rules, motor_host_healer
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTAINER_LOG_PATH
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import (
    HOST_HEALER_CONFIG,
    HOST_HEALER_ROLE,
    HOST_HEALER_SCRIPT,
)

DOCKER_SOCKET = "/var/run/docker.sock"
HOST_DEV = "/host/dev"
STATE_FILE = "host_healer_state.json"


def _read(module) -> str:
    with open(module.__file__.replace(".pyc", ".py"), encoding="utf-8") as handle:
        return handle.read()


def host_healer_files(plan: dict) -> dict:
    """``{healer container: {file: text}}``."""
    out = {}
    for c in (plan or {}).get("containers") or []:
        if c.get("role") != HOST_HEALER_ROLE:
            continue
        config = {"job_id": plan["job_id"], "self": c["name"], "host_dev": HOST_DEV,
                  "docker_host": "unix://" + DOCKER_SOCKET, "state": "%s/%s" % (CONTAINER_LOG_PATH, STATE_FILE),
                  "interval": motor_host_healer.DEFAULTS["interval"], "keep": motor_host_healer.DEFAULTS["keep"]}
        out[c["name"]] = {HOST_HEALER_SCRIPT: _read(motor_host_healer), "motor_docker.py": _read(motor_docker),
                          "motor_heal_rules.py": _read(motor_heal_rules),
                          HOST_HEALER_CONFIG: json.dumps(config, indent=2, sort_keys=True) + "\n"}
    return out


def host_healer_options(container: dict) -> dict:
    """The motor_containers options of a healer container beyond the common ones (``{}`` for any other)."""
    if container.get("role") != HOST_HEALER_ROLE:
        return {}
    return {"volumes": ["%s:%s:rw" % (DOCKER_SOCKET, DOCKER_SOCKET), "/dev:%s:ro" % HOST_DEV],
            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "read_only": True}
