#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_plan_job action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_plan_job
short_description: Internal - plan hosts, NPUs and ports of every PyMotor container from the inventory (the plan phase's entry point)
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Reads the inventory on the controller - the hosts of C(motor_engine_hosts) and C(motor_control_hosts) and their
    variables (C(motor_host_ip), C(motor_nic), C(motor_npu_ids), C(motor_reserved_ports), C(motor_hardware_type)) - and
    plans with the logic of the P(pymotor.ascend.motor_plan#filter) filter.
  - With O(discovery), the name under which every host registered its M(pymotor.ascend.motor_host_probe) result, it first
    stops when a host could not be read (naming it; nothing was changed), then keeps the job's running containers where
    their placement labels say they run, and takes a host's C(motor_nic) from the interface of its default route and
    its C(motor_host_ip) from that interface's IPv4 address (the interfaces the probe read) where the inventory sets
    neither them nor an IP address in C(ansible_host). A value the inventory sets always wins.
  - Without O(discovery), C(motor_nic) defaults to the cached fact C(ansible_default_ipv4.interface), else C(eth0), and
    a host whose C(ansible_host) is a DNS name needs C(motor_host_ip) (one problem per host).
  - "On success prints the plan's table (hosts, NPUs and ports of every container) and sets the fact
    C(motor_plan_result) (never shown: user_config holds secrets); on failure fails once, listing every problem once
    as C(<path>: <what> (<hint>))."
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  config:
    description: The normalized configuration (fact C(motor_normalized_config) of M(pymotor.ascend.motor_validate)).
    type: dict
    required: true
  discovery:
    description: The variable every host registered its M(pymotor.ascend.motor_host_probe) result under (none - no discovery).
    type: str
  previous:
    description: The current placement per container name (host, npu_ids, port_map); given, it wins over the discovery's labels.
    type: dict
  config_root:
    description: Root of the config directories on the hosts (CONFIGMAP_PATH is C(<config_root>/<job_id>/<container>)).
    type: path
    default: /etc/pymotor
  output:
    description:
      - Where to write the plan as JSON on the controller, every secret-looking value masked, mode C(0600); written
        only when its content or mode differs (then the task reports changed), not at all in check mode.
    type: path
"""

EXAMPLES = r"""
- name: Build the deployment plan
  pymotor.ascend.motor_plan_job:
    config: "{{ motor_normalized_config }}"
    discovery: motor_service_docker
    output: motor_plan.json
"""

RETURN = r"""
ansible_facts:
  description: C(motor_plan_result), the plan (see the P(pymotor.ascend.motor_plan#filter) filter).
  returned: success
  type: dict
dest:
  description: The absolute path of the plan file.
  returned: when O(output) is given
  type: str
  sample: /home/ops/job/motor_plan.json
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    spec = dict(config=dict(type="dict", required=True), discovery=dict(type="str"), previous=dict(type="dict"),
                config_root=dict(type="path", default="/etc/pymotor"), output=dict(type="path"))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_plan_job runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
