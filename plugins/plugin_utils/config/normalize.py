# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Validate and normalize a PyMotor ``user_config.json`` / ``env.json`` pair (the motor_config filter).

Pure Python (no I/O, no Ansible imports). The contract (output keys, error format, paths) is described in
``docs/design.md`` ("Contract of motor_config"). Every problem is collected, then raised at once as
``MotorConfigError``.
"""

from __future__ import annotations

import copy

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    UNKNOWN_KEYS_MODES,
    Context,
    MotorConfigError,
    describe,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.deploy import (
    check_deploy,
    check_top_level,
    detect_mode,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.engines import (
    check_engine,
    check_models_agree,
    check_transfer,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.env import normalize_env, role_env
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.kv import (
    check_kv_conductor,
    check_kv_events,
    check_kv_pool,
    check_scheduler,
    derive_prefill_kv_event_config,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.modes import check_modes
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.overrides import apply_overrides
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.ports import check_ports
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.schema import VERSION
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.sglang import check_sglang_service
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.strict import check_sections
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import HARDWARE_NPUS, format_problem


def _build_output(uc, mode, deploy_info, engines, affinity, kv_events, kv_pool, kv_conductor, env, ctx):
    hardware, job_id = deploy_info[1], deploy_info[2]
    return {
        "version": VERSION,
        "mode": mode,
        "job_id": job_id,
        "hardware_type": hardware,
        "npus_per_host": HARDWARE_NPUS.get(hardware),
        "user_config": uc,
        "engines": {role: engine for role, engine in engines.items() if engine is not None},
        "affinity": affinity,
        "kv_events": kv_events,
        "kv_pool": kv_pool,
        "kv_conductor": kv_conductor,
        "env": env[0],
        "env_config": env[1],
        "overridden": dict(sorted(ctx.overridden.items())),
        "warnings": [format_problem(problem) for problem in ctx.warnings],
    }


def normalize(user_config, env_config=None, overrides=None, unknown_keys="warn", keys=None):
    """Validate and normalize a PyMotor configuration.

    :param user_config: parsed ``user_config.json`` (dict).
    :param env_config: parsed ``env.json`` (dict) or None.
    :param overrides: optional list of dicts deep-merged onto user_config first
        (dicts merge, lists and scalars replace, None deletes).
    :param unknown_keys: ``warn`` (a key far from every known one is a warning) or ``error`` (motor_unknown_keys).
    :param keys: the key lists to check against (``config/image_schema.py``: an image's, else the built-in ones).
    :returns: the normalized configuration described in docs/design.md.
    :raises MotorConfigError: listing every problem found.
    """
    overridden = {}
    ctx = Context(overridden, unknown_keys, keys)
    if unknown_keys not in UNKNOWN_KEYS_MODES:
        ctx.error("motor_unknown_keys", "unknown value %s" % describe(unknown_keys),
                  "use %s" % " or ".join(UNKNOWN_KEYS_MODES))
    merged, record = apply_overrides(ctx, user_config, overrides)
    overridden.update(record)
    if not isinstance(merged, dict):
        ctx.error("user_config", "expected an object, got %s" % describe(merged), "user_config.json is a JSON object")
        raise MotorConfigError(ctx.errors, ctx.warnings)
    uc = copy.deepcopy(merged)
    check_top_level(ctx, uc)
    check_sections(ctx, uc)
    check_modes(ctx, uc)
    deploy_info = check_deploy(ctx, uc)
    mode = detect_mode(ctx, uc, deploy_info[0])
    roles = ("union",) if mode == "pd_hybrid" else ("prefill", "decode")
    engines = {role: check_engine(ctx, uc, role, deploy_info[0], deploy_info[1]) for role in roles}
    check_models_agree(ctx, engines)
    check_transfer(ctx, uc, engines)
    check_ports(ctx, uc, engines)
    kv_pool = check_kv_pool(ctx, uc, engines)
    affinity = check_scheduler(ctx, uc, mode)
    sglang = check_sglang_service(ctx, uc, engines, affinity)
    events = check_kv_events(ctx, uc, engines) if affinity and sglang is None else None
    kv_conductor = check_kv_conductor(ctx, uc, affinity, kv_pool)
    if events is not None:
        derive_prefill_kv_event_config(ctx, uc, events, kv_conductor)
    env_config_out = normalize_env(ctx, env_config)
    lead = engines.get("union") or engines.get("prefill") or {}
    automatic = {"ENGINE_TYPE": lead.get("engine_type"), "MODEL_NAME": lead.get("served_model_name"),
                 "SERVICE_ID": deploy_info[2],
                 # PyMotor's generator: north_config.name, printed as None when unset
                 "NORTH_PLATFORM": str((uc.get("north_config") or {}).get("name")
                                       if isinstance(uc.get("north_config"), dict) else None)}
    env = role_env(ctx, env_config_out, {key: value for key, value in automatic.items() if value is not None})
    if ctx.errors:
        raise MotorConfigError(ctx.errors, ctx.warnings)
    output = _build_output(uc, mode, deploy_info, engines, affinity, events and events["summary"], kv_pool,
                           kv_conductor, (env, env_config_out), ctx)
    if sglang is not None:
        mf_store = dict(env["common"], **env_config_out.get("motor_mf_store_env", {}))
        output["env"]["mf_store"] = dict(sorted(mf_store.items()))
        output["sglang"] = sglang  # only SGLang configs carry it: the vLLM goldens stay as they are
    return output


def _idle(engine: dict) -> str:
    """`` (1 of 2 used by the engine, the rest idle but reserved)`` when the parallel sizes use fewer NPUs than the
    pods reserve, else nothing."""
    if engine.get("engine_type") == "sglang":  # its sizes are the pod's, and it warns itself (config/sglang.py)
        return ""
    try:
        used = int(engine["dp"]) * int(engine["tp"]) * int(engine["pp"])
        reserved = int(engine["pods"]) * int(engine["npus_per_pod"])
    except (KeyError, TypeError, ValueError):
        return ""
    return " (%d of %d used by the engine, the rest idle but reserved)" % (used, reserved) if used < reserved else ""


def config_summary(config: dict) -> list:
    """What validate.yml shows of a normalized configuration, one line each."""
    engines = ", ".join("%s %s x %s pod(s) x %s NPUs%s" % (role, e["count"], e["pods"], e["npus_per_pod"], _idle(e))
                        for role, e in (config.get("engines") or {}).items())
    return [
        "mode: %s" % config.get("mode"),
        "hardware: %s (%s NPUs per host)" % (config.get("hardware_type"), config.get("npus_per_host")),
        "job_id: %s" % config.get("job_id"),
        "instances: %s" % engines,
        "affinity: %s" % config.get("affinity"),
        "kv_pool: %s, kv_conductor: %s" % ((config.get("kv_pool") or {}).get("enabled"),
                                           (config.get("kv_conductor") or {}).get("enabled")),
    ]
