# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Scale-in: the KV conductor registrations of removed prefill/union containers, and when they are gone."""

from __future__ import annotations


def drain_requests(drain: list, services: list) -> list:
    """The conductor ``/unregister`` bodies for the DP ranks the drained containers publish.

    ``services``: the conductor's ``GET /services`` list (Go field names: Endpoint, InstanceID, TenantID, DPRank)."""
    owned = {f"tcp://{d['ip']}:{port}" for d in drain or [] for port in d.get("ports", [])}
    out = []
    for svc in services or []:
        if not isinstance(svc, dict) or svc.get("Endpoint") not in owned:
            continue
        body = {"instance_id": svc.get("InstanceID"), "dp_rank": svc.get("DPRank", 0)}
        if svc.get("TenantID"):
            body["tenant_id"] = svc["TenantID"]
        out.append(body)
    return out


def drained_endpoints(drain: list, services: list) -> list:
    """Endpoints of the drained containers the conductor still lists (empty once the drain is complete)."""
    owned = {f"tcp://{d['ip']}:{port}" for d in drain or [] for port in d.get("ports", [])}
    return sorted(s.get("Endpoint") for s in services or [] if isinstance(s, dict) and s.get("Endpoint") in owned)
