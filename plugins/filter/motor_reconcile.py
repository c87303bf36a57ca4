# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shims of the deploy reconciliation (logic in plugin_utils/reconcile/)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_reconcile
short_description: Decide what a (re-)deploy does with every container of a PyMotor job
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Compares the plan (P(pymotor.ascend.motor_plan#filter) output) and the hash parts of every planned container
    with the containers Docker reports per host, and returns per container an action (create, recreate, start,
    keep, remove), the reason, and how it is carried out (C(first) removed before tier 0, C(drain) unregistered
    from the KV conductor then removed, C(parallel) in its tier, C(rolling) one engine instance at a time).
  - The logic lives in C(plugins/plugin_utils/reconcile/); the filter does no I/O.
  - Companion filters in the same file, all pure functions
    C(motor_reconcile_spec_digest(container)) digests a plan entry with the instance counts masked;
    C(motor_reconcile_placement(container)) is the placement label the next plan reads back;
    C(motor_reconcile_previous(existing)) turns the containers per host into the C(previous) input of
    C(motor_plan); C(motor_reconcile_drain_requests(drain, services)) lists the conductor C(/unregister) bodies
    of drained containers and C(motor_reconcile_drained(drain, services)) the endpoints still registered;
    C(motor_reconcile_table(result)) renders the changes as text;
    C(motor_reconcile_container_spec(container, result, settings)) is the M(pymotor.ascend.motor_containers)
    spec of a plan entry (volumes, labels with the config hash, no user_config);
    C(motor_reconcile_configmaps(containers, env_functions)) is what M(pymotor.ascend.motor_containers) renders
    into the config directory of each plan entry (the injected C(set_*_env) functions and the JSON files);
    C(motor_reconcile_not_ready(failed, log_results, limit)) is the message of a failed readiness wait (the
    condition, its likely cause and the fix, then at most C(limit) distinct log lines per container, each cut to
    300 characters).
positional: _input, parts, existing
options:
  _input:
    description: The plan (P(pymotor.ascend.motor_plan#filter) output) whose containers are reconciled.
    type: dict
    required: true
  parts:
    description:
      - Per planned container name, C(image) (image id), C(spec) (spec digest) and C(shared) (digest of the role
        settings every container shares).
    type: dict
    required: true
  existing:
    description:
      - Per host, the job's containers as C(community.docker.docker_host_info) lists them (C(Names), C(State),
        C(Labels)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Decide the actions
  ansible.builtin.set_fact:
    reconcile: "{{ motor_plan_result | pymotor.ascend.motor_reconcile(parts, existing) }}"

- name: Show what changes
  ansible.builtin.debug:
    msg: "{{ (reconcile | pymotor.ascend.motor_reconcile_table).splitlines() }}"
"""

RETURN = r"""
_value:
  description:
    - C(hashes) and C(parts) (the label values per container), C(actions) (container, host, role, tier, job_name,
      action, reason, mode), C(first) (host to names removed before tier 0), C(drain) (containers to unregister
      and remove), C(start) (host to names started in their tier), C(rolling) (engine instances in order, each
      with its containers and hosts) and C(changes) (the actions other than keep).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import change_table, reconcile
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.drain import drain_requests, drained_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import spec_digest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.not_ready import readiness_failure
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import placement_label, previous_placement
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps, container_spec


def motor_reconcile(plan, parts, existing):
    """Decide the action of every container of the job."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_reconcile: expects the output of pymotor.ascend.motor_plan")
    return reconcile(plan, parts or {}, existing or {})


motor_reconcile_spec_digest = spec_digest  # Digest of a plan entry, instance counts masked.
motor_reconcile_placement = placement_label  # Placement label value of a plan entry.
motor_reconcile_previous = previous_placement  # Current placement from the containers' labels, per container name.
motor_reconcile_drain_requests = drain_requests  # Conductor /unregister bodies for the drained containers.
motor_reconcile_drained = drained_endpoints  # Endpoints of drained containers the conductor still lists.
motor_reconcile_container_spec = container_spec  # The pymotor.ascend.motor_containers spec of a plan entry (labels included, user_config left out).
motor_reconcile_configmaps = configmaps  # The config directories of plan entries: injected functions and files (user_config.json, env.json).
motor_reconcile_table = change_table  # Render the changes as text.
motor_reconcile_not_ready = readiness_failure  # The lines of a failed readiness wait: condition, cause, fix, log tails.


class FilterModule:
    """The pymotor.ascend.motor_reconcile filters."""

    def filters(self):
        """Return the filters of this plugin."""
        return {
            "motor_reconcile": motor_reconcile,
            "motor_reconcile_spec_digest": motor_reconcile_spec_digest,
            "motor_reconcile_placement": motor_reconcile_placement,
            "motor_reconcile_previous": motor_reconcile_previous,
            "motor_reconcile_drain_requests": motor_reconcile_drain_requests,
            "motor_reconcile_drained": motor_reconcile_drained,
            "motor_reconcile_table": motor_reconcile_table,
            "motor_reconcile_container_spec": motor_reconcile_container_spec,
            "motor_reconcile_configmaps": motor_reconcile_configmaps,
            "motor_reconcile_not_ready": motor_reconcile_not_ready,
        }
