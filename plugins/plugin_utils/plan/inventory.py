# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The inventory as the plan reads it: the PyMotor hosts of the groups, and each host's variables of the plan.

Pure functions over plain mappings (the action plugins hand over Ansible's ``groups`` and ``hostvars``)."""

from __future__ import annotations

import ipaddress

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTROL_GROUP, ENGINE_GROUP, Problem


def pymotor_hosts(groups: dict) -> list:
    """The engine hosts, then the control hosts not already listed, in inventory order."""
    groups = groups or {}
    return list(dict.fromkeys(list(groups.get(ENGINE_GROUP) or []) + list(groups.get(CONTROL_GROUP) or [])))


def is_ip(value) -> bool:
    """Whether ``value`` is an IPv4 or IPv6 address (a DNS name is not)."""
    try:
        ipaddress.ip_address(str(value).strip())
        return True
    except ValueError:
        return False


def probed_interfaces(probe: dict) -> dict:
    """Interface name -> {ipv4, ipv6} as motor_host_probe read them ({} when the host was not read)."""
    interfaces = (probe or {}).get("interfaces")
    return interfaces if isinstance(interfaces, dict) else {}


def probed_address(probe: dict, nic) -> str | None:
    """The first IPv4 address of ``nic`` on the host as probed, else of the default route's interface, else None
    (kolla-ansible's way: the address is the interface's)."""
    interfaces = probed_interfaces(probe)
    for name in (nic, (probe or {}).get("default_interface")):
        addresses = (interfaces.get(name) or {}).get("ipv4") if name else None
        if addresses:
            return addresses[0]
    return None


def probed_npus(probe: dict) -> list | None:
    """The NPU device ids motor_host_probe read (/dev/davinciN), or None when the host was not read or has none."""
    devices = (probe or {}).get("npu_devices")
    if isinstance(devices, list) and devices and all(isinstance(d, int) and not isinstance(d, bool) for d in devices):
        return sorted(devices)
    return None


def host_view(hostvars: dict, probe: dict | None = None) -> dict:
    """One host's input to the plan: its address, NIC, NPU ids, reserved ports, hardware type, groups and the names of
    its motor_* variables (a misspelt one is a problem of the plan).

    ``probe`` is the host's motor_host_probe result (discovery), or None. The NIC is motor_nic, else the interface of
    the default route (the probe's, else the cached fact ansible_default_ipv4.interface), else eth0. The address is
    motor_host_ip, else ansible_host when it is an IP address, else the IPv4 address of that NIC on the probed host
    (else of the default route's interface), else the cached fact ansible_default_ipv4.address. A DNS name in
    ansible_host is handed on only when nothing gave an address: the plan then says motor_host_ip is needed."""
    cached = hostvars.get("ansible_default_ipv4") or {}
    nic = hostvars.get("motor_nic")
    if nic is None:
        nic = (probe or {}).get("default_interface") or cached.get("interface") or "eth0"
    view = {}
    if "motor_host_ip" in hostvars:  # set, even to null: the plan judges it
        ip = hostvars["motor_host_ip"]
    elif hostvars.get("ansible_host") not in (None, "") and is_ip(hostvars["ansible_host"]):
        ip = hostvars["ansible_host"]
    else:
        ip = probed_address(probe, nic) or cached.get("address")
        if ip in (None, "") and hostvars.get("ansible_host") not in (None, ""):
            view["ansible_host"] = hostvars["ansible_host"]
    view.update({
        "motor_host_ip": ip,
        "motor_nic": nic,
        "motor_npu_ids": hostvars.get("motor_npu_ids"),
        "motor_reserved_ports": hostvars.get("motor_reserved_ports") if "motor_reserved_ports" in hostvars else [],
        "motor_hardware_type": hostvars.get("motor_hardware_type"),
        # the NPU devices discovery read on the host (/dev/davinciN): the host's NPUs when motor_npu_ids is unset
        "motor_npu_probed": probed_npus(probe),
        "motor_host_labels": hostvars.get("motor_host_labels"),
        # master/standby's virtual IP (a group variable: the plan reads the first control host's)
        "motor_vip": hostvars.get("motor_vip"),
        "motor_var_names": [name for name in hostvars if str(name).startswith("motor_")],
        "group_names": list(hostvars.get("group_names") or []),
    })
    return view


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
