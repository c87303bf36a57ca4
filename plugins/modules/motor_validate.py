#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_validate action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_validate
short_description: Validate and normalize a PyMotor user_config.json and env.json (the validate phase's entry point)
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Reads C(user_config.json) and C(env.json) on the controller (from O(config_dir), or O(user_config_path) and
    O(env_config_path); relative paths are relative to the current directory), deep-merges O(overrides) onto the
    user_config and validates and normalizes them with the logic of the P(pymotor.ascend.motor_config#filter) filter.
  - "On success sets the fact C(motor_normalized_config); the result is never shown (user_config holds secrets)."
  - "On failure fails once, the message listing every problem once, one a line, as C(<path>: <what> (<hint>)),
    then the warnings after a blank line."
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  config_dir:
    description: Directory holding C(user_config.json) and C(env.json), like deploy.py C(--config_dir).
    type: path
  user_config_path:
    description: The user_config file (with O(env_config_path), instead of O(config_dir)).
    type: path
  env_config_path:
    description: The env.json file.
    type: path
  overrides:
    description: Dicts deep-merged onto the user_config before validation (dicts merge, lists and scalars replace, V(null) deletes).
    type: list
    elements: dict
    default: []
  unknown_keys:
    description:
      - What a key far from every key the lists know is (a key close to a known one is always an error with
        a did-you-mean); the lists and the upstream commits they were read from are in docs/strict-input.md.
      - V(warn) warns (a newer PyMotor or the image's vLLM may read it), V(error) refuses it.
    type: str
    choices: [warn, error]
    default: warn
  image:
    description:
      - The image being deployed (C(motor_image)); empty - the configuration's C(motor_deploy_config.image_name).
      - When O(schema_dir) holds a key schema stored for it (C(playbooks/schema.yml), C(playbooks/build_image.yml)),
        PyMotor's sections and config fields and the vLLM / SGLang arguments are checked against what that image's
        code reads; otherwise against the built-in lists. RV(keys_checked) says which.
    type: str
    default: ''
  schema_dir:
    description: Directory on the controller holding the stored key schemas (C(motor_key_schema_dir)); empty - the built-in lists only.
    type: str
    default: ~/.cache/pymotor-ascend/schemas
  check_inventory:
    description:
      - Judge the inventory's PyMotor hosts with the plan's own host rules too (addresses, NPU ids, reserved ports,
        hardware types), so that validating with an inventory refuses what planning would.
      - V(false) for a playbook that plans nothing and needs only the job (the day-2 verbs status, stop, destroy,
        collect_logs).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Normalize and validate the configuration
  pymotor.ascend.motor_validate:
    config_dir: /srv/pymotor/job1
"""

RETURN = r"""
summary:
  description: One line each - mode, hardware, job_id, instances, affinity, KV pool and conductor.
  returned: success
  type: list
  elements: str
keys_checked:
  description: Which key lists the keys were checked against (C(keys checked against PyMotor <version> of <image> ...)).
  returned: success
  type: str
ansible_facts:
  description: C(motor_normalized_config), the normalized configuration (see docs/design.md).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(config_dir=dict(type="path"), user_config_path=dict(type="path"), env_config_path=dict(
        type="path"), overrides=dict(type="list", elements="dict", default=[]),
        unknown_keys=dict(type="str", default="warn", choices=["warn", "error"]),
        image=dict(type="str", default=""), schema_dir=dict(type="str", default="~/.cache/pymotor-ascend/schemas"),
        check_inventory=dict(type="bool", default=True)), supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_validate runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
