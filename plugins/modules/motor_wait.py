#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence (motor_containers builds on community.docker's GPL API client); the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wait for a sequence of PyMotor readiness conditions in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_wait
short_description: Wait until PyMotor's endpoints report ready, one condition after the other, in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Polls each check of O(checks) in order every O(interval) seconds until its condition holds, then goes on to
    the next; fails at the first check that does not hold within its own timeout, with the last answer and the
    containers it waited for (for the log tails of the caller's rescue).
  - One module run for all the waits of a deploy, where M(ansible.builtin.uri) with C(until) is one module run
    per poll.
  - Conditions - C(answers) the URL answers HTTP at all (any status); C(ready) the JSON answer has
    C("ready" true) (controller, coordinator C(/readiness)); C(status_ok) HTTP 200 with a healthy C(status)
    (node manager C(/node-manager/status)); C(endpoints) the KV conductor's C(/services) lists every endpoint
    of O(checks[].endpoints).
  - Talks to the endpoints directly (no proxy), they are the hosts' management addresses.
attributes:
  check_mode:
    support: full
    description: Read-only; polls in check mode too.
  diff_mode:
    support: none
    description: No diff is returned.
options:
  checks:
    description: The conditions to wait for, in order.
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
        choices: [answers, ready, status_ok, endpoints]
      endpoints:
        description: With C(until=endpoints), the endpoints that must all be listed.
        type: list
        elements: str
        default: []
      timeout:
        description: Seconds this check may take.
        type: int
        default: 300
      waiting_for:
        description: Roles of the containers this check depends on (returned when it fails).
        type: list
        elements: str
        default: []
  interval:
    description: Seconds between two polls of a check.
    type: float
    default: 0.5
  request_timeout:
    description: Seconds one HTTP request may take.
    type: float
    default: 5
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
checks:
  description: Per check that held, its name, the seconds it took and the number of polls.
  returned: always
  type: list
  elements: dict
check:
  description: The check that did not hold (on failure).
  returned: failure
  type: str
last_answer:
  description: The last answer of that check (HTTP status and body, shortened; on failure).
  returned: failure
  type: str
waiting_for:
  description: The C(waiting_for) of that check (on failure).
  returned: failure
  type: list
  elements: str
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.six.moves.urllib.error import HTTPError
from ansible.module_utils.urls import open_url

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import CONDITIONS, condition_met, missing_endpoints

ANSWER_LIMIT = 300


def _get(url, request_timeout):
    """(status, parsed JSON or None, text): status -1 when nothing answered."""
    try:
        response = open_url(url, method="GET", timeout=request_timeout, use_proxy=False, follow_redirects="none")
        status, raw = response.getcode(), response.read()
    except HTTPError as exc:
        status, raw = exc.code, exc.read() if hasattr(exc, "read") else b""
    except Exception as exc:  # connection refused, timeout, reset: the service is not up yet
        return -1, None, to_native(exc)
    text = to_native(raw or b"", errors="replace")
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    return status, body, text


def wait_for(check, interval, request_timeout, get=_get, clock=time.monotonic, sleep=time.sleep):
    """Poll one check until it holds or times out: (held, polls, seconds, last answer text)."""
    started = clock()
    polls = 0
    while True:
        polls += 1
        status, body, text = get(check["url"], request_timeout)
        if condition_met(check["until"], status, body, check.get("endpoints")):
            return True, polls, clock() - started, ""
        answer = "no answer (%s)" % text if status == -1 else "HTTP %s %s" % (status, text)
        if check["until"] == "endpoints" and status == 200:
            answer += "; missing %s" % ", ".join(missing_endpoints(body, check.get("endpoints")))
        if clock() - started + interval > check["timeout"]:
            return False, polls, clock() - started, answer[:ANSWER_LIMIT]
        sleep(interval)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            checks=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                url=dict(type="str", required=True),
                until=dict(type="str", required=True, choices=list(CONDITIONS)),
                endpoints=dict(type="list", elements="str", default=[]),
                timeout=dict(type="int", default=300),
                waiting_for=dict(type="list", elements="str", default=[]),
            )),
            interval=dict(type="float", default=0.5),
            request_timeout=dict(type="float", default=5),
        ),
        supports_check_mode=True,
    )
    done = []
    for check in module.params["checks"]:
        held, polls, seconds, answer = wait_for(check, module.params["interval"], module.params["request_timeout"])
        if not held:
            module.fail_json(
                msg='"%s" did not hold within %s s (%s: %s)' % (check["name"], check["timeout"], check["url"], answer),
                check=check["name"], last_answer=answer, waiting_for=check["waiting_for"], checks=done)
        done.append({"name": check["name"], "seconds": round(seconds, 2), "polls": polls})
    module.exit_json(changed=False, checks=done)


if __name__ == "__main__":
    main()
