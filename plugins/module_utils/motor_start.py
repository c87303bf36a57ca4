# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Remove and start the containers of a PyMotor job on one host through the Docker Engine API (the collection's own
client, module_utils/motor_docker.py): the Docker part of pymotor.ascend.motor_containers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import re
import tarfile

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_configmap import render
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import (
    DockerClient,
    DockerError,
    DockerUnavailable,
    NotFound,
)

HASH_LABEL = "io.pymotor.config-hash"
MASK = "********"
UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def parse_bytes(value):
    """'4g' -> 4294967296, like docker run --shm-size (b, k, m, g; a bare number is bytes)."""
    match = re.match(r"^\s*(\d+)\s*([bkmg]?)b?\s*$", str(value).lower())
    if not match:
        raise ValueError("invalid size %r (a number with an optional unit b, k, m or g)" % (value,))
    return int(match.group(1)) * UNITS[match.group(2)]


def _device(spec):
    """'/dev/x:/dev/x:rwm' -> Engine API device mapping (container path and permissions default like docker run)."""
    parts = spec.split(":")
    host = parts[0]
    inside = parts[1] if len(parts) > 1 and parts[1] else host
    perms = parts[2] if len(parts) > 2 and parts[2] else "rwm"
    return {"PathOnHost": host, "PathInContainer": inside, "CgroupPermissions": perms}


NANO = 1000000000


def healthcheck_body(check):
    """The create body's ``Healthcheck`` of a spec's ``healthcheck`` (seconds -> nanoseconds), None without one."""
    if not check or not check.get("test"):
        return None
    return {"Test": list(check["test"]), "Interval": int(check.get("interval") or 0) * NANO,
            "Timeout": int(check.get("timeout") or 0) * NANO, "Retries": int(check.get("retries") or 0),
            "StartPeriod": int(check.get("start_period") or 0) * NANO}


def create_body(spec):
    """The POST /containers/create body of one container spec (pure)."""
    host_config = {
        "NetworkMode": "host",
        "Privileged": False,
        "Devices": [_device(d) for d in spec.get("devices") or []],
        "Binds": list(spec.get("volumes") or []),
        "RestartPolicy": {"Name": spec.get("restart_policy") or "no", "MaximumRetryCount": 0},
        "LogConfig": {
            "Type": spec.get("log_driver") or "json-file",
            "Config": {str(k): str(v) for k, v in (spec.get("log_options") or {}).items()},
        },
    }
    if spec.get("init"):
        host_config["Init"] = True
    if spec.get("ipc_mode"):
        host_config["IpcMode"] = spec["ipc_mode"]
    if spec.get("cap_add"):
        host_config["CapAdd"] = list(spec["cap_add"])
    if spec.get("security_opt"):
        host_config["SecurityOpt"] = list(spec["security_opt"])
    if spec.get("cap_drop"):
        host_config["CapDrop"] = list(spec["cap_drop"])
    if spec.get("read_only"):
        host_config["ReadonlyRootfs"] = True
    if spec.get("memory"):
        host_config["Memory"] = parse_bytes(spec["memory"])
    if spec.get("cpuset_cpus"):
        host_config["CpusetCpus"] = str(spec["cpuset_cpus"])
    if spec.get("shm_size"):
        host_config["ShmSize"] = parse_bytes(spec["shm_size"])
    body = {
        "Image": spec["image"],
        "Env": ["%s=%s" % (k, "" if v is None else v) for k, v in sorted((spec.get("env") or {}).items())],
        "Labels": {str(k): str(v) for k, v in (spec.get("labels") or {}).items()},
        "HostConfig": host_config,
    }
    if spec.get("stdin_open"):  # docker run -i: stdin open, never at EOF (PyMotor's controller spins on EOF)
        body["OpenStdin"] = True
        body["StdinOnce"] = False
    if spec.get("command"):
        body["Cmd"] = list(spec["command"])
    if healthcheck_body(spec.get("healthcheck")):  # docker ps shows (healthy) / (unhealthy)
        body["Healthcheck"] = healthcheck_body(spec["healthcheck"])
    return body


def decide(existing, spec):
    """What to do with one container: existing is its inspection (None when missing)."""
    if existing is None:
        return "created"
    labels = (existing.get("Config") or {}).get("Labels") or {}
    if labels.get(HASH_LABEL) != (spec.get("labels") or {}).get(HASH_LABEL):
        return "recreated"
    if (existing.get("State") or {}).get("Running"):
        # asked by the deploy's repair (the coordinator registers the KV ranks again when it starts)
        return "restarted" if spec.get("restart") else "unchanged"
    return "started"


def _inspect(client, name):
    return client.inspect_container(name)


def _remove(client, name):
    try:
        client.delete("/containers/{0}", name, params={"force": "true", "v": "false"})
    except NotFound:
        return False
    return True


def _create_and_start(client, spec):
    try:
        created = client.post_json("/containers/create", data=create_body(spec), params={"name": spec["name"]})
    except NotFound as exc:
        raise DockerUnavailable("cannot create %s: image %s is not on this host (%s); ship it with "
                                "playbooks/build_image.yml" % (spec["name"], spec["image"], exc))
    client.post("/containers/{0}/start", created["Id"])
    return created["Id"]


def _job_states(client, job_id):
    return dict(((c.get("Names") or ["/?"])[0].lstrip("/"), c.get("State", "")) for c in client.job_containers(job_id))


def planned(spec):
    """The diff view of a container spec: what shapes the container, every env value masked (env may hold API keys
    and tokens; which ones is the plan's masking rule, kept on the controller - here all values are hidden)."""
    return {
        "image": spec["image"],
        "command": list(spec.get("command") or []),
        "env": dict((str(k), MASK) for k in sorted(spec.get("env") or {})),
        "devices": ["%(PathOnHost)s:%(PathInContainer)s:%(CgroupPermissions)s" % _device(d)
                    for d in spec.get("devices") or []],
        "volumes": list(spec.get("volumes") or []),
        "labels": dict((str(k), str(v)) for k, v in (spec.get("labels") or {}).items()),
        "ipc_mode": spec.get("ipc_mode") or "",
        "shm_size": parse_bytes(spec["shm_size"]) if spec.get("shm_size") else 0,
        "cap_add": list(spec.get("cap_add") or []),
        "security_opt": list(spec.get("security_opt") or []),
        "cap_drop": list(spec.get("cap_drop") or []),
        "read_only": bool(spec.get("read_only")),
        "memory": parse_bytes(spec["memory"]) if spec.get("memory") else 0,
        "cpuset_cpus": str(spec.get("cpuset_cpus") or ""),
        "restart_policy": spec.get("restart_policy") or "no",
        "init": bool(spec.get("init")),
        "healthcheck": healthcheck_body(spec.get("healthcheck")),
        "state": "running",
    }


def observed(existing, image_env=()):
    """The diff view (planned()'s keys) of a container's inspection; env entries the image sets itself are left
    out, every value masked."""
    config, host = existing.get("Config") or {}, existing.get("HostConfig") or {}
    return {
        "image": config.get("Image", ""),
        "command": list(config.get("Cmd") or []),
        "env": dict((e.split("=", 1)[0], MASK) for e in sorted(config.get("Env") or []) if e not in image_env),
        "devices": ["%(PathOnHost)s:%(PathInContainer)s:%(CgroupPermissions)s" % d for d in host.get("Devices") or []],
        "volumes": list(host.get("Binds") or []),
        "labels": dict(config.get("Labels") or {}),
        "ipc_mode": host.get("IpcMode") or "",
        "shm_size": host.get("ShmSize") or 0,
        "cap_add": list(host.get("CapAdd") or []),
        "security_opt": list(host.get("SecurityOpt") or []),
        "cap_drop": list(host.get("CapDrop") or []),
        "read_only": bool(host.get("ReadonlyRootfs")),
        "memory": host.get("Memory") or 0,
        "cpuset_cpus": host.get("CpusetCpus") or "",
        "restart_policy": (host.get("RestartPolicy") or {}).get("Name") or "no",
        "init": bool(host.get("Init")),
        "healthcheck": config.get("Healthcheck"),
        "state": (existing.get("State") or {}).get("Status", ""),
    }


def _image_env(client, existing):
    found = client.inspect_image(existing.get("Image", "")) if existing.get("Image") else None
    return frozenset(((found or {}).get("Config") or {}).get("Env") or [])


def _diff_of(client, existing, spec, action):
    """(before, after) of one container for diff mode; None when nothing changes."""
    if action == "unchanged":
        return None
    after = planned(spec)
    if action in ("started", "restarted"):
        return dict(after, state=(existing.get("State") or {}).get("Status", "exited")), after
    return (observed(existing, _image_env(client, existing)) if existing else {}), after


def _apply(client, spec, check_mode, want_diff=False):
    """Make one container run as specified; returns its row (and its diff under ``diff`` when wanted)."""
    existing = _inspect(client, spec["name"])
    action = decide(existing, spec)
    container_id = (existing or {}).get("Id", "")
    row = {"name": spec["name"], "action": action, "id": container_id}
    if want_diff:
        row["diff"] = _diff_of(client, existing, spec, action)
    if not check_mode:
        if action == "recreated":
            _remove(client, spec["name"])
        if action in ("created", "recreated"):
            row["id"] = _create_and_start(client, spec)
        elif action == "started":
            client.post("/containers/{0}/start", container_id)
        elif action == "restarted":
            client.post("/containers/{0}/restart", container_id)
    return row


def _stop(client, name, wait, check_mode):
    """Stop one container; returns (name, its state before) when it was running, else None."""
    existing = _inspect(client, name)
    if existing is None or not (existing.get("State") or {}).get("Running"):
        return None
    if not check_mode:
        try:
            if not client.stop(name, wait):
                return None
        except NotFound:  # removed meanwhile
            return None
    return name, (existing.get("State") or {}).get("Status", "running")


def start_groups(specs):
    """Consecutive specs with the same ``group`` (their tier) start together; the groups one after the other."""
    groups = []
    for spec in specs:
        if groups and spec.get("group") is not None and groups[-1][-1].get("group") == spec.get("group"):
            groups[-1].append(spec)
        else:
            groups.append([spec])
    return groups


def _in_groups(client, groups, work, new_client):
    """work(client, item) for the items of each group, a group's items at the same time on clients of their own
    (``new_client()``; without it, or for a single item, one after the other on ``client``), group after group."""
    rows = []
    for group in groups:
        if len(group) == 1 or new_client is None:
            rows.extend(work(client, item) for item in group)
        else:
            with ThreadPoolExecutor(max_workers=len(group)) as pool:
                rows.extend(pool.map(lambda item: work(new_client(), item), group))
    return rows


def run(client, params, check_mode, new_client=None, want_diff=False):
    """Stop group by group, remove, then start group by group; ``new_client()`` gives a client per thread to stop or
    start a group's containers at the same time (without it, one after the other). With ``want_diff``, the result
    has ``diff`` (before/after of every container that changes, env values masked)."""
    result = {"changed": False, "containers": [], "removed": [], "stopped": [], "states": {}}
    before, after = {}, {}
    wait = params.get("stop_timeout", 10)
    stopping = [list(group) for group in params.get("stop") or [] if group]
    for found in _in_groups(client, stopping, lambda c, name: _stop(c, name, wait, check_mode), new_client):
        if found:
            result["stopped"].append(found[0])
            before[found[0]], after[found[0]] = {"state": found[1]}, {"state": "exited"}
    for name in params["remove"]:
        existing = _inspect(client, name)
        if existing is None or (not check_mode and not _remove(client, name)):
            continue
        result["removed"].append(name)
        if want_diff:
            before[name] = observed(existing, _image_env(client, existing))
            after.pop(name, None)
    parallel = None if check_mode else new_client
    rows = _in_groups(client, start_groups(params["containers"]),
                      lambda c, spec: _apply(c, spec, check_mode, want_diff), parallel)
    for row in rows:
        change = row.pop("diff", None)
        if change:
            before[row["name"]], after[row["name"]] = change
        result["containers"].append(row)
    result["changed"] = bool(result["removed"] or result["stopped"]) or any(
        c["action"] != "unchanged" for c in result["containers"])
    result["states"] = _job_states(client, params["job_id"])
    if want_diff:
        result["diff"] = {"before": before, "after": after}
    return result


def start_on_docker(params, check_mode=False, diff=False):
    """run() with the params on their Docker engine; raises DockerUnavailable with the message to fail with."""
    try:
        client = DockerClient.from_params(params)
        return run(client, params, check_mode, new_client=client.clone, want_diff=diff)
    except DockerError as exc:
        raise DockerUnavailable("the Docker engine refused: %s" % exc)
    except ValueError as exc:
        raise DockerUnavailable(str(exc))


def apply(params, check_mode=False, diff=False):
    """pymotor.ascend.motor_containers' result for validated params (CONTAINERS_ARGUMENT_SPEC in motor_arguments):
    render the config directories, then stop, remove and start; a failure is a result with ``failed`` and ``msg``."""
    result = {"changed": False, "containers": [], "removed": [], "stopped": [], "states": {}}
    if params["configmap"]:
        try:
            result["configmap"] = render(params["configmap"], check_mode,
                                         new_client=lambda: DockerClient.from_params(params))
        except (OSError, ValueError, KeyError, tarfile.TarError, DockerError, DockerUnavailable) as exc:
            return {"failed": True, "msg": "cannot render the config directories: %s" % exc}
        result["changed"] = result["configmap"].pop("changed")
    if any(not all(isinstance(name, str) for name in group) for group in params["stop"]):
        return {"failed": True, "msg": "stop: every group must be a list of container names"}
    if params["containers"] or params["remove"] or params["stop"]:
        for spec in params["containers"]:  # the secret variables join the others only here, never in a log
            spec["env"] = dict(spec["env"] or {}, **(spec.pop("secret_env", None) or {}))
        try:
            started = start_on_docker(params, check_mode, diff)
        except DockerUnavailable as exc:  # the API client's failures, the Engine's errors and run()'s own
            return {"failed": True, "msg": str(exc)}
        result.update(started, changed=result["changed"] or started["changed"])
    return result
