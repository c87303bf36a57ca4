#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_show action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_show
short_description: Print lines to the console as they are (the collection's tables, warnings and reports)
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Prints O(lines) on the controller's console as plain lines, in one block, before the task's result - no YAML or
    JSON quoting, no wrapping, whatever the stdout callback and its result format. The playbooks of the collection
    print their plan table, warnings, status and reports with it; M(ansible.builtin.debug) would show them as a
    quoted, wrapped YAML list.
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  lines:
    description: The lines - a list of strings, or one string split on its newlines (a string in the list may hold
      newlines too).
    type: raw
    required: true
  title:
    description: A line printed first (nothing when empty).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Show the plan
  pymotor.ascend.motor_show:
    lines: "{{ motor_plan_result | pymotor.ascend.motor_plan_table }}"
"""

RETURN = r"""
lines:
  description: How many lines were printed.
  returned: always
  type: int
  sample: 9
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    spec = dict(lines=dict(type="raw", required=True), title=dict(type="str", default=""))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_show runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
