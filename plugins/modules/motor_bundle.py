#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_bundle action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_bundle
short_description: Internal - mask the secrets of what every host read and pack it into one support archive on the controller
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Reads, on the controller, what every host of O(hosts) registered (O(read) names the variables - container logs, the
    rendered configs, npu-smi info, docker info), masks every secret-looking value (API keys, passwords, TLS keys) and
    writes C(<dest>/pymotor-logs-<job_id>-<UTC time>.tar.gz) (mode 0600; a directory per host).
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  job_id:
    description: The job id (part of the archive name).
    type: str
    required: true
  dest:
    description: Directory of the archive on the controller.
    type: path
    default: .
  config_root:
    description: Root of the config directories on the hosts (stripped from the configs' paths in the archive).
    type: path
    required: true
  hosts:
    description: The hosts whose files go into the archive.
    type: list
    elements: str
    required: true
  read:
    description: The variables each host registered, keys C(logs), C(configs), C(npu_smi), C(docker_info).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Mask and pack the gathered files of every host
  pymotor.ascend.motor_bundle:
    job_id: mindie-motor
    config_root: /etc/pymotor
    hosts: "{{ ansible_play_hosts_all }}"
    read: {logs: logs, configs: configs, npu_smi: npu_smi, docker_info: docker_info}
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The archive written.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(job_id=dict(type="str", required=True), dest=dict(type="path", default="."),
                                              config_root=dict(type="path", required=True),
                                              hosts=dict(type="list", elements="str", required=True),
                                              read=dict(type="dict", required=True)), supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_bundle runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
