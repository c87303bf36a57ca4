# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Master/standby's inventory contract (issue 49, docs/ha.md): two control hosts at least and the virtual IP that
follows the master (``motor_vip``, on ``motor_vip_interface``, else each host's ``motor_nic``).

Upstream runs two replicas of the controller and of the coordinator when ``standby_config.enable_master_standby`` is
on (examples/deployer/lib/generator/infer_service.py:74-77); without Kubernetes' Services only a virtual IP can send
the node managers and the clients to the master. The mode itself stays refused (config/modes.py) until that pair and
the VIP are deployed; these problems are listed with the refusal, so an inventory is fixed in the same round.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTROL_GROUP, Problem
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import is_ip

STANDBY_SECTIONS = ("motor_controller_config", "motor_coordinator_config")


def standby_sections(user_config) -> list:
    """The sections of a user_config (as read) that turn master/standby on."""
    if not isinstance(user_config, dict):
        return []
    found = []
    for key in STANDBY_SECTIONS:
        section = user_config.get(key)
        standby = section.get("standby_config") if isinstance(section, dict) else None
        if isinstance(standby, dict) and standby.get("enable_master_standby") is True:
            found.append(key)
    return found


def standby_problems(user_config, control_hosts: list, vip, host_addresses=None, etcd_tls_dir=None) -> list:
    """The inventory's problems for master/standby: fewer than two control hosts, no ``motor_vip`` or one that is not
    a free IP address (``host_addresses``: the PyMotor hosts' own addresses, {name: address}), management TLS on,
    and (when ``etcd_tls_dir`` is given: validation, which reads the inventory) no etcd client certificate directory
    for the replicas. Empty when the mode is off."""
    sections = standby_sections(user_config)
    if not sections:
        return []
    why = "master/standby (%s) runs the controller and the coordinator on two control hosts" % ", ".join(
        key + ".standby_config.enable_master_standby" for key in sections)
    problems = []
    controls = list(dict.fromkeys(control_hosts or []))
    if len(controls) < 2:
        problems.append(Problem(
            CONTROL_GROUP, "%s; the inventory has %d (%s)" % (why, len(controls), ", ".join(controls) or "none"),
            "list at least two control hosts in %s (three for a three-member etcd)" % CONTROL_GROUP))
    deploy = user_config.get("motor_deploy_config") if isinstance(user_config.get("motor_deploy_config"), dict) else {}
    tls = deploy.get("tls_config") if isinstance(deploy.get("tls_config"), dict) else {}
    mgmt = tls.get("mgmt_tls_config") if isinstance(tls.get("mgmt_tls_config"), dict) else {}
    enabled = mgmt.get("enable_tls")
    # the same truthiness as our clients read it (operations/targets.py)
    if enabled is True or str(enabled).strip().lower() in ("true", "1", "yes", "on"):
        problems.append(Problem(
            "motor_deploy_config.tls_config.mgmt_tls_config.enable_tls",
            "%s behind HAProxy, whose health checks of /readiness speak plain HTTP (plan/vip.py): with management "
            "TLS every check fails and the virtual IP serves nothing" % why,
            "turn management TLS off for master/standby (HAProxy's TCP frontends still pass TLS of the inference "
            "port through), or turn master/standby off"))
    if etcd_tls_dir is not None and not str(etcd_tls_dir).strip():
        problems.append(Problem(
            "motor_service_etcd_tls_dir", "%s, which elect their master through etcd with mutual TLS, and no client "
            "certificate directory is set for them" % why,
            "set motor_service_etcd_tls_dir to the directory on the control hosts holding ca.crt, client.crt and an "
            "unencrypted client.key of the etcd members' CA"))
    if vip in (None, ""):
        problems.append(Problem(
            "motor_vip", "%s behind one virtual IP that follows the master (keepalived, HAProxy), and motor_vip is not "
            "set" % why,
            "set motor_vip to a free address on the control hosts' network, and motor_vip_interface to its NIC when "
            "it is not each host's motor_nic"))
    elif not is_ip(vip):
        problems.append(Problem("motor_vip", "%r is not an IP address" % (vip,),
                                "set motor_vip to a free IPv4 or IPv6 address on the control hosts' network"))
    else:
        taken = sorted(name for name, address in (host_addresses or {}).items() if str(address) == str(vip).strip())
        if taken:
            problems.append(Problem("motor_vip", "%s is the address of %s, not a free one" % (vip, ", ".join(taken)),
                                    "choose an address no host uses: keepalived moves it between the control hosts"))
    return problems
