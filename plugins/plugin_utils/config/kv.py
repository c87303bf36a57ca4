# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""KV-cache affinity: scheduler, KV events, the KV pool and the KV conductor, and the derived coordinator config."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.coerce import coerce_value
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    MISSING,
    describe,
    dict_or_none,
    int_in,
    is_int,
    is_number,
    str_or_none,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.schema import (
    DEFAULT_BLOCK_SIZE,
    ENDPOINT_RE,
    MOONCAKE_DEFAULT_RATIOS,
    SCHEDULER_DEPLOY_MODES,
    SCHEDULER_TYPES,
    SEGMENT_SIZE_RE,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONDUCTOR_PORT,
    ENGINE_SECTIONS,
    KV_LEASE_TTL,
    KV_POOL_METRICS_PORT,
    KV_POOL_PORT,
)


def check_scheduler(ctx, uc, mode):
    """Validate scheduler_config; return True when KV-cache-affinity scheduling is on."""
    coordinator = uc.get("motor_coordinator_config")
    coordinator = coordinator if isinstance(coordinator, dict) else {}
    base = "motor_coordinator_config.scheduler_config"
    scheduler = dict_or_none(ctx, coordinator, "scheduler_config", base) or {}
    scheduler_type = str_or_none(ctx, scheduler, "scheduler_type", base + ".scheduler_type")
    if scheduler_type is not None and scheduler_type not in SCHEDULER_TYPES:
        ctx.error(base + ".scheduler_type", "unknown scheduler_type %s" % describe(scheduler_type),
                  "use one of %s" % ", ".join(SCHEDULER_TYPES))
    deploy_mode = str_or_none(ctx, scheduler, "deploy_mode", base + ".deploy_mode")
    if deploy_mode is not None and deploy_mode not in SCHEDULER_DEPLOY_MODES:
        ctx.error(base + ".deploy_mode", "unknown deploy_mode %s" % describe(deploy_mode),
                  "use one of %s" % ", ".join(SCHEDULER_DEPLOY_MODES))
    elif (mode == "pd_hybrid" and "deploy_mode" not in scheduler
          and isinstance(coordinator.get("scheduler_config", {}), dict)):
        # PyMotor 7d15c04's deployer requires it (examples/deployer/lib/config_validator.py:142); newer ones route PD
        # hybrid by motor_deploy_config.hybrid_instances_num and their examples leave it out: fill it for both
        coordinator.setdefault("scheduler_config", scheduler)["deploy_mode"] = "single_node"
        uc.setdefault("motor_coordinator_config", coordinator)
        ctx.warn(base + ".deploy_mode", "missing; set to \"single_node\", the only value PD hybrid runs with",
                 "PyMotor 7d15c04's deployer refuses PD hybrid without it; newer PyMotor reads hybrid_instances_num")
    elif mode == "pd_hybrid" and deploy_mode != "single_node":
        ctx.error(base + ".deploy_mode", "PD hybrid needs \"single_node\", got %s" % describe(scheduler.get("deploy_mode")),
                  'set motor_coordinator_config.scheduler_config.deploy_mode to "single_node"')
    return scheduler_type == "kv_cache_affinity"


def _endpoint_port(ctx, events, key, path):
    value = events.get(key, MISSING)
    hint = 'use the form "tcp://*:<port>", e.g. "tcp://*:%d"' % (5557 if key == "endpoint" else 6667)
    if value is MISSING:
        ctx.error(path, "missing; required for kv_cache_affinity", hint)
        return None, None
    match = ENDPOINT_RE.match(value) if isinstance(value, str) else None
    if match is None:
        ctx.error(path, "%s is not of the form tcp://*:<port>" % describe(value),
                  hint + "; the coordinator splits it on '*:' and skips registration otherwise")
        return None, None
    port = int(match.group(1))
    if not 1 <= port <= 65535:
        ctx.error(path, "port %d is out of range 1..65535" % port, hint)
        return None, None
    return value, port


def _check_prefix_caching(ctx, engine_config, path):
    if engine_config.get("enable_prefix_caching", True) is False:
        ctx.error(path + ".enable_prefix_caching", "prefix caching is disabled",
                  "kv_cache_affinity routes by cached prefixes; remove it or set it to true")
    if engine_config.get("no_enable_prefix_caching") is True:
        ctx.error(path + ".no_enable_prefix_caching", "prefix caching is disabled",
                  "kv_cache_affinity routes by cached prefixes; remove it")


def check_kv_events(ctx, uc, engines):
    """Validate the KV event publisher of the prefill (or union) section for affinity."""
    role = "union" if engines.get("union") is not None else "prefill"
    if engines.get(role) is None:
        return None
    ec_path = ENGINE_SECTIONS[role] + ".engine_config"
    engine_config = uc[ENGINE_SECTIONS[role]]["engine_config"]
    _check_prefix_caching(ctx, engine_config, ec_path)
    path = ec_path + ".kv_events_config"
    example = ('add "kv-events-config": {"publisher": "zmq", "enable_kv_cache_events": true, '
               '"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:6667", "topic": "kv-events"}')
    events = dict_or_none(ctx, engine_config, "kv_events_config", path, required=True, hint=example)
    if events is None:
        return None
    if events.get("enable_kv_cache_events") is not True:
        ctx.error(path + ".enable_kv_cache_events", "must be true for kv_cache_affinity, got %s"
                  % describe(events.get("enable_kv_cache_events")), "set it to true")
    if events.get("publisher") != "zmq":
        ctx.error(path + ".publisher", "must be \"zmq\", got %s" % describe(events.get("publisher")),
                  "the conductor subscribes over ZMQ")
    endpoint, endpoint_port = _endpoint_port(ctx, events, "endpoint", path + ".endpoint")
    replay, replay_port = _endpoint_port(ctx, events, "replay_endpoint", path + ".replay_endpoint")
    topic = str_or_none(ctx, events, "topic", path + ".topic") or ""
    return {
        "summary": {"role": role, "endpoint_port": endpoint_port, "replay_port": replay_port, "topic": topic},
        "endpoint": endpoint, "replay_endpoint": replay,
        "block_size": engine_config.get("block_size", DEFAULT_BLOCK_SIZE), "model_path": engine_config.get("model"),
    }


def _check_ratio(ctx, pool, key, path):
    value = pool[key]
    if not is_number(value):
        ctx.error(path, "expected a number, got %s" % describe(value), "a ratio above 0 and at most 1, e.g. 0.9")
        return None
    if not 0 < value <= 1:
        ctx.error(path, "%r is out of range: must be above 0 and at most 1" % value, "e.g. 0.9 for the high watermark, 0.1 for eviction")
        return None
    return value


def _pool_ratios(ctx, pool, store_users):
    ratios = {}
    for key, default in MOONCAKE_DEFAULT_RATIOS.items():
        path = "kv_cache_pool_config." + key
        if key in pool:
            coerce_value(ctx, pool, key, path, "float", "mooncake_master reads it (PyMotor passes it as an env string)")
            ratios[key] = _check_ratio(ctx, pool, key, path)
        elif store_users:
            ctx.error(path, "missing; required because %s uses %s" % store_users[0],
                      "mooncake_master needs eviction_high_watermark_ratio and eviction_ratio, e.g. 0.9 and 0.1")
        else:
            ratios[key] = default
            ctx.warn(path, "missing; mooncake_master gets Mooncake's default %s" % default,
                     "no engine uses a store connector, so the pool is idle; set it explicitly, "
                     "PyMotor's deploy.py refuses the config without it")
    return ratios


def _check_pool_fields(ctx, pool):
    size = pool.get("global_segment_size")
    if size is not None and not (isinstance(size, str) and SEGMENT_SIZE_RE.match(size.strip())) \
            and not (is_int(size) and size > 0):
        ctx.error("kv_cache_pool_config.global_segment_size", "%s is not a size" % describe(size),
                  "write it like \"1GB\" or \"512MB\", or as a positive byte count")
    for key in ("metadata_server", "protocol", "device_name"):
        str_or_none(ctx, pool, key, "kv_cache_pool_config." + key)
    if "alloc_in_same_node" in pool and not isinstance(pool["alloc_in_same_node"], bool):
        ctx.error("kv_cache_pool_config.alloc_in_same_node",
                  "expected a boolean, got %s" % describe(pool["alloc_in_same_node"]), "use true or false")


def check_kv_pool(ctx, uc, engines):
    """Decide whether the KV pool (mooncake_master) runs; validate and fill its settings."""
    pool = uc.get("kv_cache_pool_config")
    pool = pool if isinstance(pool, dict) else None
    lead = engines.get("union") or engines.get("prefill")
    lead_connector = lead["transfer"]["connector"] if lead else None
    store_users = [(ENGINE_SECTIONS[role], engine["transfer"]["store_connector"]) for role, engine in engines.items()
                   if engine is not None and engine["transfer"]["store_connector"]]
    enabled = bool(pool) or (isinstance(lead_connector, str) and lead_connector.lower() == "multiconnector")
    disabled = {"enabled": False, "port": None, "metrics_port": None, "eviction_high_watermark_ratio": None,
                "eviction_ratio": None, "default_kv_lease_ttl": None}
    if not enabled:
        if store_users:
            ctx.error("kv_cache_pool_config", "missing: %s uses store connector %s, which needs the KV pool"
                      % store_users[0], "add kv_cache_pool_config with eviction_high_watermark_ratio and eviction_ratio")
        return disabled
    pool = pool if pool is not None else {}
    ratios = _pool_ratios(ctx, pool, store_users)
    if "kv_cache_pool_config" in uc:
        pool.setdefault("port", KV_POOL_PORT)
        pool.setdefault("default_kv_lease_ttl", KV_LEASE_TTL)
    coerce_value(ctx, pool, "default_kv_lease_ttl", "kv_cache_pool_config.default_kv_lease_ttl", "int",
                 "mooncake_master reads it (PyMotor passes it as an env string)")
    port = int_in(ctx, pool, "port", "kv_cache_pool_config.port", 1, 65535, default=KV_POOL_PORT)
    ttl = int_in(ctx, pool, "default_kv_lease_ttl", "kv_cache_pool_config.default_kv_lease_ttl", 1,
                 hint="milliseconds; must exceed the engines' ASCEND_CONNECT_TIMEOUT", default=KV_LEASE_TTL)
    _check_pool_fields(ctx, pool)
    return {"enabled": True, "port": port, "metrics_port": KV_POOL_METRICS_PORT,
            "eviction_high_watermark_ratio": ratios.get("eviction_high_watermark_ratio"),
            "eviction_ratio": ratios.get("eviction_ratio"), "default_kv_lease_ttl": ttl}


def check_kv_conductor(ctx, uc, affinity, kv_pool):
    """Validate kv_conductor_config (filled with the default port when affinity is on)."""
    path = "kv_conductor_config"
    if affinity and path not in uc:
        uc[path] = {}  # deploy.py fills the default port; no kvevent_instance (it would need the pool)
    section = uc.get(path)
    if not isinstance(section, dict):
        return {"enabled": False, "http_server_port": None}
    if affinity:
        section.setdefault("http_server_port", CONDUCTOR_PORT)
    low = 1 if affinity else 0
    port = int_in(ctx, section, "http_server_port", path + ".http_server_port", low, 65535,
                  hint="the conductor's HTTP port, 1..65535, default 13333")
    enabled = bool(port)
    if enabled and not affinity:
        ctx.warn(path + ".http_server_port", "the KV conductor runs but scheduler_type is not kv_cache_affinity",
                 "set motor_coordinator_config.scheduler_config.scheduler_type to kv_cache_affinity, or drop the section")
    instance = dict_or_none(ctx, section, "kvevent_instance", path + ".kvevent_instance")
    if enabled and instance and not kv_pool["enabled"]:
        ctx.error(path + ".kvevent_instance", "needs the KV pool, which is not enabled",
                  "add kv_cache_pool_config or remove kvevent_instance; kv_conductor.sh exits otherwise")
    return {"enabled": enabled, "http_server_port": port if enabled else None}


def derive_prefill_kv_event_config(ctx, uc, events, kv_conductor):
    """Fill motor_coordinator_config.prefill_kv_event_config; explicit values win, contradictions fail."""
    coordinator = uc.get("motor_coordinator_config")
    if not isinstance(coordinator, dict):
        return
    path = "motor_coordinator_config.prefill_kv_event_config"
    explicit = dict_or_none(ctx, coordinator, "prefill_kv_event_config", path)
    if explicit is None and "prefill_kv_event_config" in coordinator:
        return
    explicit = explicit or {}
    source = ENGINE_SECTIONS[events["summary"]["role"]] + ".engine_config.kv_events_config"
    for key in ("endpoint", "replay_endpoint"):
        if key in explicit and events[key] is not None and explicit[key] != events[key]:
            ctx.error("%s.%s" % (path, key), "%s contradicts %s.%s %s" % (
                describe(explicit[key]), source, key, describe(events[key])),
                "remove it: the coordinator derives it from the engine's kv-events-config")
    derived = {
        "endpoint": events["endpoint"], "replay_endpoint": events["replay_endpoint"],
        "block_size": events["block_size"], "http_server_port": kv_conductor["http_server_port"],
        "model_path": events["model_path"], "engine_type": "vLLM",
    }
    merged = dict(explicit)
    for key, value in derived.items():
        if value is not None:
            merged.setdefault(key, value)
    coordinator["prefill_kv_event_config"] = merged
