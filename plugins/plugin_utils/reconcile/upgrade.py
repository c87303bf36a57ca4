# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A rolling image upgrade (or rollback): what the roll waits for and what it prints (pure functions, no I/O).

An image change with the same own config recreates the control plane in its tier step and leaves the engines
running: upstream's node managers re-register with a restarted controller (``heartbeat_manager.py``
``_report_heartbeat_loop``: a 503 -> ``_reregister``; ``instance_assembler.py`` ``reregister``) and it adds their
instances to the coordinator again. The engine instances then roll one at a time (``diff.reconcile``: mode
``rolling``); before the first one stops, the whole service must serve again (``wait``), and the time from the start
of the tier steps until then is the control plane's unavailable window, printed at the end of the deploy.
"""

from __future__ import annotations

from collections import Counter

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_ROLES


def image_only(old: dict, new: dict) -> bool:
    """Whether a container's hash parts (``labels.parse_parts``) changed for a new image with the same own config
    (the shared part names the image, so it may change too)."""
    return bool(old.get("image") and new.get("image") and old["image"] != new["image"]
                and old.get("spec") == new.get("spec"))


def images_of(existing: dict) -> dict:
    """Container name -> the image it was created from (Docker's ``Image`` of the list)."""
    return {str(name)[1:]: str(item.get("Image") or "") for items in (existing or {}).values() for item in items or []
            for name in (item.get("Names") or [])[:1]}


def previous_image(existing: dict, names) -> str:
    """The image most of the containers ``names`` run."""
    images = images_of(existing)
    seen = Counter(images.get(n, "") for n in names)
    seen.pop("", None)
    return seen.most_common(1)[0][0] if seen else ""


def engine_names(result: dict) -> list:
    return [r["container"] for r in result.get("actions") or [] if r["role"] in ENGINE_ROLES]


def left_behind(result: dict, existing: dict) -> frozenset:
    """The engine containers of the roll that run another image than most of the job's engines: what a failed roll
    left behind (the broken new instance a rollback replaces). The wait before the roll leaves them out."""
    images = images_of(existing)
    usual = previous_image(existing, engine_names(result))
    return frozenset(m["name"] for inst in result.get("rolling") or [] for m in inst["containers"]
                     if images.get(m["name"], usual) != usual)


def upgrade_work(result: dict, existing: dict, image: str, readiness: list) -> dict:
    """What the roll of ``result`` (``diff.reconcile``) needs: ``control_plane``, the control-plane containers this
    deploy restarts; ``wait``, the readiness checks that must hold before the first engine instance stops (when the
    control plane restarts, else none; without the engines ``left_behind``); ``order``, the instances in roll
    order; ``previous_image`` and ``image`` (empty when the roll is no image change) and ``rollback``, what to run
    when the roll stops."""
    rolling = result.get("rolling") or []
    control = [r["container"] for r in result.get("actions") or []
               if r["role"] not in ENGINE_ROLES and r["action"] in ("create", "recreate")]
    before = previous_image(existing, engine_names(result))
    upgrade = bool(rolling) and bool(before) and before != image
    rollback = ("roll back with the same deploy command plus -e motor_image=%s (the previous image is still on every "
                "host); the instances not yet replaced still run it" % before) if upgrade else ""
    return {"control_plane": control, "wait": list(readiness) if rolling and control else [],
            "order": [inst["job_name"] for inst in rolling], "previous_image": before if upgrade else "",
            "image": image if upgrade else "", "rollback": rollback}
