#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the motor_bench action (the action plugin does the work on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_bench
short_description: Internal - replay a request trace against a deployed PyMotor job and report hit ratio, latency and load
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - Without O(reports) - replays a Mooncake-format trace (O(trace)) or the built-in shared-prefix workload through the
    coordinator's OpenAI C(/v1/completions) with streaming, at the trace's arrival times multiplied by O(time_scale),
    with prompts whose 512-token blocks are equal exactly where the trace's C(hash_ids) are (the tokenizer is measured
    through the first prefill engine's C(/tokenize)). Empties the prefill engines' prefix caches first
    (vLLM's C(POST /reset_prefix_cache), served only with C(VLLM_SERVER_DEV_MODE=1); its answers are in the
    report's C(cold_start)) when O(cold_start). Every run's prompts carry a fresh salt, so a run starts cold even
    where the engines do not serve that route. Reads
    every prefill engine's prefix-cache counters (C(vllm:prefix_cache_queries), C(vllm:prefix_cache_hits)) before,
    during and after, prints a progress line every 10 s and returns the run's report.
  - With C(tls_config) on, its https requests verify and present the files the variables C(motor_tls_ca_file),
    C(motor_tls_cert_file), C(motor_tls_key_file) and C(motor_tls_passwd_file) name on the controller (each unset one -
    the section's own path), an encrypted key opened with the password file, as P(pymotor.ascend.motor_wait#module) does.
  - With O(reports) - writes their comparison to O(dest) (JSON) and a self-contained HTML page beside it (same name,
    C(.html); inline SVG plots, nothing fetched at view time).
extends_documentation_fragment:
  - pymotor.ascend.controller_action
options:
  plan:
    description: The job's plan (C(motor_plan_result)); required to run.
    type: dict
  model:
    description: The served model name sent in each request; required to run.
    type: str
  label:
    description: Name of the run in the report (also salts its prompts); default the settings of O(scheduler), else
      the plan's C(scheduler_type).
    type: str
  trace:
    description: A Mooncake-format JSONL trace on the controller; without it the built-in shared-prefix workload.
    type: path
  requests:
    description: How many requests from the start of the trace (0 = all; the built-in workload 200).
    type: int
    default: 0
  time_scale:
    description: Arrival times are multiplied by it (0.5 = twice the rate).
    type: float
    default: 1.0
  cold_start:
    description: Empty the prefill engines' prefix caches before the run.
    type: bool
    default: true
  timeout:
    description: Seconds a request may take.
    type: float
    default: 600.0
  scheduler:
    description: The coordinator settings of this run, recorded over the plan's C(scheduler_config).
    type: dict
    default: {}
  reports:
    description: Run reports to compare and write (the first one is the baseline of the ratios).
    type: list
    elements: dict
  dest:
    description: The JSON report's path with O(reports).
    type: path
"""

EXAMPLES = r"""
- name: Replay the first 1000 requests of a trace
  pymotor.ascend.motor_bench:
    plan: "{{ motor_plan_result }}"
    model: qwen3-8B
    label: kv_cache_affinity
    trace: /data/mooncake_synthetic_trace.jsonl
    requests: 1000
  register: run

- name: Write the comparison
  pymotor.ascend.motor_bench:
    reports: ["{{ run.report }}"]
    dest: ./motor_bench_report.json
"""

RETURN = r"""
report:
  description: The run's report (scheduler, requests, failed, hit_ratio, ideal_hit_ratio, ttft_p50_s, ttft_p90_s,
    ttft_p99_s, throughput_tokens_per_s, per_instance, ...).
  returned: when it ran
  type: dict
dest:
  description: The JSON report written.
  returned: with reports
  type: str
html:
  description: The HTML report written.
  returned: with reports
  type: str
table:
  description: The comparison as text lines.
  returned: with reports
  type: list
  elements: str
summary:
  description: One entry per run (hit ratio, ideal, TTFT p50/p99 and its ratio to the first run, largest share).
  returned: with reports
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(plan=dict(type="dict"), model=dict(type="str"),
                                              label=dict(type="str"), trace=dict(type="path"),
                                              requests=dict(type="int", default=0),
                                              time_scale=dict(type="float", default=1.0),
                                              cold_start=dict(type="bool", default=True),
                                              timeout=dict(type="float", default=600.0),
                                              scheduler=dict(type="dict", default={}),
                                              reports=dict(type="list", elements="dict"), dest=dict(type="path")),
                           supports_check_mode=True)
    module.fail_json(msg="pymotor.ascend.motor_bench runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
