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
short_description: Internal - stop a deploy when too many hosts did not finish their tier steps, or give its summary
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Reads on the controller what every host with work registered from its last M(pymotor.ascend.motor_containers) run
    of the steps (O(host_run)) and, when that run is missing, failed or unreachable (or the host is in O(down)),
    fails naming the hosts and what needs them if they are more than O(max_fail_percentage) of the hosts or no
    engine instance is left without them; else sets the fact C(motor_decision) to the decision without what needs
    them.
  - With O(summary), prints and returns the summary table of every planned container with its state (the discovery,
    then the hosts' last runs, then O(states)), and prints after it which containers the run created, restarted or
    removed, and why (one task for what the deploy reports at its end).
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
    description:
      - Print and return the summary lines (left-out containers with the state C(left out)) and C(incomplete), then
        print the decision's changes.
    type: bool
    default: false
  down:
    description: Hosts that failed during the tier steps (the tier play's failed hosts).
    type: list
    elements: str
    default: []
  max_fail_percentage:
    description: Share of the hosts, in percent, that may fail while the deploy goes on without them.
    type: float
    default: 0
  ready_timeout:
    description: Seconds of the remaining readiness checks that wait for readiness.
    type: int
    default: 1800
  port_timeout:
    description: Seconds of the remaining readiness checks that wait for a port.
    type: int
    default: 300
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
incomplete:
  description: With O(summary), what the deploy left out because hosts failed (empty when nothing).
  returned: with O(summary)
  type: str
ansible_facts:
  description: When hosts failed and the deploy goes on, C(motor_decision) without what needs them (readiness
    checks of the rest, no stall watch or rolling restart of a left-out instance) with C(left_out) (the hosts, the
    containers and engine instances left out, C(message)). Never shown (the decision carries user_config).
  returned: when hosts failed and the deploy goes on
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    spec = dict(plan=dict(type="dict", required=True), decision=dict(type="dict", required=True),
                host_run=dict(type="str", required=True), states=dict(type="dict", default={}),
                summary=dict(type="bool", default=False), down=dict(type="list", elements="str", default=[]),
                max_fail_percentage=dict(type="float", default=0), ready_timeout=dict(type="int", default=1800),
                port_timeout=dict(type="int", default=300))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_report runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
