# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The files of the controller's healer (``plugin_utils/heal.py``) in the controller's config directory.

``healer_files``: the script (heal.py verbatim) and its config (the coordinator's URL, the constants): they count in
the controller's config hash (``specs.own_files``), so a new healer restarts the controller once. ``healer_instances``:
the prefill/union instances and their engines' management URLs, re-read by the healer every round and no part of any
hash, so scaling restarts nobody else. ``HEALER_BLOCK``: what the controller's ``boot.sh`` gets in front (the healer in
the background; upstream's ``controller.sh`` then runs the controller in the foreground, so the container ends when
the healer ends the controller, and Docker's restart policy starts it again)."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils import heal
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import service_targets

HEALER_SCRIPT = "motor_healer.py"
HEALER_CONFIG = "healer.json"
HEALER_INSTANCES = "healer_instances.json"
HEALER_BLOCK = """# healer_begin (pymotor.ascend: the controller's healer, docs/design.md of the collection)
python3 -u "$CONFIGMAP_PATH/%s" "$CONFIGMAP_PATH/%s" &
# healer_end
""" % (HEALER_SCRIPT, HEALER_CONFIG)


def _text(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"


def _controller(plan: dict):
    return next((c for c in (plan or {}).get("containers") or [] if c.get("role") == "controller"), None)


def healer_files(plan: dict) -> dict:
    """``{controller container: {file: text}}``: the healer's script and config (hashed)."""
    controller = _controller(plan)
    if controller is None:
        return {}
    with open(heal.__file__, encoding="utf-8") as handle:
        script = handle.read()
    path = controller["configmap_path"]
    config = dict(heal.DEFAULTS, coordinator=service_targets(plan)["coordinator"],
                  instances_file="%s/%s" % (path, HEALER_INSTANCES))
    return {controller["name"]: {HEALER_SCRIPT: script, HEALER_CONFIG: _text(config)}}


def healer_instances(plan: dict) -> dict:
    """``{controller container: {HEALER_INSTANCES: text}}``: ``{instance: {"role", "engines": [targets]}}`` of the
    roles whose live instance makes the coordinator ready (not hashed)."""
    controller = _controller(plan)
    if controller is None:
        return {}
    engines = service_targets(plan)["engines"]
    instances = {}
    for c in plan.get("containers") or []:
        if c.get("tier") == 2 and c.get("role") in heal.READY_ROLES:
            inst = instances.setdefault(c["job_name"], {"role": c["role"], "engines": []})
            inst["engines"] += [t for key, t in sorted(engines.items()) if key.rsplit("/", 1)[0] == c["name"]]
    return {controller["name"]: {HEALER_INSTANCES: _text(instances)}}


def with_instances(files: dict, plan: dict) -> dict:
    """``files`` (``specs.own_files``) plus the healer's instance list: what the config directories get."""
    out = {name: dict(texts) for name, texts in (files or {}).items()}
    for name, texts in healer_instances(plan).items():
        out.setdefault(name, {}).update(texts)
    return out
