# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The files of the healers (``plugin_utils/heal.py``) in the config directories of the controller and the engine
pods (an engine pod's healer watches that pod alone: script, rule and config, all hashed).

``healer_files``: the script (heal.py verbatim) and its config (the coordinator's URL, the constants): they count in
the controller's config hash (``specs.own_files``), so a new healer restarts the controller once. ``healer_instances``:
the prefill/union instances and their engines' management URLs, re-read by the healer every round and no part of any
hash, so scaling restarts nobody else. ``HEALER_BLOCK``: what the controller's ``boot.sh`` gets in front (the healer in
the background; upstream's ``controller.sh`` then runs the controller in the foreground, so the container ends when
the healer ends the controller, and Docker's restart policy starts it again)."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_heal_rules, motor_health, motor_npu_smi
from ansible_collections.pymotor.ascend.plugins.plugin_utils import heal
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.routing import routes_expected
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import service_targets, target, tls_settings

HEALER_SCRIPT = "motor_healer.py"
HEALER_CONFIG = "healer.json"
HEALER_INSTANCES = "healer_instances.json"
HEALER_RULE = "motor_health.py"  # pod_verdict, the readiness wait's rule, next to the script (heal.py imports it)
HEALER_RULES = "motor_heal_rules.py"  # the table of healing rules (heal.py imports it)
HEALER_NPU_SMI = "motor_npu_smi.py"  # npu-smi's health, read as the precheck reads it (heal.py imports it)
# in each engine pod's log directory: its NPUs' health as it read it, for its host's healer (rule npu_unhealthy)
NPU_HEALTH_FILE = "motor_npu_health.json"
HEALER_METRICS = "motor_healer.prom"  # in the controller's log directory: motor_healer_alarm (node_exporter textfile)
HEALER_BLOCK = """# healer_begin (pymotor.ascend: the healer of this container, docs/design.md of the collection)
python3 -u "$CONFIGMAP_PATH/%s" "$CONFIGMAP_PATH/%s" &
# healer_end
""" % (HEALER_SCRIPT, HEALER_CONFIG)


def _text(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"


def _controllers(plan: dict) -> list:
    """The controller containers: one, or both replicas with master/standby (each runs a healer; only the master's
    acts, ``heal.Healer.standby``, so the healer follows the master wherever it is)."""
    return [c for c in (plan or {}).get("containers") or [] if c.get("role") == "controller"]


def _own_readiness(plan: dict, controller: dict):
    """The controller replica's own /readiness (master/standby only), None otherwise."""
    if "controller" not in ((plan or {}).get("standby") or {}).get("roles", []):
        return None
    mgmt = tls_settings(plan, check_hostname=False)["mgmt"]
    return target(controller["ip"], (controller.get("port_map") or {}).get("api"), "/readiness", mgmt)


def _read(module) -> str:
    with open(module.__file__, encoding="utf-8") as handle:
        return handle.read()


def _pods(plan: dict) -> dict:
    """``{engine pod: {"instance", "role", "node_manager": target, "engines": [targets], "npus", "log_path"}}``."""
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import log_path  # noqa: PLC0415 (cycle)

    targets = service_targets(plan)
    out = {}
    for c in plan.get("containers") or []:
        if c.get("tier") == 2 and c["name"] in targets["node_managers"]:
            out[c["name"]] = {"instance": c["job_name"], "role": c["role"], "npus": list(c.get("npu_ids") or []),
                              "log_path": log_path(c),
                              "node_manager": targets["node_managers"][c["name"]],
                              "engines": [t for key, t in sorted(targets["engines"].items())
                                          if key.rsplit("/", 1)[0] == c["name"]]}
    return out


def healer_files(plan: dict) -> dict:
    """``{container: {file: text}}``: the healer's script, its rule and its config (hashed), for the controller and
    every engine pod."""
    controllers = _controllers(plan)
    if not controllers:
        return {}
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import log_path  # noqa: PLC0415 (cycle)

    code = {HEALER_SCRIPT: _read(heal), HEALER_RULE: _read(motor_health), HEALER_RULES: _read(motor_heal_rules),
            HEALER_NPU_SMI: _read(motor_npu_smi)}
    targets = service_targets(plan)
    out = {}
    for controller in controllers:
        config = dict(heal.DEFAULTS, coordinator=targets["coordinator"],
                      instances_file="%s/%s" % (controller["configmap_path"], HEALER_INSTANCES),
                      metrics_file="%s/%s" % (log_path(controller), HEALER_METRICS),
                      labels={"job": plan.get("job_id") or "", "container": controller["name"]})
        if targets.get("routes"):
            config["routes"] = targets["routes"]
        own = _own_readiness(plan, controller)
        if own:
            config["own"] = own
        out[controller["name"]] = dict(code, **{HEALER_CONFIG: _text(config)})
    pods = _pods(plan)
    for name, pod in pods.items():
        # the other pods of a multi-host instance: the pod waits while one is unknown or not started
        peers = {other: {"node_manager": p["node_manager"], "engines": p["engines"]}
                 for other, p in sorted(pods.items()) if other != name and p["instance"] == pod["instance"]}
        config = dict(heal.DEFAULTS, settle=heal.POD_SETTLE, hold=heal.POD_HOLD, pod=name,
                      node_manager=pod["node_manager"], engines=pod["engines"], peers=peers,
                      controller=targets["controller"], npus=pod["npus"],
                      npu_health_file="%s/%s" % (pod["log_path"], NPU_HEALTH_FILE))
        out[name] = dict(code, **{HEALER_CONFIG: _text(config)})
    return out


def healer_instances(plan: dict) -> dict:
    """``{controller container: {HEALER_INSTANCES: text}}``: ``{instance: {"role", "engines": [targets], "pods":
    {pod: {"node_manager", "engines"}}, "ips", "need"}}`` of every engine instance (not hashed; ``ips``, ``need``:
    where the coordinator must route it, ``routing.routes_expected``)."""
    controllers = _controllers(plan)
    if not controllers:
        return {}
    instances = {}
    where = {e["name"]: {"ips": e["ips"], "need": e["need"]} for e in routes_expected(plan)}
    for name, pod in _pods(plan).items():
        inst = instances.setdefault(pod["instance"], dict({"role": pod["role"], "engines": [], "pods": {}},
                                                          **where.get(pod["instance"], {})))
        inst["engines"] += pod["engines"]
        inst["pods"][name] = {"node_manager": pod["node_manager"], "engines": pod["engines"]}
    return {c["name"]: {HEALER_INSTANCES: _text(instances)} for c in controllers}


def with_instances(files: dict, plan: dict) -> dict:
    """``files`` (``specs.own_files``) plus the healer's instance list: what the config directories get."""
    out = {name: dict(texts) for name, texts in (files or {}).items()}
    for name, texts in healer_instances(plan).items():
        out.setdefault(name, {}).update(texts)
    return out
