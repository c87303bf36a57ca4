# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shims of the day-2 verbs (logic in plugin_utils/operations/)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_ops
short_description: Judge the observations of a deployed PyMotor job against its plan (day-2 verify report)
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Takes the deployment plan (P(pymotor.ascend.motor_plan#filter) output) and the raw observations gathered by
    C(playbooks/verify.yml) and returns the verify report, one check per line with C(ok) and a detail.
  - The logic lives in C(plugins/plugin_utils/operations/); the filter does no I/O.
  - Companion filters in the same file, all pure functions
    C(motor_ops_verify_table(report)) renders the report as text;
    C(motor_ops_status_rows(per_host, now)) turns C(docker inspect) results per host into status rows and
    C(motor_ops_status_table(rows)) renders them;
    C(motor_ops_mask(data)) replaces every value under a secret-looking key (api_key, password, secret, token,
    private_key, TLS key paths) by C(********), C(motor_ops_mask_text(text)) does the same in free text and
    C(motor_ops_mask_document(text)) in a JSON document (else free text);
    C(motor_ops_kv_shape(batch)) classifies one decoded KV-event batch (array, map, legacy, empty, unknown) and
    C(motor_ops_kv_verdict(vllm_version, shapes)) says whether the Mooncake conductor can read those events;
    C(motor_ops_kv_endpoints(plan)) lists every KV-event endpoint a publishing DP rank may bind (any rank of its
    instance, the controller assigns them in registration order),
    C(motor_ops_status_ok(body)) says whether a node manager / engine status answer means healthy and
    C(motor_ops_http(results)) turns the results of a C(ansible.builtin.uri) loop into a dict of item key to
    status and json.
positional: _input, raw
options:
  _input:
    description:
      - The deployment plan.
    type: dict
    required: true
  raw:
    description:
      - The observations, keys C(containers), C(image_ids), C(controller), C(coordinator), C(node_managers),
        C(engines), C(services), C(inference), C(probe), C(kv_format) (see the docstring of C(verify_report)).
    type: dict
    required: true
  min_affinity:
    description:
      - Smallest fraction of shared-prefix prompts that must land on one prefill target.
    type: float
    default: 1.0
"""

EXAMPLES = r"""
- name: Judge the observations
  ansible.builtin.set_fact:
    report: "{{ motor_plan_result | pymotor.ascend.motor_ops(observations) }}"

- name: Print the report
  ansible.builtin.debug:
    msg: "{{ (report | pymotor.ascend.motor_ops_verify_table).splitlines() }}"

- name: Mask the secrets of a rendered config
  ansible.builtin.copy:
    content: "{{ user_config | pymotor.ascend.motor_ops_mask | to_nice_json }}"
    dest: /tmp/user_config.json
    mode: "0600"
"""

RETURN = r"""
_value:
  description:
    - C(job_id), C(passed) (every check ok), C(checks) (list of C(check), C(target), C(ok), C(detail)),
      C(containers) (host, container, role, state, image_ok, restarts), C(affinity) (shared_total, shared_ok,
      target, fraction, targets, longest_matched), C(kv_events) (block_stored, decode_errors, endpoints) and
      C(kv_format) (compatible, source, vllm_version, shape, reason).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import (
    expected_kv_endpoints,
    kv_endpoint_urls,
    kv_event_shape,
    kv_format_verdict,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import mask_document, mask_secrets, mask_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.status import status_rows, status_table
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.verify import http_results, status_ok, verify_report, verify_table


def motor_ops(plan, raw, min_affinity=1.0):
    """Judge the verify observations against the plan."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_ops: expects the output of pymotor.ascend.motor_plan")
    return verify_report(plan, raw or {}, float(min_affinity))


motor_ops_verify_table = verify_table  # Render a verify report as text.
motor_ops_status_rows = status_rows  # Status rows from docker inspect results per host.
motor_ops_status_table = status_table  # Render status rows as text.
motor_ops_mask = mask_secrets  # Mask the secrets of a structure.
motor_ops_mask_text = mask_text  # Mask the secrets of free text.
motor_ops_mask_document = mask_document  # Mask the secrets of a JSON document (or free text).
motor_ops_kv_shape = kv_event_shape  # Shape of one decoded KV-event batch.
motor_ops_kv_verdict = kv_format_verdict  # Can the conductor read the engine's KV events.
motor_ops_http = http_results  # A uri loop's results as {container or container/dp_rank: {status, json}}.


def motor_ops_kv_endpoints(plan, containers=None):
    """The KV-event endpoints of every publishing DP rank of the plan (only of the named containers if given)."""
    if containers is None:
        return kv_endpoint_urls(plan)
    return [url for e in expected_kv_endpoints(plan) if e["container"] in containers for url in e["of"]]


motor_ops_status_ok = status_ok  # Whether a node manager or engine /status answer means healthy.


class FilterModule:
    """The pymotor.ascend.motor_ops filters."""

    def filters(self):
        """Return the filters of this plugin."""
        return {
            "motor_ops": motor_ops,
            "motor_ops_verify_table": motor_ops_verify_table,
            "motor_ops_status_rows": motor_ops_status_rows,
            "motor_ops_status_table": motor_ops_status_table,
            "motor_ops_mask": motor_ops_mask,
            "motor_ops_mask_text": motor_ops_mask_text,
            "motor_ops_mask_document": motor_ops_mask_document,
            "motor_ops_kv_shape": motor_ops_kv_shape,
            "motor_ops_kv_verdict": motor_ops_kv_verdict,
            "motor_ops_http": motor_ops_http,
            "motor_ops_kv_endpoints": motor_ops_kv_endpoints,
            "motor_ops_status_ok": motor_ops_status_ok,
        }
