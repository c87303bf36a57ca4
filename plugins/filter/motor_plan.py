# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shims: place every PyMotor container on hosts, NPUs and ports (logic in plugin_utils)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_plan
short_description: Plan which host, NPUs and ports every PyMotor container gets
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Takes the output of P(pymotor.ascend.motor_config#filter) and the inventory view of the hosts and returns the
    deployment plan, one structure that every later role loops over.
  - Engines go to C(motor_engine_hosts), the controller, coordinator, KV conductor and KV pool to
    C(motor_control_hosts). The pods of one instance land on distinct hosts, each pod gets a contiguous block of
    NPU ids (die pairs on 800I A3), first fit in inventory order.
  - Every TCP port a container binds is planned so that no port is bound twice on any host, none is in
    C(motor_reserved_ports) and all are in 1024..65535; each container gets its own copy of the user_config with
    its port fields rewritten.
  - "Raises an error listing every problem, one per line, formatted as <path>: <what is wrong> (<hint>)."
  - The domain logic lives in C(plugins/plugin_utils/plan/); see C(docs/design.md) for the full contract.
  - With O(previous), the current placement, scaling or reconfiguring keeps the running containers where they
    are, so that only the added or removed ones change (see O(previous)).
  - The companion filter C(pymotor.ascend.motor_plan_table) renders a plan as a text table;
    C(pymotor.ascend.motor_plan_model_dirs) lists the model directories plan entries (or a whole normalized
    config) need and C(pymotor.ascend.motor_plan_weight_dir) the weights directory of a user_config.
positional: _input, hosts, previous
options:
  _input:
    description:
      - The normalized configuration returned by P(pymotor.ascend.motor_config#filter).
    type: dict
    required: true
  hosts:
    description:
      - Mapping of inventory hostname to its variables, in inventory order.
      - Per host C(motor_host_ip) (or C(ansible_host)), C(motor_nic) (default C(eth0)), C(motor_npu_ids)
        (default all NPUs of the hardware type), C(motor_reserved_ports), C(motor_hardware_type) and C(group_names).
      - A host without C(group_names) counts as a member of both groups. V(null) values count as absent.
    type: dict
    required: true
  previous:
    description:
      - The current placement, to scale or reconfigure without moving running containers. Mapping of container
        name to C(host) (inventory hostname), C(npu_ids) and C(port_map), as in the plan's own containers
        (other keys are ignored, so the containers of the previous plan keyed by name will do).
      - An engine instance whose pods can all stay (same host, still an engine host of the hardware type, same
        NPU count, NPUs still in C(motor_npu_ids), free, contiguous, die pairs on 800I A3, pods on distinct hosts,
        no two publishing pods with the same DP ranks on a host) keeps its hosts and NPUs; those are reserved
        before the other instances are placed first fit. Otherwise the whole instance is placed as new.
      - Containers that stay on their host keep their previous ports, and the KV-event base port is kept, where
        still free, not reserved and not below the configured preferred value. An unchanged container is then
        identical in the new plan, except for the instance counts in C(motor_deploy_config).
      - Unusable or unknown entries are ignored, never an error. When the kept containers leave no room for the
        rest, the plan is built as without O(previous) and a C(previous) warning says so.
      - V(null) or an empty mapping gives the same plan as without it.
    type: dict
    required: false
    default: null
"""

EXAMPLES = r"""
- name: Build the plan
  ansible.builtin.set_fact:
    motor_plan_result: "{{ motor_normalized_config | pymotor.ascend.motor_plan(motor_plan_hosts) }}"

- name: Scale without moving the running containers (previous plan saved as JSON)
  ansible.builtin.set_fact:
    motor_plan_result: >-
      {{ motor_normalized_config | pymotor.ascend.motor_plan(motor_plan_hosts,
           previous=dict(motor_old_plan.containers | map(attribute='name') | zip(motor_old_plan.containers))) }}

- name: Print it as a table
  ansible.builtin.debug:
    msg: "{{ (motor_plan_result | pymotor.ascend.motor_plan_table).splitlines() }}"
"""

RETURN = r"""
_value:
  description:
    - The plan. C(containers) is the list of containers sorted by tier then name; each has C(name), C(host),
      C(ip), C(role), C(job_name), C(instance), C(pod), C(tier), C(npu_ids), C(devices), C(dp_ranks),
      C(rank_pool) (every DP rank the pod may get, the controller assigns them in registration order),
      C(endpoints), C(env), C(ports), C(port_map), C(user_config), C(shm_size), C(ipc_mode), C(mounts_profile),
      C(needs_weights) and C(configmap_path).
    - Also C(hosts) (per host summary), C(instances), C(controller), C(coordinator), C(kv_pool), C(kv_conductor),
      C(kv_events), C(job_id), C(mode), C(hardware_type), C(image), C(affinity) and C(warnings).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import model_dirs, plan_table, weight_dir


def motor_plan(config, hosts, previous=None):
    """Build the deployment plan (keeping the ``previous`` placement where possible); raise AnsibleFilterError."""
    try:
        return build_plan(config, hosts, previous)
    except MotorPlanError as err:
        raise AnsibleFilterError(str(err)) from err


def motor_plan_table(plan):
    """Render a plan as a fixed-width text table."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_plan_table: expects the output of pymotor.ascend.motor_plan")
    return plan_table(plan)


def motor_plan_model_dirs(source):
    """Model directories needed by the given plan entries, or named by a whole normalized config."""
    return model_dirs(source)


def motor_plan_weight_dir(user_config):
    """Host directory of the model weights of a user_config."""
    return weight_dir(user_config)


class FilterModule:
    """The pymotor.ascend.motor_plan filter and its companions."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_plan": motor_plan, "motor_plan_table": motor_plan_table,
                "motor_plan_model_dirs": motor_plan_model_dirs, "motor_plan_weight_dir": motor_plan_weight_dir}
