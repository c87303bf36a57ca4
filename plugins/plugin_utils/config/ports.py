# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The ports a user_config sets: each in range, none twice where PyMotor binds it on one host."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    describe,
    dict_or_none,
    is_int,
    join_path,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    ENGINE_SECTIONS,
    METASERVER_BASE_PORT,
    NUM_WORKERS,
    PORT_MAX,
)


def port_number(value):
    """int for ints and digit strings (PyMotor's examples write both), else None."""
    if is_int(value):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def check_port(ctx, parent, key, path, low=1, length=1, default_hint="remove the key for the default"):
    """A port (or the first of ``length`` consecutive ports) must end by 65535; absent keys are fine."""
    if not isinstance(parent, dict) or key not in parent:
        return None
    value = parent[key]
    number = port_number(value)
    high = PORT_MAX - max(length, 1) + 1
    hint = "use a port in %d..%d, or %s" % (low, high, default_hint)
    if number is None:
        ctx.error(path, "expected a port number, got %s" % describe(value), hint)
        return None
    if not low <= number <= high:
        span = " (it starts %d consecutive ports)" % length if length > 1 else ""
        ctx.error(path, "%d is out of range: must be in %d..%d%s" % (number, low, high, span), hint)
        return None
    return number


def kv_port_parent(engine_config, base):
    """(mapping holding the Mooncake kv_port, its path) as the plan reads it, or (None, None)."""
    ktc = engine_config.get("kv_transfer_config")
    if not isinstance(ktc, dict):
        return None, None
    path = base + ".kv_transfer_config"
    if str(ktc.get("kv_connector", "")).lower() == "multiconnector":
        extra = ktc.get("kv_connector_extra_config")
        connectors = extra.get("connectors") if isinstance(extra, dict) else None
        if not isinstance(connectors, list) or not connectors or not isinstance(connectors[0], dict):
            return None, None
        return connectors[0], path + ".kv_connector_extra_config.connectors[0]"
    return ktc, path


def check_ports(ctx, uc, engines):
    """Type and range of every port the plan takes from the user_config (it moves taken ports, never invalid ones)."""
    for section, keys in (("motor_controller_config", ("controller_api_port", "observability_api_port")),
                          ("motor_coordinator_config",
                           ("coordinator_api_infer_port", "coordinator_api_mgmt_port", "coordinator_obs_port"))):
        path = section + ".api_config"
        api = dict_or_none(ctx, uc.get(section) if isinstance(uc.get(section), dict) else {}, "api_config", path)
        for key in keys:
            check_port(ctx, api, key, join_path(path, key))
    coordinator = uc.get("motor_coordinator_config")
    path = "motor_coordinator_config.inference_workers_config"
    workers = dict_or_none(ctx, coordinator if isinstance(coordinator, dict) else {}, "inference_workers_config", path)
    if workers is not None:
        count = None
        if "num_workers" in workers:
            count = port_number(workers["num_workers"])
            if count is None or count < 1:
                ctx.error(path + ".num_workers", "expected a positive integer, got %s" % describe(workers["num_workers"]),
                          "the number of coordinator worker processes, default %d" % NUM_WORKERS)
                count = None
        if "worker_metaserver_base_port" in workers:
            check_port(ctx, workers, "worker_metaserver_base_port", path + ".worker_metaserver_base_port", low=0,
                       length=count or NUM_WORKERS, default_hint="0 to disable the worker metaservers")
        elif count is not None and METASERVER_BASE_PORT + count - 1 > PORT_MAX:
            ctx.error(path + ".num_workers", "%d workers need metaserver ports %d..%d, beyond %d"
                      % (count, METASERVER_BASE_PORT, METASERVER_BASE_PORT + count - 1, PORT_MAX),
                      "use fewer workers or set worker_metaserver_base_port")
    for role, engine in engines.items():
        section = uc.get(ENGINE_SECTIONS[role])
        if engine is None or not isinstance(section, dict) or not isinstance(section.get("engine_config"), dict):
            continue
        base = ENGINE_SECTIONS[role] + ".engine_config"
        engine_config = section["engine_config"]
        check_port(ctx, engine_config, "data_parallel_rpc_port", base + ".data_parallel_rpc_port")
        parent, parent_path = kv_port_parent(engine_config, base)
        check_port(ctx, parent, "kv_port", join_path(parent_path or "", "kv_port"), low=0,
                   length=engine["npus_per_pod"] or 1)
        manager = section.get("motor_nodemanger_config")
        if not isinstance(manager, dict):
            continue  # a wrong type is reported by _check_section_extras
        nm_path = ENGINE_SECTIONS[role] + ".motor_nodemanger_config"
        api = dict_or_none(ctx, manager, "api_config", nm_path + ".api_config")
        check_port(ctx, api, "node_manager_port", nm_path + ".api_config.node_manager_port")
        endpoint = dict_or_none(ctx, manager, "endpoint_config", nm_path + ".endpoint_config")
        check_port(ctx, endpoint, "base_port", nm_path + ".endpoint_config.base_port",
                   length=2 * (engine["dp_local_per_pod"] or 1))
