# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Master/standby in the plan (docs/ha.md): the second replica of the controller and of the coordinator, their
etcd settings, and the virtual IP that every component and our own clients use to reach the master.

Upstream runs two replicas of a role whose ``standby_config.enable_master_standby`` is on
(examples/deployer/lib/generator/infer_service.py:74-77); components find them by ``CONTROLLER_SERVICE`` /
``COORDINATOR_SERVICE`` (motor/common/utils/env.py:50-69), here ``motor_vip``, where HAProxy sends to the replica
whose ``/readiness`` answers 200 (the master). Both replicas bind the same ports on their own host's address
(``api_config.*_host`` default to POD_IP, motor/config/controller.py:44, coordinator.py:271), so HAProxy can listen
on the VIP with those ports. Each replica uses the etcd member of its own host (``etcd_host: 127.0.0.1``): a
member cut off from the majority refuses the lock, which is when that replica must stop being master.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.standby import standby_problems, standby_sections
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int, dig, ensure

# the user_config section -> the role it replicates
REPLICATED_ROLE = {"motor_controller_config": "controller", "motor_coordinator_config": "coordinator"}
ETCD_PORT = 2379  # upstream's default (motor/config/etcd.py:22) and motor_etcd_client_port's
# where the controller and the coordinator find their etcd client certificate (the deploy mounts only these)
ETCD_TLS_DIR = "/etc/pymotor/etcd-tls"
ETCD_TLS_CONFIG = {"enable_tls": True, "ca_file": ETCD_TLS_DIR + "/ca.crt", "cert_file": ETCD_TLS_DIR + "/client.crt",
                   "key_file": ETCD_TLS_DIR + "/client.key"}


def uses_etcd_tls(container: dict) -> bool:
    """True for a controller or coordinator replica the plan gave etcd_tls_config (master/standby): the only
    containers the etcd client certificate directory is mounted into."""
    section = {role: key for key, role in REPLICATED_ROLE.items()}.get(container.get("role"))
    uc = container.get("user_config") if isinstance(container.get("user_config"), dict) else {}
    return section is not None and dig(uc, section, "etcd_tls_config") == ETCD_TLS_CONFIG


class StandbyPlan:
    """The master/standby part of the Planner (mixin): ``replicated`` roles, their ``twin`` host and ``vip``."""

    def plan_standby(self, hosts):
        """Read the mode and the VIP (``motor_vip`` of the first control host, as validation reads it); record the
        inventory contract's problems (the same rule as validation: config/standby.py)."""
        self.replicated = [REPLICATED_ROLE[s] for s in standby_sections(self.user_config)]
        self.vip = None
        if not self.replicated:
            return
        controls = [h.name for h in self.control_hosts]
        first = hosts.get(controls[0]) if controls else None
        vip = first.get("motor_vip") if isinstance(first, dict) else None
        problems = standby_problems(self.user_config, controls, vip, {h.name: h.ip for h in self.hosts})
        self.problems.extend(problems)
        if not problems:
            self.vip = str(ipaddress.ip_address(str(vip).strip()))

    def twin(self, role):
        """The host of the second replica of ``role`` (None when the role has one): the second control host."""
        return self.control_hosts[1] if role in getattr(self, "replicated", ()) else None

    def replica_name(self, role):
        return self._control_name(role) + "-2"

    def replica_hosts(self, host, owner):
        """(hosts, {host: container}) that bind the ports of control container ``owner`` placed on ``host``: both
        replicas' hosts for a replicated role (the same ports on both, HAProxy's frontends use them on the VIP)."""
        for role in getattr(self, "replicated", ()):
            if owner == self._control_name(role) and self.twin(role) is not None:
                twin = self.twin(role)
                return [host, twin], {host.name: owner, twin.name: self.replica_name(role)}
        return [host], {host.name: owner}

    def service_address(self, role):
        """Where the components reach ``role``: the VIP for a replicated role, else its host's address."""
        return self.vip if role in getattr(self, "replicated", ()) else self.control[role].ip

    def etcd_port(self):
        return as_int(dig(self.user_config, "motor_controller_config", "etcd_config", "etcd_port")) or ETCD_PORT

    def add_etcd_config(self, uc):
        """etcd_config and etcd_tls_config of the replicated roles' sections in one container's user_config: the
        local member, persistence on (a new master restores the instances, instance_manager.py:134-137), mutual TLS
        (the etcd cluster serves nothing else) with an unencrypted client key, as upstream reads it
        (etcd_client.py:55-69)."""
        for section, role in REPLICATED_ROLE.items():
            if role not in getattr(self, "replicated", ()):
                continue
            etcd = ensure(uc, section, "etcd_config")
            etcd.update({"etcd_host": "127.0.0.1", "etcd_port": self.etcd_port(), "enable_etcd_persistence": True})
            ensure(uc, section, "etcd_tls_config").update(ETCD_TLS_CONFIG)
        return uc

    def standby_result(self):
        """The plan's ``standby`` entry (None when the mode is off): the VIP, the replicas of each role, and etcd."""
        if not getattr(self, "replicated", None):
            return None
        return {
            "vip": self.vip,
            "roles": list(self.replicated),
            "replicas": {role: [{"host": h.name, "ip": h.ip, "container": name}
                                for h, name in ((self.control[role], self._control_name(role)),
                                                (self.twin(role), self.replica_name(role)))]
                         for role in self.replicated},
            "etcd": {"host": "127.0.0.1", "port": self.etcd_port(), "tls_dir": ETCD_TLS_DIR},
        }
