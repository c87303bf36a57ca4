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
    WATCHER_CONFIG,
    WATCHER_INTERVAL,
    WATCHER_ROLE,
    WATCHER_SCRIPT,
    WATCHER_STATE,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import is_secret_key
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import service_targets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import cert_dirs
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.single import SINGLE_FUNCTIONS, SINGLE_ROLE, SINGLE_SCRIPT
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.standby import ETCD_TLS_DIR, uses_etcd_tls
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.healer import HEALER_BLOCK, HEALER_SCRIPT, healer_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.host_healer import host_healer_files, host_healer_options
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import placement_label
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.probes import healthcheck, probe_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.runtime import runtime_options, runtime_volumes


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
    command, job_id, log_root, weight_dir, mounts (engine mounts present on the container's host), driver_dir,
    extra_volumes,
    restart_policy, log_max_size, log_max_file, init (docker run --init).
    """
    name = container["name"]
    env = container.get("env") or {}
    config_dir = container["configmap_path"]
    volumes = [f"{config_dir}:{config_dir}:ro",
               f"{settings['log_root']}/{settings['job_id']}/{name}:{log_path(container)}:rw"]
    if container.get("needs_weights"):
        volumes.append(f"{settings['weight_dir']}:{settings['weight_dir']}:ro")
    present = settings.get("mounts") or []
    if container.get("mounts_profile") == "engine":
        volumes += [f"{path}:{path}:ro" for path in present]
    elif container.get("mounts_profile") == "kv":  # the KV pool and conductor: the driver only, as upstream
        volumes += [f"{path}:{path}:ro" for path in present if path == settings.get("driver_dir")]
    # ENABLE_GEN_CERT=true: boot makes the TLS certificates from the host's CA and script (read-only)
    volumes += [f"{path}:{path}:ro" for path in cert_dirs({"containers": [container]})]
    # master/standby: the etcd client certificate, into the controller and coordinator replicas only
    if settings.get("etcd_tls_dir") and uses_etcd_tls(container):
        volumes.append(f"{settings['etcd_tls_dir']}:{ETCD_TLS_DIR}:ro")
    volumes += list(settings.get("extra_volumes") or [])
    volumes += runtime_volumes(container, settings)
    plain_env, secret_env = split_env(env)
    if settings.get("init"):  # docker-init (tini) signals the startup script's whole process group, not bash alone
        plain_env = {**plain_env, "TINI_KILL_PROCESS_GROUP": "1"}
    options = runtime_options(container, settings)
    # the per-host healer and its Docker socket proxy: the proxy's socket, no capability (host_healer.py)
    healer = host_healer_options(container, settings["log_root"], settings["job_id"])
    volumes += healer.pop("volumes", [])
    if healer:
        healer["security_opt"] = options.get("security_opt", []) + healer["security_opt"]
        options.update(healer)
    return {
        "name": name,
        "image": settings["image"],
        # the KV watcher runs the collection's script; every other container the image's startup (boot.sh)
        "command": list(container.get("command") or settings.get("command") or []),
        "env": {str(k): str(v) for k, v in plain_env.items()},
        "secret_env": {str(k): str(v) for k, v in secret_env.items()},
        "devices": list(container.get("devices") or []),
        # PyMotor's controller spins at 100% CPU on stdin at EOF (Docker's default): its stdin stays open (docker run
        # -i). Only its: the node manager's main loop blocks in input() on an open silent stdin, so after giving up
        # (5 failed registrations, 5 abnormal heartbeats) it would never exit and the restart policy never act.
        "stdin_open": container["role"] == "controller",
        "volumes": volumes,
        "ipc_mode": container.get("ipc_mode") or None,
        "shm_size": container.get("shm_size") or None,
        **options,
        "restart_policy": settings["restart_policy"],
        "init": bool(settings.get("init")),
        "log_driver": "json-file",
        "log_options": {"max-size": str(settings["log_max_size"]), "max-file": str(settings["log_max_file"])},
        "group": container["tier"],  # containers of one tier start together on their host
        "healthcheck": healthcheck(container),  # upstream's liveness/startup probes (reconcile/probes.py)
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


# what PyMotor's deployer (examples/deployer/deploy.py update_shell_add_kv_patch) prepends to boot.sh when the KV pool
# and the conductor are on: patch vLLM's MultiConnector with patch/kv_vllm_multi_connector.patch. PyMotor runs a bare
# `patch -p0`, which fails ("previously applied") when a container restarts; this block finds vLLM where the image's
# python3 has it and applies the patch once (a reverse dry run tells an applied patch apart).
KV_PATCH_BLOCK = """# patch_begin
motor_kv_patch=/tmp/motor/examples/deployer/patch/kv_vllm_multi_connector.patch
motor_vllm=$(python3 -c 'import importlib.util; print(importlib.util.find_spec("vllm").submodule_search_locations[0])' 2>/dev/null)
motor_multi_connector=${motor_vllm:+$motor_vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py}
if [ -z "$motor_multi_connector" ] || [ ! -f "$motor_multi_connector" ] || [ ! -f "$motor_kv_patch" ]; then
    echo "kv patch: vllm multi_connector.py or $motor_kv_patch not found, vLLM not patched"
elif patch -p0 -R --dry-run -s -f "$motor_multi_connector" < "$motor_kv_patch" >/dev/null 2>&1; then
    echo "kv patch: already applied to $motor_multi_connector"
else
    md5sum "$motor_multi_connector"
    patch -p0 -f "$motor_multi_connector" < "$motor_kv_patch"
    md5sum "$motor_multi_connector"
fi
# patch_end
"""


def own_files(plan: dict, watcher_script: str) -> dict:
    """Files of the collection's own in a container's config directory, ``{container: {file: text}}``: the KV
    watcher's script and its config (the job's URLs and constants; no instance count in it, so scaling restarts
    nobody else), and the controller's healer (``reconcile/healer.py``). They count in the container's config hash (``hashes.fold_files``)."""
    out = {}
    for c in (plan or {}).get("containers") or []:
        if c.get("role") == WATCHER_ROLE:
            targets = service_targets(plan)
            # it restores what the conductor lost once the coordinator is ready (then the coordinator registered
            # its live instances itself); with TLS on the management port it does not wait (plain http only)
            coordinator = targets["coordinator"]
            config = {"conductor": targets["conductor"]["url"], "interval": WATCHER_INTERVAL, "state": WATCHER_STATE,
                      "coordinator": None if coordinator["tls"] else coordinator["url"]}
            if (c.get("port_map") or {}).get("metrics"):  # its /metrics, on the conductor host's address only
                config["metrics"] = {"host": c["ip"], "port": c["port_map"]["metrics"]}
            out[c["name"]] = {WATCHER_SCRIPT: watcher_script, WATCHER_CONFIG: nice_json(config)}
    out.update(healer_files(plan))  # the controller's healer (reconcile/healer.py)
    for name, texts in probe_files(plan).items():  # the Docker health checks' probe (reconcile/probes.py)
        out[name] = dict(out.get(name) or {}, **texts)
    out.update(host_healer_files(plan))  # the per-host healers (reconcile/host_healer.py)
    return out


def configmaps(containers: list, env_functions: dict, extra_files: dict | None = None,
               running: frozenset = frozenset()) -> list:
    """The config directory (CONFIGMAP_PATH) of each plan entry, as M(pymotor.ascend.motor_containers) renders it:
    ``functions`` (script -> the set_*_env functions PyMotor's generator injects into it, each with the body the plan
    gives it: common env + the role's env.json section; the variables with a secret-looking name in
    ``secret_functions``, same shape, apart), ``prepend`` (boot.sh -> the vLLM patch block, when the plan asks for it)
    and ``files`` (user_config.json, env.json: the container environment; ``extra_files``: ``own_files``).

    ``running``: the names of containers that keep running unchanged; their user_config.json is ``keep``: left as it
    is, since upstream's hot reload can load a rewritten one as the defaults (docs/design.md, "Sections each role
    reads")."""
    out = []
    for c in containers or []:
        env = c.get("env") or {}
        shell_env = c.get("shell_env") or {}
        # a script none of whose functions the plan gives (mf_store.sh outside SGLang jobs) is left as the image has it
        scripts = {script: names for script, names in (env_functions or {}).items()
                   if not shell_env or any(name in shell_env for name in names)}
        if c.get("role") == SINGLE_ROLE:  # upstream's combined script gets every role's function (plan/single.py)
            scripts[SINGLE_SCRIPT] = list(SINGLE_FUNCTIONS)
        functions, secret_functions = {}, {}
        for script, names in scripts.items():
            functions[script] = {}
            for name in names:
                plain, secret = split_env(shell_env.get(name) or {})
                functions[script][name] = plain
                if secret:
                    secret_functions.setdefault(script, {})[name] = secret
        out.append({"name": c["name"], "path": c["configmap_path"], "functions": functions,
                    "secret_functions": secret_functions,
                    "prepend": _prepend(c, extra_files),
                    "keep": ["user_config.json"] if c["name"] in running else [],
                    "files": dict({"user_config.json": nice_json(c.get("user_config") or {}),
                                   "env.json": nice_json(env)}, **(extra_files or {}).get(c["name"], {}))})
    return out


def _prepend(container: dict, extra_files: dict | None) -> dict:
    """boot.sh's prepended block: the healer's (reconcile/healer.py), then the vLLM patch block when the plan asks."""
    block = HEALER_BLOCK if HEALER_SCRIPT in (extra_files or {}).get(container["name"], {}) else ""
    block += KV_PATCH_BLOCK if container.get("kv_patch") else ""
    return {"boot.sh": block} if block else {}


def log_path(container: dict) -> str:
    """MOTOR_LOG_ROOT_PATH inside the container (env.json's value, set by set_common_env), where the log dir is mounted."""
    shell_env = container.get("shell_env") or {}
    return ((shell_env.get("set_common_env") or {}).get("MOTOR_LOG_ROOT_PATH")
            or (container.get("env") or {}).get("MOTOR_LOG_ROOT_PATH") or CONTAINER_LOG_PATH)


def nice_json(value) -> str:
    """The text of Ansible's ``to_nice_json(indent=2)`` plus a newline."""
    return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"
