# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A re-run repairs the KV registrations a restarted conductor lost (pure, no I/O).

Upstream's coordinator registers each prefill/union DP rank with the conductor once, when the controller hands it
the instance; the controller hands it every instance again when the coordinator comes back not ready (its
EventPusher pushes ``set``, but only with a prefill instance: in PD hybrid the controller's healer restarts the
controller, which adds every instance again; docs/design.md). So when the conductor lacks ranks of engines that keep running:

- the KV watcher repairs it when it runs on (it remembers the coordinator's registrations): nothing to do but wait;
- otherwise (the watcher is new, or restarts, and remembers nothing) the coordinator restarts, and registers them.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import missing_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import WATCHER_ROLE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import expected_kv_endpoints


def repair_registrations(plan: dict, result: dict, services) -> dict | None:
    """What the conductor lacks of the ranks of the publishing containers the deploy keeps running, and the repair;
    ``services``: the conductor's ``GET /services`` answer read before the decision (None: not read). Changes
    ``result`` (motor_reconcile's) when the coordinator must restart: its row becomes ``restart``. Returns None
    when nothing is missing, else ``{missing, repair, text}``."""
    if not isinstance(services, dict) or not isinstance(services.get("services"), list):
        return None
    rows = {row["container"]: row for row in result.get("actions") or [] if row.get("action") != "remove"}
    kept = [e for e in expected_kv_endpoints(plan) if (rows.get(e["container"]) or {}).get("action") == "keep"]
    missing = missing_endpoints(services, kept)
    if not missing:
        return None
    by_role = {row["role"]: row for row in rows.values()}
    coordinator, conductor = by_role.get("coordinator"), by_role.get("kv_conductor")
    watcher = by_role.get(WATCHER_ROLE)
    if conductor is None or coordinator is None:
        return None
    if conductor["action"] != "keep" or coordinator["action"] != "keep":
        repair = "none needed: the coordinator restarts with this deploy and registers every rank again"
    elif watcher is not None and watcher["action"] == "keep":
        repair = "the KV watcher re-registers them with the coordinator's own requests (the readiness wait checks)"
    else:
        repair = "the coordinator restarts: the controller hands it every instance again and it registers them"
        coordinator.update(action="restart", mode="parallel",
                           reason="KV conductor lost registrations, no watcher remembers them")
        result.setdefault("start", {}).setdefault(coordinator["host"], []).append(coordinator["container"])
        result.setdefault("changes", []).append(coordinator)
    text = "the KV conductor lacks registrations of running DP ranks: %s; repair: %s" % ("; ".join(missing), repair)
    return {"missing": missing, "repair": repair, "text": text}
