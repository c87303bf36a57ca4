# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The inventory's own problems, checked with the configuration's (issue 36): a broken configuration and a broken
inventory are reported in one list, not in rounds. Only the plan's host checks that need no configuration."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import HARDWARE_NPUS
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hosts import parse_hosts

# With a hardware type the configuration does not give validly, hosts without their own type are read as the type
# with the most NPUs: the NPU ids they list are then judged by the plan, once the configuration is fixed.
_WIDEST = max(HARDWARE_NPUS, key=HARDWARE_NPUS.get)


def inventory_problems(views: dict, hardware_type, discovery: bool = False) -> list:
    """The problems parse_hosts finds in the hosts' views (inventory.host_view). With discovery (deploy.yml) an address
    the inventory does not set comes from the host itself, read after validation: its absence is no problem yet."""
    problems = []
    if views:
        known = hardware_type in HARDWARE_NPUS
        parse_hosts(views, hardware_type if known else _WIDEST, problems, [], job_type_known=known)
    if discovery:
        unset = {f"hosts.{name}.motor_host_ip" for name, view in views.items() if view.get("motor_host_ip") in (None, "")}
        problems = [p for p in problems if p.path not in unset]
    return problems
