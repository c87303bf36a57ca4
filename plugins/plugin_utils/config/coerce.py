# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Numbers and booleans written as JSON strings, read the way PyMotor's path reads them.

PyMotor passes every engine_config value to the engine's command line as ``--key str(value)``: the engine's
argparse then reads ``"128"`` for ``--block-size`` as 128 (``type=int``), so its deployer accepts the string.
Its deployer reads the instance counts with ``int()``. The normalized config carries the typed value and a warning
says what was converted; a string the engine's parser would reject stays as it is, for the strict check to report.
"""

from __future__ import annotations

import json
import math

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import join_path

# engine_config keys (underscore spelling) per engine type and the type its argument parser gives them.
ENGINE_INT_KEYS = {
    "vllm": (
        "data_parallel_size", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size_local",
        "data_parallel_start_rank", "data_parallel_rpc_port", "block_size", "max_num_seqs",
        "max_num_batched_tokens", "seed", "max_logprobs", "prefill_context_parallel_size",
        "decode_context_parallel_size",
    ),
    "sglang": (
        "tp_size", "dp_size", "pp_size", "ep_size", "base_gpu_id", "disaggregation_bootstrap_port", "page_size",
        "chunked_prefill_size", "max_running_requests", "max_total_tokens", "context_length", "nnodes",
        "context_parallel_size", "max_prefill_tokens", "cuda_graph_max_bs", "random_seed",
    ),
}
ENGINE_FLOAT_KEYS = {
    "vllm": ("gpu_memory_utilization", "swap_space", "cpu_offload_gb"),
    "sglang": ("mem_fraction_static",),
}
# store_true / BooleanOptionalAction flags: PyMotor writes ``--flag`` for true and nothing for false.
ENGINE_BOOL_KEYS = {
    "vllm": (
        "enable_prefix_caching", "no_enable_prefix_caching", "enforce_eager", "trust_remote_code",
        "enable_expert_parallel", "enable_chunked_prefill", "disable_log_stats", "enable_log_requests",
        "disable_log_requests", "async_scheduling", "enable_sleep_mode", "disable_custom_all_reduce",
    ),
    "sglang": (
        "trust_remote_code", "enable_dp_attention", "disable_radix_cache", "disable_cuda_graph",
        "enable_cache_report", "enable_metrics", "skip_server_warmup", "enable_prefill_context_parallel",
        "disable_overlap_schedule", "enable_multi_endpoints",
    ),
}
# Values inside nested engine_config objects: vLLM validates them with pydantic (lax mode reads "true" and "5").
NESTED_BOOL_KEYS = {"kv_events_config": ("enable_kv_cache_events",)}

_BOOL_WORDS = {"true": True, "false": False}


def _read(text, kind):
    """``text`` read as ``kind`` ("int", "float", "bool") the way argparse/int() read it, else None."""
    stripped = text.strip()
    try:
        if kind == "int":
            return int(stripped, 10)
        if kind == "float":
            number = float(stripped)
            return number if math.isfinite(number) else None  # no NaN / inf
    except ValueError:
        return None
    return _BOOL_WORDS.get(stripped.lower()) if kind == "bool" else None


def coerce_value(ctx, parent, key, path, kind, how):
    """Replace a string ``parent[key]`` by its ``kind`` value with a warning; leave anything else alone."""
    if not isinstance(parent, dict) or key not in parent:
        return
    value = parent[key]
    if not isinstance(value, str):
        return
    typed = _read(value, kind)
    if typed is None:
        return
    parent[key] = typed
    shown = json.dumps(typed)
    noun = {"int": "integer", "float": "number", "bool": "boolean"}[kind]
    ctx.warn(path, "string %s read as %s %s, as %s" % (json.dumps(value, ensure_ascii=False), noun, shown, how),
             "write it as a plain JSON %s: %s" % ({"bool": "boolean"}.get(kind, "number"), shown))


def coerce_engine_config(ctx, engine_config, path, engine_type):
    """Type the known engine_config keys of ``engine_type`` (underscore spelling) in place."""
    if engine_type not in ENGINE_INT_KEYS:
        return
    how = "%s's argument parser reads it" % ("vLLM" if engine_type == "vllm" else "SGLang")
    flags = "a flag's value: PyMotor passes a JSON boolean as --flag (true) or nothing (false), a string as an argument"
    for kind, table in (("int", ENGINE_INT_KEYS), ("float", ENGINE_FLOAT_KEYS), ("bool", ENGINE_BOOL_KEYS)):
        for key in table[engine_type]:
            coerce_value(ctx, engine_config, key, join_path(path, key), kind, flags if kind == "bool" else how)
    for section, keys in NESTED_BOOL_KEYS.items():
        nested = engine_config.get(section)
        for key in keys:
            coerce_value(ctx, nested, key, join_path(join_path(path, section), key), "bool", "vLLM's config parser reads it")


def coerce_deploy_counts(ctx, deploy, keys):
    """The instance, pod and NPU counts: PyMotor's deployer reads them with ``int()``."""
    for key in keys:
        coerce_value(ctx, deploy, key, "motor_deploy_config." + key, "int", "PyMotor's deployer (int()) reads it")
