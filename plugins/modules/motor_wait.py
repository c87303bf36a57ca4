#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence (motor_containers builds on community.docker's GPL API client); the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wait for a sequence of PyMotor readiness conditions (documentation: the action plugins/action/motor_wait.py runs it)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_wait
short_description: Wait until PyMotor's endpoints report ready, all conditions polled together, in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - One wait for all of O(checks) - every O(interval) seconds, each check that does not hold yet is polled
    (concurrently, at most O(concurrency) requests at a time, so a dead or black-holed host holds up one worker
    for O(request_timeout), not the others); a check that held is not asked again. The wait ends when every
    check holds, or fails once when a check's own timeout (counted from the start of the wait) or O(deadline)
    passes, listing every check that does not hold with its host and last answer (RV(failing)) and the roles
    they waited for (for the log tails of the caller's rescue).
  - Runs as an action on the controller (in the worker process, no module run), where M(ansible.builtin.uri)
    with C(until) is one module run per poll.
  - Conditions - C(answers) the URL answers HTTP at all (any status); C(ready) the JSON answer has
    C("ready" true) (controller, coordinator C(/readiness)); C(status_ok) HTTP 200 with a healthy C(status)
    (node manager C(/node-manager/status)); C(endpoints) the KV conductor's C(/services) lists every endpoint
    of O(checks[].endpoints); C(routes) the coordinator's C(/metrics?type=dp) (its observability port) names an
    instance of each role and hosts of O(checks[].endpoints) (upstream's only listing of the instances it routes to);
    C(idle) an engine's management C(/metrics) reports no running and no waiting request (vLLM's
    C(vllm:num_requests_running) and C(vllm:num_requests_waiting), 0 both; the drain of a rolled instance).
  - Talks to the endpoints directly from the controller (no proxy), they are the hosts' management addresses.
attributes:
  action:
    support: full
    description: Runs on the controller.
  check_mode:
    support: full
    description: Read-only; polls in check mode too.
  diff_mode:
    support: none
    description: No diff is returned.
options:
  checks:
    description: The conditions to wait for (all polled together; the order is the order of the report).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: What is waited for (used in messages).
        type: str
        required: true
      url:
        description: The URL to poll (GET).
        type: str
        required: true
      until:
        description: The condition on the answer.
        type: str
        required: true
        choices: [answers, ready, status_ok, endpoints, routes, idle]
      endpoints:
        description:
          - With C(until=endpoints), what the KV conductor must list. Each entry is an endpoint (listed) or a dict
            C(need), C(of), C(container), meaning at least C(need) of the endpoints C(of) listed (a pod of a multi-pod
            instance, whose DP ranks the controller assigns in registration order).
          - With C(until=routes), the instances the coordinator must route, each a dict C(name), C(role), C(ips)
            (the pod IPs of the instance) and C(need) (how many instances of that role have pods at those IPs).
        type: list
        elements: raw
        default: []
      timeout:
        description: Seconds (from the start of the wait) this check may take.
        type: int
        default: 300
      host:
        description: The inventory host the check talks to (named on failure); default the URL's host.
        type: str
        default: ""
      waiting_for:
        description: Roles of the containers this check depends on (returned when it fails).
        type: list
        elements: str
        default: []
      tls:
        description:
          - For an C(https) URL, the files the C(tls_config) section covering the port names; the server is
            verified against O(checks[].tls.ca_file) (hostname included) and O(checks[].tls.cert_file) /
            O(checks[].tls.key_file) are presented as the client certificate, as upstream's probe does. Omit for
            plain http.
          - The action runs on the controller, so each file is replaced by the controller's copy that the variable
            C(motor_tls_ca_file), C(motor_tls_cert_file), C(motor_tls_key_file) or C(motor_tls_passwd_file) names,
            when it is set (in every check, stall and read); unset - the path as given.
        type: dict
        suboptions: &tls_files
          ca_file:
            description: CA certificate (PEM) that signed the server certificates.
            type: str
            default: ""
          cert_file:
            description: Client certificate (PEM).
            type: str
            default: ""
          key_file:
            description: Key of the client certificate (PEM; encrypted with the password of O(checks[].tls.passwd_file)).
            type: str
            default: ""
          passwd_file:
            description:
              - File whose stripped text is the password of an encrypted O(checks[].tls.key_file), as PyMotor reads
                its C(tls_config) C(passwd_file). Empty or missing file - the key is not encrypted.
            type: str
            default: ""
  stalls:
    description:
      - Engine pods to watch while the checks are polled (every 5 s). A pod stalls when its node manager answers
        O(stalls[].node_manager) with a healthy status while none of O(stalls[].engines) answers at all, for
        O(stall_timeout) seconds in a row. That is a node manager that never got its start command (upstream's
        controller drops a node manager it cannot reach when the instance assembles, and the pod does not register
        again). The action then fails at once with RV(stalled), the engine instances to restart.
    type: list
    elements: dict
    default: []
    suboptions:
      instance:
        description: The engine instance (job name) of the pod.
        type: str
        required: true
      container:
        description: The pod's container (used in messages).
        type: str
        required: true
      node_manager:
        description: The node manager's C(/node-manager/status) target.
        type: dict
        required: true
        suboptions: &stall_target
          url:
            description: The URL (GET).
            type: str
            required: true
          tls:
            description: As O(checks[].tls).
            type: dict
            suboptions: *tls_files
      engines:
        description: The management C(/status) targets of the pod's engines.
        type: list
        elements: dict
        required: true
        suboptions: *stall_target
  stall_timeout:
    description: Seconds a pod of O(stalls) must stall before the action fails; C(0) turns the watch off.
    type: int
    default: 0
  interval:
    description: Seconds between two polls of a check.
    type: float
    default: 0.5
  progress_every:
    description:
      - Seconds between two progress lines while checks do not hold - how long it has waited, the checks that are
        ready and those that are not (with the first one's last answer), and the time left - printed to the console
        as plain lines, like the benchmark's progress.
    type: float
    default: 20
  request_timeout:
    description: Seconds one HTTP request may take.
    type: float
    default: 5
  deadline:
    description: Seconds the whole wait may take; C(0) means the longest O(checks[].timeout).
    type: int
    default: 0
  concurrency:
    description: At most this many requests at a time (checks and stall probes); C(1) polls one after the other.
    type: int
    default: 16
  reads:
    description:
      - Targets to GET once each, concurrently, before the checks (the day-2 verify reads its observations so) -
        a mapping of groups, each a mapping of names to targets with C(url) and C(tls) (as O(checks[].tls), or
        null). Their answers are RV(answers).
      - A target with C(body) is sent that body as JSON in one POST instead. When it also has C(api_key)
        (C(header_name), C(key_prefix) of the coordinator's C(api_key_config)), the request carries the variable
        C(motor_api_key) in that header; the key is read from the variables, never from the arguments.
      - A target with C(text=true) gets the text of its answer in RV(answers) too (a page that is not JSON).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Wait until the coordinator is ready
  pymotor.ascend.motor_wait:
    checks:
      - name: the coordinator reports ready
        url: http://10.0.0.1:1026/readiness
        until: ready
        timeout: 1800
        waiting_for: [coordinator, prefill, decode]
"""

RETURN = r"""
answers:
  description:
    - Per group and name of O(reads), the answer - C(status) (HTTP status, -1 when nothing answered), C(json)
      (the parsed body, {} when it is not JSON), C(error) (why nothing answered) and, for a target with C(text),
      C(text) (the body as text, when something answered).
  returned: when O(reads) is given
  type: dict
checks:
  description: Per check that held, its name, the seconds it took and the number of polls.
  returned: always
  type: list
  elements: dict
check:
  description: The first check that did not hold (on failure; one that ran out of time first).
  returned: failure
  type: str
last_answer:
  description: The last answer of that check (HTTP status and body, shortened; on failure).
  returned: failure
  type: str
stalled:
  description: The engine instances (job names) whose pods stalled (on failure because of O(stalls)).
  returned: failure
  type: list
  elements: str
waiting_for:
  description: The C(waiting_for) roles of every check that did not hold (on failure).
  returned: failure
  type: list
  elements: str
failing:
  description:
    - Every check that did not hold (on failure) - C(name), C(host), C(url), C(until), C(last_answer),
      C(timed_out) (its own time or the deadline ran out; false - it was still pending when the wait stopped),
      C(waiting_for).
  returned: failure
  type: list
  elements: dict
failing_hosts:
  description: The hosts of RV(failing), each once.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_wait import ARGUMENT_SPEC


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_wait runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
