# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The inventory as the plan reads it: the PyMotor hosts of the groups, and each host's variables of the plan.

Pure functions over plain mappings (the action plugins hand over Ansible's ``groups`` and ``hostvars``)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTROL_GROUP, ENGINE_GROUP, Problem


def pymotor_hosts(groups: dict) -> list:
    """The engine hosts, then the control hosts not already listed, in inventory order."""
    groups = groups or {}
    return list(dict.fromkeys(list(groups.get(ENGINE_GROUP) or []) + list(groups.get(CONTROL_GROUP) or [])))


def host_view(hostvars: dict) -> dict:
    """One host's input to the plan: its address (motor_host_ip, else ansible_host, else the cached fact
    ansible_default_ipv4.address), NIC, NPU ids, reserved ports, hardware type, groups and the names of its motor_*
    variables (a misspelt one is a problem of the plan)."""
    if "motor_host_ip" in hostvars:  # set, even to null: the plan judges it
        ip = hostvars["motor_host_ip"]
    elif "ansible_host" in hostvars:
        ip = hostvars["ansible_host"]
    else:
        ip = (hostvars.get("ansible_default_ipv4") or {}).get("address")
    nic = hostvars.get("motor_nic")
    return {
        "motor_host_ip": ip,
        "motor_nic": "eth0" if nic is None else nic,
        "motor_npu_ids": hostvars.get("motor_npu_ids"),
        "motor_reserved_ports": hostvars.get("motor_reserved_ports") if "motor_reserved_ports" in hostvars else [],
        "motor_hardware_type": hostvars.get("motor_hardware_type"),
        "motor_host_labels": hostvars.get("motor_host_labels"),
        "motor_var_names": [name for name in hostvars if str(name).startswith("motor_")],
        "group_names": list(hostvars.get("group_names") or []),
    }


def no_hosts_problem() -> Problem:
    """The problem of an inventory without PyMotor hosts."""
    return Problem("hosts", "the inventory has no host in %s or %s" % (ENGINE_GROUP, CONTROL_GROUP),
                   "put the NPU servers in %s and the control machine in %s, see inventories/example/hosts.yml"
                   % (ENGINE_GROUP, CONTROL_GROUP))


def unread_hosts(hosts: list, probes: dict) -> list:
    """The hosts whose discovery did not run or did not reach the host (unreachable, or paused under pipelining: the
    result has no can_talk_to_docker). A Docker engine that does not answer is read, and left to the precheck."""
    return [h for h in hosts if "can_talk_to_docker" not in (probes.get(h) or {}) or (probes.get(h) or {}).get("unreachable")]


def unread_message(unread: list, probes: dict) -> str:
    """What deploy.yml says when hosts could not be read before planning (nothing was changed)."""
    lines = ['deploy stopped: %s did not finish "reading the containers of the job" (unreachable or failed); nothing '
             "was changed. Fix the host and re-run: the deploy converges." % ", ".join(unread)]
    for host in unread:
        probe = probes.get(host) or {}
        lines.append("%s: %s %s" % (host, str(probe.get("msg") or "unreachable")[:300],
                                    str(probe.get("module_stderr") or "")[:300]))
    return " ".join(lines)
