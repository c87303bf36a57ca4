# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shims of the deploy reconciliation (logic in plugin_utils/reconcile/).

One documentation file per filter: plugins/filter/<filter name>.yml (ansible-doc -t filter pymotor.ascend.<name>)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.degraded import needing
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import change_table, reconcile
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.drain import drain_requests, drained_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.not_ready import readiness_failure
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.roll_drain import drain_event


def motor_reconcile(plan, parts, existing):
    """Decide the action of every container of the job."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_reconcile: expects the output of pymotor.ascend.motor_plan")
    return reconcile(plan, parts or {}, existing or {})


motor_reconcile_drain_requests = drain_requests  # Conductor /unregister bodies for the drained containers.
motor_reconcile_drained = drained_endpoints  # Endpoints of drained containers the conductor still lists.
motor_reconcile_drain_event = drain_event  # The coordinator "del" that takes a rolled instance out of its routing.
motor_reconcile_table = change_table  # Render the changes as text.
motor_reconcile_needing = needing  # The containers that need a failed host.
motor_reconcile_not_ready = readiness_failure  # The lines of a failed readiness wait: condition, cause, fix, log tails.


class FilterModule:
    """The pymotor.ascend.motor_reconcile filters."""

    def filters(self):
        """Return the filters of this plugin."""
        return {
            "motor_reconcile": motor_reconcile,
            "motor_reconcile_drain_requests": motor_reconcile_drain_requests,
            "motor_reconcile_drained": motor_reconcile_drained,
            "motor_reconcile_drain_event": motor_reconcile_drain_event,
            "motor_reconcile_table": motor_reconcile_table,
            "motor_reconcile_not_ready": motor_reconcile_not_ready,
            "motor_reconcile_needing": motor_reconcile_needing,
        }
