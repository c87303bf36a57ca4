# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""KV events: the endpoints the coordinator registers and whether the conductor can read an engine's events."""

from __future__ import annotations

import re


# vLLM versions: BlockStored got its `medium` field (read by the conductor at index 6) in about 0.11.0;
# the map-shaped encoding (PR 42892, merged 2026-06-09) is confirmed in 0.26.0.
KV_MEDIUM_SINCE = (0, 11, 0)


KV_MAP_CONFIRMED = (0, 26, 0)


def parse_version(text):
    """``"0.11.0rc2+ascend"`` -> ``(0, 11, 0)``; None when there is no leading number."""
    if text is None:
        return None
    match = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text))
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def kv_event_shape(batch) -> str:
    """Shape of one decoded KV-event batch payload.

    ``array``: ``[ts, [[tag, ...], ...], dp_rank]`` (what the conductor decodes); ``map``: events (or the batch)
    are maps with a ``type`` key (vLLM PR 42892); ``legacy``: array events too short for the conductor
    (no ``medium`` at index 6: vLLM < 0.11, the conductor panics); ``empty``: no event to judge; ``unknown``."""
    if isinstance(batch, dict):
        return "map"
    if not isinstance(batch, (list, tuple)) or len(batch) < 2:
        return "unknown"
    events = batch[1]
    if not isinstance(events, (list, tuple)):
        return "unknown"
    if not events:
        return "empty"
    first = events[0]
    if isinstance(first, dict):
        return "map"
    if isinstance(first, (list, tuple)) and first and isinstance(first[0], (str, bytes)):
        tag = first[0].decode() if isinstance(first[0], bytes) else first[0]
        if tag == "BlockStored" and len(first) < 7:
            return "legacy"
        return "array"
    return "unknown"


def kv_format_verdict(vllm_version=None, shapes=None) -> dict:
    """Can the dev/kv-indexer conductor read the engine's KV events?

    ``vllm_version``: the ``vllm.__version__`` of the image, or None when vLLM is absent (stand-in images).
    ``shapes``: shapes (``kv_event_shape``) of captured batches. A captured shape wins over the version.
    Returns ``{compatible: True|False|None, source, vllm_version, shape, reason}``; None = undetermined."""
    shapes = [s for s in (shapes or []) if s not in ("empty", None)]
    version = parse_version(vllm_version)
    result = {"vllm_version": vllm_version if vllm_version else None, "shape": None,
              "compatible": None, "source": None, "reason": ""}
    if shapes:
        bad = [s for s in ("map", "legacy", "unknown") if s in shapes]
        shape = bad[0] if bad else "array"
        result.update(shape=shape, source="captured event")
        if shape == "array":
            result.update(compatible=True, reason="captured KV events are array-shaped, the format the conductor decodes")
        elif shape == "map":
            result.update(compatible=False, reason=(
                "captured KV events are map-shaped (vLLM PR 42892, 2026-06): the Mooncake dev/kv-indexer conductor only "
                "decodes the positional-array format, rejects every batch ('event at index 0 is not a slice') and "
                "reconnects in a loop, so KV-cache affinity never gets data. Use a vLLM / vLLM-Ascend release from "
                "before the map switch, or a conductor that decodes map-shaped events"))
        elif shape == "legacy":
            result.update(compatible=False, reason=(
                "captured BlockStored events have fewer than 7 fields (no 'medium', vLLM < 0.11): the conductor reads "
                "field 6 and crashes. Use vLLM / vLLM-Ascend 0.11 or newer"))
        else:
            result.update(compatible=False, reason="captured KV events have a shape the conductor cannot decode")
        return result
    if version is None:
        result.update(source="none", reason=(
            "vLLM not found in the image and no KV event captured: the event format could not be checked"))
        return result
    result["source"] = "vllm version"
    if version < KV_MEDIUM_SINCE:
        result.update(compatible=False, reason=(
            f"vLLM {vllm_version} predates the 'medium' field of BlockStored (about 0.11.0): the conductor reads "
            "field 6 and crashes. Use vLLM / vLLM-Ascend 0.11 or newer"))
    elif version >= KV_MAP_CONFIRMED:
        result.update(compatible=False, reason=(
            f"vLLM {vllm_version} publishes map-shaped KV events (PR 42892, in 0.26.0 and later): the Mooncake "
            "dev/kv-indexer conductor only decodes the positional-array format, so KV-cache affinity would silently "
            "never get data. Use a vLLM / vLLM-Ascend release from before the map switch, or a conductor that "
            "decodes map-shaped events"))
    else:
        result.update(compatible=True, reason=(
            f"vLLM {vllm_version} is in the window the conductor reads (>= 0.11 with 'medium', before the map switch "
            "confirmed in 0.26); capture an event to be sure, the first release with PR 42892 is not pinned"))
    return result


def expected_kv_endpoints(plan: dict) -> list:
    """What the conductor must list once every publishing pod registered: per publishing container,
    ``{container, host, need, ranks, of}``: ``need`` (its DP ranks per pod; ``ranks``: their labels in the plan, by
    local index) of the endpoints ``of``
    (``tcp://<ip>:<event base + rank>`` for every rank of its instance). The real controller gives a pod its ranks in
    registration order (upstream instance_assembler.py), so which ``need`` of them is not known in advance; pods of
    one instance are on distinct hosts and the plan keeps other publishers' ranks off those ports."""
    return [{"container": container["name"], "host": container["host"],
             "need": len(container["dp_ranks"]), "ranks": list(container["dp_ranks"]),
             "of": [f"tcp://{container['ip']}:{events['endpoint_port'] + rank}" for rank in pool]}
            for events, container, pool in _publishers(plan)]


def kv_endpoint_ranges(plan: dict) -> list:
    """``expected_kv_endpoints`` as the readiness wait takes it, in size linear in the pods: per publishing container
    ``{container, host, need, at, first, count}``: at least ``need`` of the endpoints ``<at>:<first>`` ..
    ``<at>:<first + count - 1>`` listed (``at``: ``tcp://<ip>``, as the coordinator registers it; the ports of its
    instance's rank pool, contiguous from 0: plan/placement.py ``_rank_pool``). A list of every URL per pod grows
    with pods x instance size (131,072 URLs at 1024 A3 hosts of bench/plan_scaling's config)."""
    return [{"container": container["name"], "host": container["host"], "need": len(container["dp_ranks"]),
             "at": f"tcp://{container['ip']}", "first": events["endpoint_port"] + min(pool),
             "count": max(pool) - min(pool) + 1}
            for events, container, pool in _publishers(plan)]


def _publishers(plan: dict):
    """``(kv_events, container, rank pool)`` of every publishing container of the plan (none without KV events)."""
    events = (plan or {}).get("kv_events")
    if not events:
        return
    for container in plan.get("containers", []):
        if container.get("role") == events.get("role") and container.get("dp_ranks"):
            yield events, container, container.get("rank_pool") or container.get("dp_ranks")


def kv_endpoint_urls(plan: dict) -> list:
    """Every endpoint a publishing rank may bind (what a listener subscribes to)."""
    return [url for entry in expected_kv_endpoints(plan) for url in entry["of"]]
