# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""SGLang engine sections (``engine_type: "sglang"``) with SGLang's own keys, as PyMotor's SGLang path reads them.

PyMotor's SGLangConfigResolver reads ``model-path``, ``served-model-name``, ``tp-size``, ``dp-size`` and ``pp-size``
(either spelling; the normalized config spells them with underscores like every engine_config key), its
SGLangConfig passes every engine_config key to ``sglang`` as ``--key value`` and sets ``--host``, ``--port``,
``--disaggregation-mode`` itself. The deployer starts the ``mf_store`` (memfabric config store) for SGLang and gives
the coordinator the prefill's ``disaggregation_bootstrap_port``.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    check_model_path,
    describe,
    int_in,
    join_path,
    str_or_none,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    DEPLOY_KEYS,
    ENGINE_SECTIONS,
    SGLANG_BOOTSTRAP_PORT,
)

# Keys PyMotor's SGLangConfig sets itself on the command line: a value in engine_config would be passed twice.
SGLANG_PLANNED_KEYS = ("host", "port", "disaggregation_mode", "dist_init_addr", "node_rank")
# vLLM spellings that mean nothing to SGLang's parser: the hint names SGLang's key.
VLLM_TO_SGLANG = {"tensor_parallel_size": "tp-size", "data_parallel_size": "dp-size",
                  "pipeline_parallel_size": "pp-size", "gpu_memory_utilization": "mem-fraction-static"}


def _check_model(ctx, engine_config, path, weight_path):
    if "model" in engine_config and "model_path" not in engine_config:
        # PyMotor's SGLang resolver reads "model" as the model path and SGLang's parser takes --model for --model-path
        engine_config["model_path"] = engine_config.pop("model")
        ctx.warn(path + ".model", "read as model-path (SGLang's alias)", 'write "model-path"')
    model = str_or_none(ctx, engine_config, "model_path", path + ".model_path", required=True,
                        hint='SGLang reads the weights from "model-path": the absolute directory in the container')
    check_model_path(ctx, model, path + ".model_path", weight_path)
    name = str_or_none(ctx, engine_config, "served_model_name", path + ".served_model_name")
    if name is not None and not name.strip():
        ctx.error(path + ".served_model_name", "must not be empty", "the name clients send as 'model'")
    return name if name is not None else model, model


def _check_keys(ctx, engine_config, path):
    for key, sglang_key in VLLM_TO_SGLANG.items():
        if key not in engine_config:
            continue
        if key == "gpu_memory_utilization":
            why = "is vLLM's key; engine_type sglang passes it to SGLang, whose parser rejects it"
        else:  # SGLang parses the long spelling, but PyMotor's SGLang resolver sizes the engine from the short one only
            why = ("is read by SGLang but not by PyMotor's SGLang resolver (engine_type sglang), which sizes the "
                   "engine's NPUs from %s only" % sglang_key)
        ctx.error(join_path(path, key), why, 'use SGLang\'s "%s"' % sglang_key)
    for key in SGLANG_PLANNED_KEYS:
        if key in engine_config:
            ctx.warn(join_path(path, key), "set by PyMotor's SGLang path itself (host, port, disaggregation mode)",
                     "remove it")
    if "base_gpu_id" in engine_config:
        ctx.warn(join_path(path, "base_gpu_id"), "replaced by the plan: each pod's base_gpu_id is 0, the first NPU of its container (logical ids)",
                 "remove it; the plan pins the NPUs of every pod")


def check_sglang_engine(ctx, engine_config, path, role, counts, weight_path):
    """Validate an SGLang engine_config; return (served name, model path, dp, tp, pp, DP ranks per pod)."""
    pods, npus = counts
    _check_keys(ctx, engine_config, path)
    name, model = _check_model(ctx, engine_config, path, weight_path)
    sizes = [int_in(ctx, engine_config, key, join_path(path, key), 1, default=1)
             for key in ("dp_size", "tp_size", "pp_size")]
    int_in(ctx, engine_config, "disaggregation_bootstrap_port", join_path(path, "disaggregation_bootstrap_port"),
           1024, 65535, hint="the port the prefill engines bind for the decode engines, default %d"
           % SGLANG_BOOTSTRAP_PORT)
    dp, tp, pp = sizes
    if None in (dp, tp, pp, pods, npus):
        return name, model, dp, tp, pp, None
    if pods > 1:
        ctx.error("motor_deploy_config." + DEPLOY_KEYS[role][1],
                  "engine_type sglang with %d pods per instance: PyMotor's SGLang path needs dist-init-addr from a "
                  "dp_rpc_port its SGLang resolver does not read, so a multi-host SGLang instance cannot be derived"
                  % pods, "use 1 pod per instance with engine_type sglang (%s.engine_type)" % ENGINE_SECTIONS[role])
        return name, model, dp, tp, pp, None
    if engine_config.get("enable_dp_attention") is True:
        # SGLang's DP attention splits the tp-size ranks into dp-size groups: tp-size x pp-size NPUs in all
        if tp % dp:
            ctx.error(join_path(path, "dp_size"), "dp-size %d does not divide tp-size %d, which SGLang requires with "
                      "enable-dp-attention" % (dp, tp), "use a dp-size that divides tp-size")
            return name, model, dp, tp, pp, None
        product, detail = tp * pp, "tp-size x pp-size = %d x %d = %d (enable-dp-attention)" % (tp, pp, tp * pp)
    else:
        product = dp * tp * pp
        detail = "dp-size x tp-size x pp-size = %d x %d x %d = %d" % (dp, tp, pp, product)
    if product > npus:
        ctx.error(path, "%s exceeds the pod's %d NPUs" % (detail, npus),
                  "lower tp-size, dp-size or pp-size here, or raise motor_deploy_config.%s" % DEPLOY_KEYS[role][2])
        return name, model, dp, tp, pp, None
    if product < npus:
        ctx.warn(path, "%s uses fewer than the pod's %d NPUs" % (detail, npus), "idle NPUs stay reserved")
    return name, model, dp, tp, pp, dp


def check_sglang_service(ctx, uc, engines, affinity):
    """Across sections: one engine type for P and D, and no KV-cache affinity (the conductor decodes vLLM events)."""
    types = {role: engine["engine_type"] for role, engine in engines.items() if engine is not None}
    if "sglang" not in types.values():
        return None
    if len(set(types.values())) > 1:
        message = "%s differs from prefill's %s" % (describe(types.get("decode")), describe(types.get("prefill")))
        ctx.error(ENGINE_SECTIONS["decode"] + ".engine_type", message,
                  "P and D of one service use one engine_type; PyMotor's deployer reads it from the prefill section")
    if affinity:
        ctx.error("motor_coordinator_config.scheduler_config.scheduler_type",
                  "kv_cache_affinity needs the KV conductor, which decodes vLLM's KV events only; engine_type is "
                  "sglang", "use load_balance or round_robin with engine_type sglang, or engine_type vllm")
    lead = uc.get(ENGINE_SECTIONS["prefill"]) or uc.get(ENGINE_SECTIONS["union"]) or {}
    port = (lead.get("engine_config") or {}).get("disaggregation_bootstrap_port") if isinstance(lead, dict) else None
    return {"bootstrap_port": port if isinstance(port, int) and not isinstance(port, bool) else None}
