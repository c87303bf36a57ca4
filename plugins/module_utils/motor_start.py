# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): builds on community.docker's GPL
# API client.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Remove and start the containers of a PyMotor job on one host through the Docker Engine API (community.docker's
API client): the Docker part of pymotor.ascend.motor_containers, imported only when a run has containers to start or
remove (a render alone saves importing the API client, about 0.3 s per run on a host)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.community.docker.plugins.module_utils.common_api import RequestException
from ansible_collections.community.docker.plugins.module_utils._api.errors import DockerException, NotFound
from ansible_collections.community.docker.plugins.module_utils._api.utils.utils import parse_bytes
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import (
    DockerUnavailable,
    MotorDockerClient,
    job_containers,
)

HASH_LABEL = "io.pymotor.config-hash"


def _device(spec):
    """'/dev/x:/dev/x:rwm' -> Engine API device mapping (container path and permissions default like docker run)."""
    parts = spec.split(":")
    host = parts[0]
    inside = parts[1] if len(parts) > 1 and parts[1] else host
    perms = parts[2] if len(parts) > 2 and parts[2] else "rwm"
    return {"PathOnHost": host, "PathInContainer": inside, "CgroupPermissions": perms}


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
    if spec.get("ipc_mode"):
        host_config["IpcMode"] = spec["ipc_mode"]
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
    return body


def decide(existing, spec):
    """What to do with one container: existing is its inspection (None when missing)."""
    if existing is None:
        return "created"
    labels = (existing.get("Config") or {}).get("Labels") or {}
    if labels.get(HASH_LABEL) != (spec.get("labels") or {}).get(HASH_LABEL):
        return "recreated"
    if (existing.get("State") or {}).get("Running"):
        return "unchanged"
    return "started"


def _inspect(client, name):
    try:
        return client.get_json("/containers/{0}/json", name)
    except NotFound:
        return None


def _remove(client, name):
    try:
        client.delete_call("/containers/{0}", name, params={"force": "true", "v": "false"})
    except NotFound:
        return False
    return True


def _create_and_start(client, spec):
    try:
        created = client.post_json_to_json("/containers/create", data=create_body(spec), params={"name": spec["name"]})
    except NotFound as exc:
        client.fail("cannot create %s: image %s is not on this host (%s); ship it with playbooks/build_image.yml"
                    % (spec["name"], spec["image"], to_native(exc)))
    client.post_call("/containers/{0}/start", created["Id"])
    return created["Id"]


def _job_states(client, job_id):
    return dict(((c.get("Names") or ["/?"])[0].lstrip("/"), c.get("State", "")) for c in job_containers(client, job_id))


def _apply(client, spec, check_mode):
    """Make one container run as specified; returns its row."""
    existing = _inspect(client, spec["name"])
    action = decide(existing, spec)
    container_id = (existing or {}).get("Id", "")
    if not check_mode:
        if action == "recreated":
            _remove(client, spec["name"])
        if action in ("created", "recreated"):
            container_id = _create_and_start(client, spec)
        elif action == "started":
            client.post_call("/containers/{0}/start", container_id)
    return {"name": spec["name"], "action": action, "id": container_id}


def start_groups(specs):
    """Consecutive specs with the same ``group`` (their tier) start together; the groups one after the other."""
    groups = []
    for spec in specs:
        if groups and spec.get("group") is not None and groups[-1][-1].get("group") == spec.get("group"):
            groups[-1].append(spec)
        else:
            groups.append([spec])
    return groups


def run(client, params, check_mode, new_client=None):
    """Remove, then start group by group; ``new_client()`` gives a client per thread to start a group's containers
    at the same time (without it, one after the other)."""
    result = {"changed": False, "containers": [], "removed": [], "states": {}}
    for name in params["remove"]:
        if check_mode:
            if _inspect(client, name) is not None:
                result["removed"].append(name)
        elif _remove(client, name):
            result["removed"].append(name)
    for group in start_groups(params["containers"]):
        if len(group) == 1 or check_mode or new_client is None:
            rows = [_apply(client, spec, check_mode) for spec in group]
        else:
            with ThreadPoolExecutor(max_workers=len(group)) as pool:
                rows = list(pool.map(lambda spec: _apply(new_client(), spec, check_mode), group))
        result["containers"].extend(rows)
    result["changed"] = bool(result["removed"]) or any(c["action"] != "unchanged" for c in result["containers"])
    result["states"] = _job_states(client, params["job_id"])
    return result


def start_on_docker(module):
    """run() with the module's parameters on the module's Docker engine; raises DockerUnavailable with the message
    to fail with."""
    try:
        return run(MotorDockerClient(module), module.params, module.check_mode,
                   new_client=lambda: MotorDockerClient(module))
    except DockerException as exc:
        raise DockerUnavailable("An unexpected Docker error occurred: %s" % to_native(exc))
    except RequestException as exc:
        raise DockerUnavailable("An unexpected requests error occurred when trying to talk to the Docker daemon: %s"
                                % to_native(exc))
