#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_controller_file action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_controller_file
short_description: Internal - write a file on the Ansible controller when its content or mode differ
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Writes O(content) to O(dest) on the controller (where C(ansible-playbook) runs), whatever host the task
    targets, atomically (a temporary file in the same directory, renamed) and only when the content or the mode
    differ; creates the parent directory (mode 0750) when missing.
  - Runs inside the action plugin, with no module run - it is how C(playbooks/plan.yml) writes the plan file,
    where M(ansible.builtin.copy) costs two module runs on every first deploy.
attributes:
  check_mode:
    support: full
    description: Reports whether the file would change, writes nothing.
  diff_mode:
    support: full
    description:
      - Shows the old and the new text, with every value under a secret-looking key masked on both sides (an older
        file may hold secrets in clear), and the old and the new mode in the headers.
  action:
    support: full
    description: Implemented as an action plugin running on the controller.
options:
  dest:
    description: Path of the file on the controller.
    type: path
    required: true
  content:
    description: The text the file must hold.
    type: str
    required: true
  mode:
    description:
      - Octal permissions of the file; a file already there with another mode gets this one.
      - The default, readable by its owner only, suits files that may hold secrets.
    type: str
    default: '0600'
  directory_mode:
    description:
      - Octal permissions of the parent directory, applied also when it exists (a change reports C(changed)).
      - Unset, a missing parent is created with mode 0750 and an existing one is left as it is.
    type: str
"""

EXAMPLES = r"""
- name: Write the plan as JSON, secrets masked
  pymotor.ascend.motor_controller_file:
    dest: motor_plan.json
    content: "{{ motor_plan_result | pymotor.ascend.motor_ops_mask | ansible.builtin.to_nice_json(indent=2) }}\n"
    mode: "0600"
"""

RETURN = r"""
dest:
  description: The absolute path written (or that would be written).
  returned: always
  type: str
  sample: /home/operator/motor_plan.json
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(dest=dict(type="path", required=True), content=dict(type="str", required=True),
                                              mode=dict(type="str", default="0600"), directory_mode=dict(type="str")),
                           supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_controller_file runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
