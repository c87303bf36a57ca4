# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The label codec: what a container's labels tell the next run (placement, name, hash parts)."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTAINER_LABEL, PLACEMENT_LABEL
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import canonical_json


def placement_label(container: dict) -> str:
    """The label the next plan reads back to keep the container where it is (see motor_plan ``previous``)."""
    return canonical_json({"npu_ids": container.get("npu_ids") or [], "port_map": container.get("port_map") or {}})


def container_name(docker_container: dict) -> str:
    labels = docker_container.get("Labels") or {}
    if labels.get(CONTAINER_LABEL):
        return labels[CONTAINER_LABEL]
    names = docker_container.get("Names") or [""]
    return str(names[0]).lstrip("/")


def previous_placement(existing: dict) -> dict:
    """``{host: [docker containers]}`` -> ``{name: {host, npu_ids, port_map}}`` from the placement labels.

    Unreadable labels are skipped: such a container is simply planned fresh."""
    out = {}
    for host, containers in sorted((existing or {}).items()):
        for item in containers or []:
            raw = (item.get("Labels") or {}).get(PLACEMENT_LABEL)
            if not raw:
                continue
            try:
                data = json.loads(raw)
            except (TypeError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            out[container_name(item)] = {"host": host, "npu_ids": list(data.get("npu_ids") or []),
                                         "port_map": dict(data.get("port_map") or {})}
    return out


def parse_parts(label) -> dict:
    out = {}
    for item in str(label or "").split(","):
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out
