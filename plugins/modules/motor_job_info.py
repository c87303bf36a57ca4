#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the containers of a PyMotor job on one host (state, health, labels; log tails and engine info on demand) in
one module run: the day-2 reads of status, collect_logs, stop, destroy and verify."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_job_info
short_description: Read the containers of a PyMotor job on one host in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Read-only. Lists the containers labelled C(io.pymotor.job=<job_id>) (running or not) and, in the same run,
    inspects them, inspects the containers and images named in O(names) and O(images), reads their log tails and
    the engine's information - one module run per host where the day-2 tasks ran one module per container.
  - Talks to the Docker Engine API with the collection's own client (Python standard library only), honouring
    O(docker_host) and the TLS options.
extends_documentation_fragment:
  - pymotor.ascend.docker
  - pymotor.ascend.read_only
options:
  job_id:
    description: Value of the C(io.pymotor.job) label of the containers to read.
    type: str
    required: true
  inspect:
    description: Inspect every container of the job (RV(inspections)).
    type: bool
    default: true
  names:
    description: Containers to inspect by name whether or not they carry the job's label (RV(named)).
    type: list
    elements: str
    default: []
  images:
    description: Images whose id is returned in RV(images).
    type: list
    elements: str
    default: []
  logs:
    description: Read the log tail of every container of the job (RV(logs)). Logs may hold secrets - mask them.
    type: bool
    default: false
  log_tail:
    description: Number of log lines per container with O(logs).
    type: int
    default: 1000
  engine_info:
    description: Return the engine's C(GET /info) and C(GET /version) (RV(engine)).
    type: bool
    default: false
notes:
  - Fails when the Docker engine cannot be reached (a day-2 verb cannot judge a host it cannot read).
seealso:
  - module: pymotor.ascend.motor_containers
  - module: pymotor.ascend.motor_host_probe
"""

EXAMPLES = r"""
- name: Read the job's containers, their log tails and the engine's information
  pymotor.ascend.motor_job_info:
    job_id: mindie-motor
    logs: true
    log_tail: 500
    engine_info: true
  register: job
  no_log: true  # logs may hold secrets

- name: Read the planned containers and image
  pymotor.ascend.motor_job_info:
    job_id: mindie-motor
    inspect: false
    names: [mindie-motor-p0-0]
    images: [pymotor:latest]
"""

RETURN = r"""
containers:
  description: The containers of the job (running or not) as C(GET /containers/json) lists them.
  returned: always
  type: list
  elements: dict
  sample:
    - Id: 3f2a9c0e1b7d
      Names: [/mindie-motor-p0-0]
      Image: pymotor:latest
      State: running
      Status: Up 5 minutes (healthy)
      Labels: {io.pymotor.job: mindie-motor, io.pymotor.role: prefill}
inspections:
  description: The inspection (C(GET /containers/{id}/json)) of every container of the job, with O(inspect).
  returned: always
  type: list
  elements: dict
  sample:
    - Id: 3f2a9c0e1b7d
      Name: /mindie-motor-p0-0
      Image: sha256:0123abcd
      RestartCount: 0
      State: {Status: running, Running: true, ExitCode: 0, StartedAt: '2026-01-01T00:00:00Z',
              Health: {Status: healthy}}
      Config: {Labels: {io.pymotor.job: mindie-motor, io.pymotor.role: prefill}}
      HostConfig: {Devices: [{PathOnHost: /dev/davinci0, PathInContainer: /dev/davinci0, CgroupPermissions: rwm}]}
named:
  description: Container name of O(names) to its inspection, or null when there is no such container.
  returned: always
  type: dict
  sample:
    mindie-motor-p0-0: {Id: 3f2a9c0e1b7d, Image: 'sha256:0123abcd', State: {Status: running, Running: true}}
    mindie-motor-d0-0: null
images:
  description: Image of O(images) to its id, empty when the image is not on the host.
  returned: always
  type: dict
  sample: {pymotor:latest: 'sha256:0123abcd'}
logs:
  description: The log tail of every container of the job, with O(logs).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Container name.
      type: str
    id:
      description: Container id.
      type: str
    stdout:
      description: Standard output lines (with timestamps).
      type: str
    stderr:
      description: Standard error lines (with timestamps), or why the logs could not be read.
      type: str
  sample:
    - name: mindie-motor-p0-0
      id: 3f2a9c0e1b7d
      stdout: "2026-01-01T00:00:00.000000000Z engine ready\n"
      stderr: ""
engine:
  description: The engine's C(GET /info) as C(info) and C(GET /version) as C(version), with O(engine_info).
  returned: always
  type: dict
  sample: {info: {ServerVersion: 27.5.1, Containers: 9, Driver: overlay2}, version: {Version: 27.5.1, ApiVersion: '1.47'}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import (
    DOCKER_CONNECTION_ARGS,
    DOCKER_CONNECTION_REQUIRED_TOGETHER,
)
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import (
    DockerClient,
    DockerError,
    DockerUnavailable,
)


def read_job(client, params):
    """Everything the options ask for, from ``client`` (a motor_docker.DockerClient)."""
    containers = client.job_containers(params["job_id"])
    result = {"changed": False, "containers": containers, "inspections": [], "named": {}, "images": {}, "logs": [],
              "engine": {}}
    if params["inspect"]:
        for row in containers:
            found = client.inspect_container(row["Id"])
            if found is not None:  # removed between the list and the inspection
                result["inspections"].append(found)
    for name in params["names"]:
        result["named"][name] = client.inspect_container(name)
    for image in params["images"]:
        found = client.inspect_image(image)
        result["images"][image] = found["Id"] if found else ""
    if params["logs"]:
        for row in containers:
            name = ((row.get("Names") or [""])[0]).lstrip("/")
            try:
                out, err = client.logs(row["Id"], tail=params["log_tail"])
            except DockerError as exc:  # a container without readable logs (log driver none, ...) is reported
                out, err = "", "cannot read the logs: %s" % to_native(exc)
            result["logs"].append({"name": name, "id": row["Id"], "stdout": out, "stderr": err})
    if params["engine_info"]:
        result["engine"] = {"info": client.get_json("/info"), "version": client.get_json("/version")}
    return result


def main():
    argument_spec = dict(DOCKER_CONNECTION_ARGS)
    argument_spec.update(
        job_id=dict(type="str", required=True),
        inspect=dict(type="bool", default=True),
        names=dict(type="list", elements="str", default=[]),
        images=dict(type="list", elements="str", default=[]),
        logs=dict(type="bool", default=False),
        log_tail=dict(type="int", default=1000),
        engine_info=dict(type="bool", default=False),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
    try:
        result = read_job(DockerClient.from_params(module.params), module.params)
    except (DockerUnavailable, DockerError) as exc:
        module.fail_json(msg=to_native(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
