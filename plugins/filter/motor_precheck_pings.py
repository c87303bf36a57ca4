# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shim of the device pings of the reach precheck (logic in plugin_utils/reconcile/npu_reach.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_precheck_pings
short_description: Internal - the NPU device pings a host runs to check reachability across hosts
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - For the pods of one instance on different hosts, and prefill and decode instances on different hosts, the
    device IPs must reach each other (HCCL and the KV transfer run over the NPUs' own NICs). Returns the pings
    O(host) runs with C(hccn_tool -i <npu> -ping -g address <address>) - for each pair of hosts that must reach each
    other, the involved NPUs of the first host (by name) ping those of the second position by position, as many
    pings as the larger side has NPUs, not every pair.
  - With O(host) V(none), the pings of every engine host of the plan at once, by host. The reach step works them out
    once on the controller and each host reads its own list (not the plan and every host's discovery per host).
  - A device without an IP in the discovery is left out (the precheck's address check names it).
  - The logic lives in C(plugins/plugin_utils/reconcile/npu_reach.py); the filter does no I/O.
positional: _input, host, hostvars, discovery
options:
  _input:
    description: The deployment plan (P(pymotor.ascend.motor_plan#filter) output).
    type: dict
    required: true
  host:
    description: The host that runs the pings; V(none) for every engine host's pings, by host.
    type: str
    required: true
  hostvars:
    description: C(hostvars) - each host's discovery result (O(discovery)), whose C(npu_network) holds the device IPs.
    type: dict
    required: true
  discovery:
    description: The variable each host registered its M(pymotor.ascend.motor_host_probe) result under.
    type: str
    default: motor_service_docker
"""

EXAMPLES = r"""
- name: Ping the peer devices
  ansible.builtin.command:
    argv: [/usr/local/Ascend/driver/tools/hccn_tool, -i, "{{ item.npu }}", -ping, -g, address, "{{ item.address }}"]
  loop: "{{ hostvars['localhost'].motor_plan_result | pymotor.ascend.motor_precheck_pings(inventory_hostname, hostvars) }}"
  changed_when: false

- name: Work out every engine host's pings once (host -> list)
  ansible.builtin.set_fact:
    motor_pings: "{{ hostvars['localhost'].motor_plan_result | pymotor.ascend.motor_precheck_pings(none, hostvars) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: >-
    C([{npu, address, peer_host, peer_npu}]), the pings of O(host); with O(host) V(none) a dict of every engine
    host of the plan to its list.
  type: raw
  sample:
    - {npu: 0, address: 29.2.0.5, peer_host: npu-a2-02, peer_npu: 4}
    - {npu: 1, address: 29.2.0.6, peer_host: npu-a2-02, peer_npu: 5}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_reach import ping_list, ping_lists


def motor_precheck_pings(plan, host, hostvars, discovery="motor_service_docker"):
    """The device pings ``host`` runs for the reach precheck; with ``host`` None, every engine host's, by host."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_precheck_pings: expects the output of pymotor.ascend.motor_plan")
    networks = {}
    for name in sorted({c["host"] for c in plan["containers"]}):
        own = hostvars[name] if name in hostvars else {}
        networks[name] = (own.get(discovery) or {}).get("npu_network") or {}
    return ping_list(plan, host, networks) if host is not None else ping_lists(plan, networks)


class FilterModule:
    """The pymotor.ascend.motor_precheck_pings filter."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_precheck_pings": motor_precheck_pings}
