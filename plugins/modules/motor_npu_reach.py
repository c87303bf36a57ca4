#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ping the peer NPU devices of a host over the NPU network, read-only, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_npu_reach
short_description: Internal - ping peer NPU devices on other hosts with hccn_tool, every ping of a host in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Read-only. Runs C(hccn_tool -i <npu> -ping -g address <address>) for each entry of O(pings), one after the
    other, and returns every answer; a ping that fails or loses packets does not fail the module, the controller
    judges the answers with the other prechecks (P(pymotor.ascend.motor_precheck_pings#filter) gives the pings).
  - One run per host instead of one C(ansible.builtin.command) run per ping; the answers have the shape of such a
    loop's results (RV(results)).
extends_documentation_fragment:
  - pymotor.ascend.read_only
options:
  hccn_tool:
    description: Path of C(hccn_tool).
    type: path
    default: /usr/local/Ascend/driver/tools/hccn_tool
  pings:
    description: The pings to run.
    type: list
    elements: dict
    default: []
    suboptions:
      npu:
        description: The local NPU (device id) that sends.
        type: int
        required: true
      address:
        description: The peer device's IP address.
        type: str
        required: true
      peer_host:
        description: The host of the peer device (returned with the answer, for the message).
        type: str
        required: true
      peer_npu:
        description: The peer device id (returned with the answer, for the message).
        type: int
        required: true
"""

EXAMPLES = r"""
- name: Ping the peer NPU devices on other hosts
  pymotor.ascend.motor_npu_reach:
    pings: "{{ hostvars['localhost'].motor_plan_result | pymotor.ascend.motor_precheck_pings(inventory_hostname, hostvars) }}"
  register: reach
"""

RETURN = r"""
results:
  description: One answer per ping, in the order of O(pings) - the ping (C(item)), the command (C(cmd)), its exit code
    (C(rc)) and output (C(stdout), C(stderr), the trailing newline stripped); C(msg) when C(hccn_tool) could not run.
  returned: always
  type: list
  elements: dict
  sample:
    - item: {npu: 0, address: 29.2.0.5, peer_host: npu-a2-02, peer_npu: 4}
      cmd: [/usr/local/Ascend/driver/tools/hccn_tool, -i, '0', -ping, -g, address, 29.2.0.5]
      rc: 0
      stdout: "device 0 PING 29.2.0.5\n...\n3 packets transmitted, 3 received, 0.00% packet loss"
      stderr: ''
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import NPU_REACH_ARGUMENT_SPEC
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_npu_reach import reach


def main():
    # The action plugin runs reach() as a standard-library script; this path serves connections without pipelining.
    module = AnsibleModule(argument_spec=NPU_REACH_ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**reach(module.params))


if __name__ == "__main__":
    main()
