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
  - Reads on the controller what every host with work registered from its last M(pymotor.ascend.motor_containers) run
    of the steps (O(host_run)) and fails, naming the hosts, when that run is missing, failed or unreachable.
  - With O(summary), returns the summary table of every planned container with its state (the discovery, then the
    hosts' last runs, then O(states)).
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
  host_run:
    description: The variable every host registered its runs of the steps under.
    type: str
    required: true
  states:
    description: Host to container to state, newer than the hosts' runs (a rolling restart).
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
                                host_run: motor_service_tier_run, summary: true}
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
    spec = dict(plan=dict(type="dict", required=True), decision=dict(type="dict", required=True),
                host_run=dict(type="str", required=True), states=dict(type="dict", default={}),
                summary=dict(type="bool", default=False))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_report runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
