# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shim: validate and normalize a PyMotor configuration (logic in plugin_utils)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_config
short_description: Validate and normalize a PyMotor user_config.json and env.json
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Validates a PyMotor / MindIE Motor C(user_config.json) (C(version) C(v2.0)) and C(env.json) on the controller,
    before any host is touched, and returns the normalized configuration.
  - Fills defaults (C(weight_mount_path), C(deploy_mode), KV pool port and lease TTL, KV conductor port),
    normalizes hyphenated C(engine_config) keys to underscores, derives the coordinator's
    C(prefill_kv_event_config) for KV-cache-affinity scheduling, classifies each P/D connector's transfer
    capability (C(handoff) or C(trigger)) and builds the per-role environment.
  - "Every problem is reported at once, one per line, formatted as C(<json.path>: <what is wrong>) followed by a hint in parentheses."
  - The domain logic lives in C(plugins/plugin_utils/config/); see C(docs/design.md) for the full contract.
positional: _input, env_config, overrides, unknown_keys
options:
  _input:
    description:
      - The parsed C(user_config.json), or its JSON text, for example read with the P(ansible.builtin.file#lookup) lookup.
    type: raw
    required: true
  env_config:
    description:
      - The parsed C(env.json), or its JSON text.
      - Omit or pass V(null) when there is no env.json.
    type: raw
  overrides:
    description:
      - Override dicts deep-merged onto the user_config, in order, before validation.
      - Dicts merge recursively, lists and scalars replace, V(null) deletes a key.
      - Problems in values that came from override N say C(set by override N).
    type: list
    elements: dict
  unknown_keys:
    description:
      - A key far from every key the built-in lists know (named with their upstream commit) is a warning (V(warn)) or
        an error (V(error)); a key close to a known one is always an error with a did-you-mean.
    type: str
    choices: [warn, error]
    default: warn
"""

EXAMPLES = r"""
- name: Validate the configuration in a directory
  ansible.builtin.set_fact:
    motor_normalized_config: >-
      {{ lookup('ansible.builtin.file', motor_config_dir ~ '/user_config.json')
         | pymotor.ascend.motor_config(lookup('ansible.builtin.file', motor_config_dir ~ '/env.json'),
                                       motor_user_config_overrides | default([])) }}

- name: Print the mode
  ansible.builtin.debug:
    msg: "{{ motor_normalized_config.mode }}"
"""

RETURN = r"""
_value:
  description:
    - The normalized configuration.
    - Keys C(version), C(mode) (C(pd_separation) or C(pd_hybrid)), C(job_id), C(hardware_type), C(npus_per_host),
      C(user_config) (the normalized user_config), C(engines) (per role C(prefill), C(decode) or C(union)),
      C(affinity), C(kv_events), C(kv_pool), C(kv_conductor), C(env) (per-role environment, string values),
      C(env_config), C(overridden) (path to override index) and C(warnings) (list of strings).
  type: dict
  sample:
    version: v2.0
    mode: pd_separation
    job_id: mindie-motor
    hardware_type: 800I_A2
    npus_per_host: 8
    engines:
      prefill:
        section: motor_engine_prefill_config
        count: 1
        pods: 1
        npus_per_pod: 4
        dp: 2
        tp: 2
        pp: 1
        dp_local_per_pod: 2
        engine_type: vllm
        served_model_name: qwen3-8B
        model: /mnt/weight/qwen3_8B
    affinity: true
    kv_events:
      role: prefill
      endpoint_port: 5557
      replay_port: 6667
      topic: kv-events
    kv_conductor:
      enabled: true
      http_server_port: 13333
    overridden: {}
    warnings: []
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError, load_json_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize


def _parse(value, name):
    """Accept a parsed dict or JSON text."""
    if isinstance(value, (str, bytes)):
        return load_json_text(value, name)
    return value


def motor_config(user_config, env_config=None, overrides=None, unknown_keys="warn"):
    """Validate and normalize a PyMotor configuration; raise AnsibleFilterError listing every problem."""
    try:
        parsed_user = _parse(user_config, "user_config.json")
        parsed_env = _parse(env_config, "env.json")
        return normalize(parsed_user, parsed_env, overrides, unknown_keys)
    except MotorConfigError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    """The pymotor.ascend.motor_config filter."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_config": motor_config}
