# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The engine sections: engine type, model, parallelism, KV transfer connectors and their capability."""

from __future__ import annotations

import json
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.coerce import coerce_engine_config
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    MISSING,
    canonical_key,
    check_model_path,
    describe,
    dict_or_none,
    int_in,
    join_path,
    str_or_none,
    reject_unknown_keys,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.deploy import _check_counts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.schema import (
    CAPABILITY_BY_CONNECTOR,
    CONTRARY_KV_ROLE,
    DISPATCH_PROFILES,
    ENGINE_SECTION_KEYS,
    ENGINE_TYPES,
    EXPECTED_KV_ROLE,
    HANDOFF_CONNECTORS,
    STORE_BY_LOWER,
    STORE_CONNECTORS,
    TRIGGER_CONNECTORS,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.sglang import check_sglang_engine
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.strict import check_sglang_keys, check_vllm_keys
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_SECTIONS


def _normalize_engine_keys(ctx, engine_config, path):
    """Return engine_config with underscore keys; report conflicting spellings."""
    groups = {}
    for key in engine_config:
        groups.setdefault(canonical_key(key), []).append(key)
    result = {}
    for canonical, keys in groups.items():
        values = [engine_config[key] for key in keys]
        if any(value != values[0] for value in values[1:]):
            for key in keys:
                if "-" in key:
                    others = ", ".join("'%s'" % other for other in keys if other != key)
                    ctx.error(join_path(path, key), "conflicts with %s: the same key in another spelling with a "
                              "different value" % others, "hyphen and underscore spellings are one vLLM flag; keep one")
        result[canonical] = values[0]
    return result


def _check_engine_type(ctx, section, path):
    engine_type = str_or_none(ctx, section, "engine_type", path + ".engine_type", required=True,
                              hint='add "engine_type": "vllm"')
    if engine_type is None:
        return None
    if engine_type not in ENGINE_TYPES:
        ctx.error(path + ".engine_type", "unknown engine_type %s" % describe(engine_type),
                  "use one of %s" % ", ".join(ENGINE_TYPES))
        return None
    if engine_type not in ("vllm", "sglang"):
        ctx.warn(path + ".engine_type", "engine_type %s is not fully supported by this collection" % engine_type,
                 "vllm and sglang are tested end to end")
    return engine_type


def _check_section_extras(ctx, section, path):
    reject_unknown_keys(ctx, section, ENGINE_SECTION_KEYS, path, "engine section")
    profile = section.get("dispatch_profile")
    if profile is not None and profile not in DISPATCH_PROFILES:
        ctx.error(path + ".dispatch_profile", "unknown dispatch_profile %s" % describe(profile),
                  "use 'handoff' or 'trigger'")
    if "dispatch_capabilities" in section:
        ctx.warn(path + ".dispatch_capabilities", "internal field, PyMotor drops it", "use dispatch_profile instead")
    dict_or_none(ctx, section, "motor_nodemanger_config", path + ".motor_nodemanger_config")
    dict_or_none(ctx, section, "health_check_config", path + ".health_check_config")


def _check_model(ctx, engine_config, path, weight_path):
    name = str_or_none(ctx, engine_config, "served_model_name", path + ".served_model_name", required=True,
                       hint="the name clients send as 'model'")
    if name is not None and not name.strip():
        ctx.error(path + ".served_model_name", "must not be empty", "the name clients send as 'model'")
    model = str_or_none(ctx, engine_config, "model", path + ".model", required=True,
                        hint="absolute path of the weights inside the container")
    check_model_path(ctx, model, path + ".model", weight_path)
    return name, model


def _check_parallel(ctx, engine_config, path, pods, npus):
    sizes = {}
    for key in ("data_parallel_size", "tensor_parallel_size", "pipeline_parallel_size"):
        sizes[key] = int_in(ctx, engine_config, key, join_path(path, key), 1, default=1)
    int_in(ctx, engine_config, "block_size", join_path(path, "block_size"), 1)
    dp, tp, pp = sizes["data_parallel_size"], sizes["tensor_parallel_size"], sizes["pipeline_parallel_size"]
    if None in (dp, tp, pp, pods, npus):
        return dp, tp, pp, None
    product, capacity = dp * tp * pp, pods * npus
    detail = "data_parallel_size x tensor_parallel_size x pipeline_parallel_size = %d x %d x %d = %d" % (
        dp, tp, pp, product)
    if product > capacity:
        ctx.error(path, "%s exceeds the instance's %d pod(s) x %d NPUs = %d" % (detail, pods, npus, capacity),
                  "lower the parallel sizes or raise the pod or NPU counts")
        return dp, tp, pp, None
    if dp % pods:
        ctx.error(path + ".data_parallel_size", "%d DP ranks cannot be split evenly over %d pods" % (dp, pods),
                  "each pod hosts whole DP ranks; use a multiple of the pod count")
        return dp, tp, pp, None
    # fewer is no warning: upstream's own examples reserve more NPUs than their engines use (the user document's PD
    # hybrid config: 2 NPUs for a tp 1 engine); validate.yml's summary says how many the engines use
    return dp, tp, pp, dp // pods


def check_engine(ctx, uc, role, deploy, hardware):
    """Validate one engine section, normalize its engine_config keys; return the engine summary."""
    path = ENGINE_SECTIONS[role]
    section = uc.get(path)
    count, pods, npus = _check_counts(ctx, deploy, role, hardware)
    if not isinstance(section, dict):
        return None
    _check_section_extras(ctx, section, path)
    engine_type = _check_engine_type(ctx, section, path)
    ec_path = path + ".engine_config"
    engine_config = dict_or_none(ctx, section, "engine_config", ec_path, required=True,
                                 hint="add engine_config with served_model_name and model")
    if engine_config is None:
        return None
    engine_config = section["engine_config"] = _normalize_engine_keys(ctx, engine_config, ec_path)
    coerce_engine_config(ctx, engine_config, ec_path, engine_type)
    weight_path = (deploy or {}).get("weight_mount_path")
    if engine_type == "sglang":
        check_sglang_keys(ctx, engine_config, ec_path)
        name, model, dp, tp, pp, dp_local = check_sglang_engine(
            ctx, engine_config, ec_path, role, (pods, npus), weight_path)
    else:
        if engine_type == "vllm":
            check_vllm_keys(ctx, engine_config, ec_path)
        name, model = _check_model(ctx, engine_config, ec_path, weight_path)
        dp, tp, pp, dp_local = _check_parallel(ctx, engine_config, ec_path, pods, npus)
    if role == "decode" and "kv_events_config" in engine_config:
        ctx.warn(ec_path + ".kv_events_config", "ignored on decode instances",
                 "only prefill (or union) engines publish KV events for the conductor")
    return {
        "section": path, "count": count, "pods": pods, "npus_per_pod": npus,
        "dp": dp, "tp": tp, "pp": pp, "dp_local_per_pod": dp_local,
        "engine_type": engine_type, "served_model_name": name, "model": model,
        "transfer": {"connector": None, "store_connector": None, "capability": None, "source": None},
    }


def _connector_name(ctx, mapping, path):
    name = mapping.get("kv_connector") if isinstance(mapping, dict) else None
    if not isinstance(name, str) or not name:
        ctx.error(path + ".kv_connector", "expected a connector name, got %s" % describe(name),
                  "e.g. MooncakeLayerwiseConnector")
        return None
    return name


def _warn_kv_role(ctx, mapping, path, role):
    if isinstance(mapping, dict) and mapping.get("kv_role") == CONTRARY_KV_ROLE.get(role):
        ctx.warn(path + ".kv_role", "%s on a %s section is contrary to its role" % (mapping["kv_role"], role),
                 "engine_server replaces it with %s at start" % EXPECTED_KV_ROLE[role])


def _multi_connector(ctx, ktc, path, role):
    """Return (transport name, its path, store name) of a MultiConnector, or None if malformed."""
    extra = ktc.get("kv_connector_extra_config")
    connectors = extra.get("connectors") if isinstance(extra, dict) else None
    list_path = path + ".kv_connector_extra_config.connectors"
    if not isinstance(connectors, list) or len(connectors) < 2:
        found = "%d connector(s)" % len(connectors) if isinstance(connectors, list) else describe(connectors)
        ctx.error(list_path, "MultiConnector needs a list of at least 2 connectors, got %s" % found,
                  "connectors[0] is the P/D transport, connectors[1] the KV pool store connector")
        return None
    names = []
    for index, item in enumerate(connectors[:2]):
        item_path = "%s[%d]" % (list_path, index)
        if not isinstance(item, dict):
            ctx.error(item_path, "expected an object, got %s" % describe(item), "each connector is an object")
            return None
        names.append(_connector_name(ctx, item, item_path))
    for index, item in enumerate(connectors):
        _warn_kv_role(ctx, item, "%s[%d]" % (list_path, index), role)
    if names[1] is not None and names[1].lower() not in STORE_BY_LOWER:
        ctx.error(list_path + "[1].kv_connector", "%s is not a store connector" % json.dumps(names[1]),
                  "connectors[1] must be %s" % " or ".join(STORE_CONNECTORS))
    if None in names:
        return None
    return names[0], list_path + "[0].kv_connector", names[1]


def _classify(ctx, section, role):
    """Fill the transfer summary of a P or D section (vLLM only)."""
    path = ENGINE_SECTIONS[role] + ".engine_config.kv_transfer_config"
    ktc = section["engine_config"].get("kv_transfer_config", MISSING)
    transfer = {"connector": None, "store_connector": None, "capability": None, "source": None}
    if ktc is MISSING:
        ctx.error(path, "missing: PD separation needs a KV connector", "add kv_transfer_config, e.g. "
                  "{\"kv_connector\": \"MooncakeLayerwiseConnector\", \"kv_role\": \"%s\"}" % EXPECTED_KV_ROLE[role])
        return transfer, False
    if not isinstance(ktc, dict):
        ctx.error(path, "expected an object, got %s" % describe(ktc), "use a JSON object")
        return transfer, False
    name = _connector_name(ctx, ktc, path)
    _warn_kv_role(ctx, ktc, path, role)
    if name is None:
        return transfer, False
    transfer["connector"] = name
    judged, judged_path, source = name, path + ".kv_connector", "kv_connector"
    if name.lower() == "multiconnector":
        parts = _multi_connector(ctx, ktc, path, role)
        if parts is None:
            return transfer, False
        judged, judged_path, transfer["store_connector"] = parts
        source = "connectors[0]"
    elif name.lower() in STORE_BY_LOWER:
        transfer["store_connector"] = STORE_BY_LOWER[name.lower()]
    capability = CAPABILITY_BY_CONNECTOR.get(judged.lower())
    profile = section.get("dispatch_profile")
    if profile in DISPATCH_PROFILES:
        capability, source = profile, "dispatch_profile"
    elif capability is None:
        if profile is None:
            ctx.error(judged_path, "connector %s is not recognized; PyMotor cannot tell how P and D cooperate and "
                      "fails closed (503)" % judged,
                      "set dispatch_profile to handoff or trigger at the top level of %s, next to engine_type, or use "
                      "one of %s" % (ENGINE_SECTIONS[role], ", ".join(HANDOFF_CONNECTORS + TRIGGER_CONNECTORS)))
        return transfer, False
    transfer["capability"], transfer["source"] = capability, source
    return transfer, True


def _union_transfer(section):
    ktc = section["engine_config"].get("kv_transfer_config")
    transfer = {"connector": None, "store_connector": None, "capability": None, "source": None}
    if not isinstance(ktc, dict) or not isinstance(ktc.get("kv_connector"), str):
        return transfer
    name = ktc["kv_connector"]
    transfer["connector"] = name
    store = name
    if name.lower() == "multiconnector":
        extra = ktc.get("kv_connector_extra_config")
        connectors = extra.get("connectors") if isinstance(extra, dict) else None
        second = connectors[1] if isinstance(connectors, list) and len(connectors) > 1 else None
        store = second.get("kv_connector") if isinstance(second, dict) else None
    if isinstance(store, str) and store.lower() in STORE_BY_LOWER:
        transfer["store_connector"] = STORE_BY_LOWER[store.lower()]
    return transfer


def check_transfer(ctx, uc, engines):
    """Classify connectors; P and D must agree on the capability."""
    if engines.get("union") is not None:
        engines["union"]["transfer"] = _union_transfer(uc[ENGINE_SECTIONS["union"]])
    valid = {}
    for role in ("prefill", "decode"):
        engine = engines.get(role)
        if engine is None or engine["engine_type"] != "vllm":
            continue
        engine["transfer"], valid[role] = _classify(ctx, uc[ENGINE_SECTIONS[role]], role)
    if not (valid.get("prefill") and valid.get("decode")):
        return
    p_section, d_section = uc[ENGINE_SECTIONS["prefill"]], uc[ENGINE_SECTIONS["decode"]]
    p_profile, d_profile = p_section.get("dispatch_profile"), d_section.get("dispatch_profile")
    if p_profile is not None and d_profile is not None and p_profile != d_profile:
        ctx.error(ENGINE_SECTIONS["decode"] + ".dispatch_profile", "%s differs from prefill's %s" % (d_profile, p_profile),
                  "dispatch_profile must be equal on P and D")
        return
    p_cap = engines["prefill"]["transfer"]["capability"]
    d_transfer = engines["decode"]["transfer"]
    if p_cap != d_transfer["capability"]:
        where = (ENGINE_SECTIONS["decode"] + ".dispatch_profile" if d_transfer["source"] == "dispatch_profile"
                 else ENGINE_SECTIONS["decode"] + ".engine_config.kv_transfer_config.kv_connector")
        ctx.error(where, "decode capability %s does not match prefill's %s" % (d_transfer["capability"], p_cap),
                  "P and D must both hand off or both trigger; handoff and trigger instances cannot be mixed")


def check_models_agree(ctx, engines):
    prefill, decode = engines.get("prefill"), engines.get("decode")
    if not (prefill and decode):
        return
    for key, config_key in (("served_model_name", "served_model_name"), ("model", "model")):
        if prefill[key] is not None and decode[key] is not None and prefill[key] != decode[key]:
            ctx.warn("%s.engine_config.%s" % (ENGINE_SECTIONS["decode"], config_key),
                     "%s differs from prefill's %s" % (json.dumps(decode[key]), json.dumps(prefill[key])),
                     "P and D instances of one service normally serve the same model")
