#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_decide action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_decide
short_description: Internal - judge every host's prechecks and decide what a deploy does (the decide phase's entry point)
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Reads, on the controller, what the discovery registered on every PyMotor host (O(discovery)) and each host's own
    values of the O(settings) variables, judges the prechecks of every host (Docker, image, NPUs and their health,
    driver, links, ports, weights, models, disk), and decides what happens to every container of the job and why
    (create, recreate, start, keep, remove; drain, rolling).
  - When the plan has a KV conductor, reads its C(GET /services) (plain http, 5 s; nothing to read on a first deploy).
    When it lacks DP ranks of running prefill/union containers the deploy keeps running, the decision says so under
    C(registrations) and repairs it - the KV watcher re-registers them when it keeps running, otherwise the
    coordinator restarts (the controller hands it every instance again and it registers them).
  - "Sets the fact C(motor_decision): C(problems), C(warnings) (what deploys anyway), C(reconcile), C(steps) (the tier
    steps, the same on every host),
    C(work) (per host what it removes first and its M(pymotor.ascend.motor_containers) run per tier step), C(readiness)
    and C(rolling) (the M(pymotor.ascend.motor_wait) checks), C(stalls) (the engine pods the readiness wait watches
    for upstream's registration race) and C(repairs) (per engine instance the runs that restart its pods),
    C(containers), C(states), C(conductor_url), C(registrations), C(job_id).
    The result is never shown (it carries the config files)."
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  plan:
    description: The plan (fact C(motor_plan_result) of M(pymotor.ascend.motor_plan_job)).
    type: dict
    required: true
  discovery:
    description: The variable every host registered its M(pymotor.ascend.motor_host_probe) result under.
    type: str
    required: true
  settings:
    description:
      - The role settings as the controller sees them, keyed by variable name (C(<role prefix><setting>), for example
        C(motor_service_log_root)); a host's own value of such a variable wins for that host.
    type: dict
    required: true
  startup_cache:
    description: Host cache of the startup scripts, one directory per image id.
    type: path
    required: true
  startup_in_image:
    description: Startup scripts directory inside the image.
    type: path
    required: true
  ready_timeout:
    description: Seconds the readiness checks of the coordinator and the conductor may take.
    type: int
    required: true
  port_timeout:
    description: Seconds until the controller port must answer.
    type: int
    required: true
  watcher_script:
    description:
      - The code of the KV registration watcher (the role file C(motor_kv_watcher.py)), written into the config
        directory of the plan's C(kv_watcher) container; it counts in that container's config hash.
    type: str
    required: true
  max_fail_percentage:
    description:
      - Hosts that could not be read at discovery or whose Docker engine does not answer, up to this share of the
        hosts in percent, are not prechecked and get no work (C(unreachable) in the decision; the deploy goes on
        without what needs them). Above it, or at 0, their precheck problems stop the deploy.
    type: float
    default: 0
"""

EXAMPLES = r"""
- name: Judge the prechecks of every host and decide what happens to every container
  pymotor.ascend.motor_decide:
    plan: "{{ motor_plan_result }}"
    discovery: motor_service_docker
    settings: "{{ motor_service_settings }}"
    startup_cache: /var/cache/pymotor/startup
    startup_in_image: /tmp/motor/examples/deployer/startup
    ready_timeout: 1800
    port_timeout: 300
    watcher_script: "{{ lookup('ansible.builtin.file', 'motor_kv_watcher.py') }}"
"""

RETURN = r"""
ansible_facts:
  description: C(motor_decision), see the description.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    spec = dict(plan=dict(type="dict", required=True), discovery=dict(type="str", required=True),
                settings=dict(type="dict", required=True), startup_cache=dict(type="path", required=True),
                startup_in_image=dict(type="path", required=True), ready_timeout=dict(type="int", required=True),
                port_timeout=dict(type="int", required=True), watcher_script=dict(type="str", required=True),
                max_fail_percentage=dict(type="float", default=0))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_decide runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
