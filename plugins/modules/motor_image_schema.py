#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the keys a PyMotor image's own code accepts by running the image once (no network, no NPU)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_image_schema
short_description: Internal - read the config keys a PyMotor image accepts by running it once
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Runs O(image) once with C(python3 -c <script>) - no network, every capability dropped, no new privileges, a
    read-only root file system, no device - and returns what the script printed - PyMotor's config dataclasses (the
    sections of ControllerConfig, CoordinatorConfig and NodeManagerConfig and the init fields of every config
    class), vLLM's C(EngineArgs) fields and serve parser options, SGLang's C(ServerArgs) fields. A part that does
    not import in the image is null, its error in C(errors).
  - The container is removed afterwards; nothing else on the host changes.
extends_documentation_fragment:
  - pymotor.ascend.docker
  - pymotor.ascend.read_only
options:
  image:
    description: The image (name:tag or id) to read; it must be on the host (never pulled).
    type: str
    required: true
  python:
    description: The Python interpreter inside the image.
    type: str
    default: python3
  run_timeout:
    description: Seconds the script may run.
    type: int
    default: 300
notes:
  - Fails when the image is missing, when the script exits non-zero or prints no schema.
seealso:
  - module: pymotor.ascend.motor_job_info
"""

EXAMPLES = r"""
- name: Read the key schema of the PyMotor image
  pymotor.ascend.motor_image_schema:
    image: pymotor:latest
  register: schema
"""

RETURN = r"""
image_id:
  description: The id of O(image) on the host.
  returned: success
  type: str
  sample: sha256:0123abcd
summary:
  description: One line per part read (or not read, with the import error).
  returned: success
  type: list
  elements: str
  sample: ["  PyMotor 0.1.0: 36 sections, 35 config classes"]
schema:
  description: The keys the image accepts, as the script printed them (format 1).
  returned: success
  type: dict
  sample:
    format: 1
    python: 3.11.10
    pymotor: {version: 0.1.0, sections: {motor_coordinator_config: {scheduler_config: coordinator.SchedulerConfig}},
              classes: {coordinator.SchedulerConfig: [deploy_mode, scheduler_type]}, nested: {}, skipped: {}}
    vllm: null
    sglang: null
    errors: {vllm: "ModuleNotFoundError: No module named 'vllm'"}
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
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_key_schema import SCRIPT, parse_output


def read_schema(client, params):
    """{image_id, schema} of ``params['image']``; raises ValueError with the script's output when it failed."""
    found = client.inspect_image(params["image"])
    if found is None:
        raise ValueError("image %s is not on this host (build or ship it first)" % params["image"])
    code, out, err = client.run_once(found["Id"], [params["python"], "-c", SCRIPT],
                                     labels={"io.pymotor.purpose": "key-schema"}, timeout=params["run_timeout"])
    if code != 0:
        raise ValueError("the key schema script exited %d in %s: %s" % (code, params["image"], (err or out)[-2000:]))
    try:
        schema = parse_output(out)
    except ValueError as exc:
        raise ValueError("%s in %s: %s" % (exc, params["image"], (err or out)[-2000:]))
    return {"changed": False, "image_id": found["Id"], "schema": schema, "summary": summary(schema)}


def summary(schema):
    """One line per part: what was read, or why the built-in list stays in use."""
    lines = []
    pymotor, vllm, sglang = schema.get("pymotor"), schema.get("vllm"), schema.get("sglang")
    if pymotor:
        lines.append("  PyMotor %s: %d sections, %d config classes" % (
            pymotor.get("version"), sum(len(s) for s in pymotor.get("sections", {}).values()),
            len(pymotor.get("classes", {}))))
    if vllm:
        names = set(vllm.get("engine_args") or []) | set(vllm.get("cli_args") or [])
        lines.append("  vLLM %s: %d arguments" % (vllm.get("version"), len(names)))
    if sglang:
        lines.append("  SGLang %s: %d arguments" % (sglang.get("version"), len(sglang.get("server_args") or [])))
    for part, error in sorted((schema.get("errors") or {}).items()):
        if not part.endswith(".traceback"):
            lines.append("  %s not read (%s): the built-in list is used where there is one" % (part, error))
    return lines


def main():
    argument_spec = dict(DOCKER_CONNECTION_ARGS)
    argument_spec.update(
        image=dict(type="str", required=True),
        python=dict(type="str", default="python3"),
        run_timeout=dict(type="int", default=300),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
    try:
        result = read_schema(DockerClient.from_params(module.params), module.params)
    except (DockerUnavailable, DockerError, ValueError) as exc:
        module.fail_json(msg=to_native(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
