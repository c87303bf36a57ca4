# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The motor_containers specs and config directories (configmaps) of plan entries."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONTAINER_LABEL,
    CONTAINER_LOG_PATH,
    HASH_LABEL,
    JOB_LABEL,
    PARTS_LABEL,
    PLACEMENT_LABEL,
    PORTS_LABEL,
    ROLE_LABEL,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import is_secret_key
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import placement_label


def split_env(env: dict) -> tuple[dict, dict]:
    """(plain, secret): the variables of ``env``, those under a secret-looking name (the masking rule of
    operations/secrets.py) apart - the modules take them in a no_log option, so no log, result nor -vvv
    invocation shows them, while the plain ones stay readable."""
    plain, secret = {}, {}
    for key, value in (env or {}).items():
        (secret if is_secret_key(key) else plain)[key] = value
    return plain, secret


def container_spec(container: dict, result: dict, settings: dict) -> dict:
    """The pymotor.ascend.motor_containers spec of a plan entry (no user_config: it may hold secrets; the variables
    with a secret-looking name in ``secret_env``, apart from ``env``).

    ``result`` is the reconcile result (config hash and parts labels), ``settings`` the role settings: image,
    command, job_id, log_root, weight_dir, mounts (engine mounts present on the container's host), extra_volumes,
    restart_policy, log_max_size, log_max_file.
    """
    name = container["name"]
    env = container.get("env") or {}
    config_dir = container["configmap_path"]
    volumes = [f"{config_dir}:{config_dir}:ro",
               f"{settings['log_root']}/{settings['job_id']}/{name}:{env.get('MOTOR_LOG_ROOT_PATH') or CONTAINER_LOG_PATH}:rw"]
    if container.get("needs_weights"):
        volumes.append(f"{settings['weight_dir']}:{settings['weight_dir']}:ro")
    if container.get("mounts_profile") == "engine":
        volumes += [f"{path}:{path}:ro" for path in settings.get("mounts") or []]
    volumes += list(settings.get("extra_volumes") or [])
    plain_env, secret_env = split_env(env)
    return {
        "name": name,
        "image": settings["image"],
        "command": list(settings.get("command") or []),
        "env": {str(k): str(v) for k, v in plain_env.items()},
        "secret_env": {str(k): str(v) for k, v in secret_env.items()},
        "devices": list(container.get("devices") or []),
        "volumes": volumes,
        "ipc_mode": container.get("ipc_mode") or None,
        "shm_size": container.get("shm_size") or None,
        "restart_policy": settings["restart_policy"],
        "log_driver": "json-file",
        "log_options": {"max-size": str(settings["log_max_size"]), "max-file": str(settings["log_max_file"])},
        "group": container["tier"],  # containers of one tier start together on their host
        "labels": {
            JOB_LABEL: settings["job_id"],
            ROLE_LABEL: container["role"],
            CONTAINER_LABEL: name,
            PORTS_LABEL: ",".join(str(p) for p in container.get("ports") or []),
            HASH_LABEL: result["hashes"][name],
            PARTS_LABEL: result["parts"][name],
            PLACEMENT_LABEL: placement_label(container),
        },
    }


def configmaps(containers: list, env_functions: dict) -> list:
    """The config directory (CONFIGMAP_PATH) of each plan entry, as M(pymotor.ascend.motor_containers) renders it:
    ``functions`` (script -> the set_*_env functions PyMotor's deployer injects into it; the container's env in
    set_common_env and in the function of its own role, the others empty; the variables with a secret-looking name
    in ``secret_functions``, same shape, apart) and ``files`` (user_config.json, env.json as PyMotor writes them)."""
    out = []
    for c in containers or []:
        env = c.get("env") or {}
        plain, secret = split_env(env)
        own = ("set_common_env", "set_%s_env" % c["role"])
        functions = {script: {name: plain if name in own else {} for name in names}
                     for script, names in (env_functions or {}).items()}
        secret_functions = {script: {name: secret for name in names if name in own}
                            for script, names in (env_functions or {}).items()} if secret else {}
        out.append({"name": c["name"], "path": c["configmap_path"], "functions": functions,
                    "secret_functions": {k: v for k, v in secret_functions.items() if v},
                    "files": {"user_config.json": nice_json(c.get("user_config") or {}),
                              "env.json": nice_json(env)}})
    return out


def nice_json(value) -> str:
    """The text of Ansible's ``to_nice_json(indent=2)`` plus a newline."""
    return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"
