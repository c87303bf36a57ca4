# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""HCCL's host ports: every engine container its own ``HCCL_IF_BASE_PORT`` range, reserved on its host.

HCCL binds a range of host ports from ``HCCL_IF_BASE_PORT`` (default 60000) to collect its communicator's root
info. CANN's environment-variable reference (envref_07_0074, "HCCL_IF_BASE_PORT") gives 16 ports up to CANN 8.x
(60000-60015) and 32 from CANN 8.2/9.0 on (60000-60031), base in [1024, 65520]; we reserve the larger width.
PyMotor's deployer never sets it (each Kubernetes pod has its own network namespace; examples/deployer has no
HCCL_IF_BASE_PORT), so with host networking two engines on one host would both take 60000.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import PORT_MAX, PORT_MIN, Problem
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int

# HCCL's default base port and the width of its range (the larger of CANN's 16 and 32, see above).
HCCL_BASE_PORT = 60000
HCCL_PORT_RANGE = 32
HCCL_ENV = "HCCL_IF_BASE_PORT"
HCCL_LABEL = "hccl"


class HcclPorts:
    """Mixed into the Planner after PortAssignment: ``assign_hccl_ports`` runs after every other port."""

    def _hccl_preferred(self, role):
        """env.json's HCCL_IF_BASE_PORT of the role when it is a usable base, else HCCL's default."""
        env = (self.config.get("env") or {}).get(role) or {}
        value = as_int(env.get(HCCL_ENV))
        return value if value is not None and PORT_MIN <= value <= PORT_MAX - HCCL_PORT_RANGE + 1 else HCCL_BASE_PORT

    def assign_hccl_ports(self):
        """``pod["hccl"]``: the base of the pod's range. Kept pods first keep their previous base (same host, not
        below the preferred value, still free); the others get the lowest free range from the preferred value up."""
        new = []
        for pod in self.pods:
            host, name = pod["host"], pod["name"]
            preferred = self._hccl_preferred(pod["role"])
            kept = None
            if (pod["role"], pod["instance"]) in self.kept:
                kept = self._keep_port([host], self._previous_port(name, HCCL_LABEL, host), HCCL_PORT_RANGE,
                                       preferred, {host.name: name})
            if kept is None:
                new.append((pod, preferred))
            pod["hccl"] = kept
        for pod, preferred in new:
            host = pod["host"]
            port = host.alloc(preferred, HCCL_PORT_RANGE, pod["name"])
            if port is None:
                self.problems.append(Problem(f"hosts.{host.name}.motor_reserved_ports",
                                             f"no {HCCL_PORT_RANGE} free TCP ports left for {HCCL_ENV} of {pod['name']} "
                                             f"from {preferred} up to {PORT_MAX}",
                                             "reserve fewer ports, or set a lower HCCL_IF_BASE_PORT in env.json"))
                port = preferred
            pod["hccl"] = port

    @staticmethod
    def hccl_of(pod):
        """(ports as a ``range``, port_map entry, env) of a pod's HCCL range."""
        base = pod["hccl"]
        return range(base, base + HCCL_PORT_RANGE), {HCCL_LABEL: base}, {HCCL_ENV: str(base)}
