#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_report action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_report
short_description: Stop a deploy when a host did not finish its tier steps, or give its summary
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Reads on the controller what every host of the plan recorded after its tier steps (O(host_record), a fact with
    C(step) and C(states)) and fails, naming the hosts, when one did not record the last step (failed or unreachable).
  - With O(summary), returns the summary table of every planned container with its state (the discovery, then the
    hosts' records, then O(states)).
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  plan:
    description: The plan.
    type: dict
    required: true
  decision:
    description: The decision (fact C(motor_decision) of M(pymotor.ascend.motor_decide)).
    type: dict
    required: true
  host_record:
    description: The fact every host recorded after each tier step.
    type: str
    required: true
  states:
    description: Host to container to state, newer than the hosts' records (a rolling restart).
    type: dict
    default: {}
  summary:
    description: Return the summary lines.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Summarise a deploy
  pymotor.ascend.motor_report: {plan: "{{ motor_plan_result }}", decision: "{{ motor_decision }}",
                                host_record: motor_service_host_record, summary: true}
  register: summary
"""

RETURN = r"""
summary:
  description: The summary lines (HOST, CONTAINER, ROLE, NPUS, STATE, PORTS, then the coordinator URL).
  returned: with O(summary)
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(plan=dict(type="dict", required=True), decision=dict(type="dict", required=True), host_record=dict(
        type="str", required=True), states=dict(type="dict", default={}), summary=dict(type="bool", default=False)), supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_report runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
