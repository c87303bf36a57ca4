# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""PyMotor's user_config / env.json schema as the validation knows it: versions, keys, modes, connectors."""

from __future__ import annotations

import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import DEPLOY_KEYS


VERSION = "v2.0"


ENV_VERSION = "2.0.0"


DEFAULT_DEPLOY_MODE = "infer_service_set"


DEPLOY_MODES = ("infer_service_set", "multi_deployment", "single_container")


INSTANCE_NUM_MAX = 16


SCHEDULER_TYPES = ("load_balance", "round_robin", "kv_cache_affinity")


SCHEDULER_DEPLOY_MODES = (
    "pd_separate", "single_node", "cdp_separate", "cpcd_separate",
    "pd_dual_dispatch", "pd_disaggregation_single_container",
)


ENGINE_TYPES = ("vllm", "sglang", "mindie-llm")


DISPATCH_PROFILES = ("handoff", "trigger")


# Mooncake master's own defaults, used only when no engine needs the pool (see design.md).
MOONCAKE_DEFAULT_RATIOS = {"eviction_high_watermark_ratio": 0.95, "eviction_ratio": 0.05}


DEFAULT_BLOCK_SIZE = 128


TOP_LEVEL_KEYS = (
    "version", "motor_deploy_config", "motor_controller_config", "motor_coordinator_config",
    "motor_nodemanger_config", "motor_engine_prefill_config", "motor_engine_decode_config",
    "motor_engine_union_config", "motor_engine_encode_config", "kv_cache_pool_config",
    "kv_conductor_config",
    "north_config",  # examples/deployer/lib/update_config_whitelist.py:27
)


SEPARATION_KEYS = DEPLOY_KEYS["prefill"] + DEPLOY_KEYS["decode"]


HYBRID_KEYS = DEPLOY_KEYS["union"]


DEPLOY_CONFIG_KEYS = SEPARATION_KEYS + HYBRID_KEYS + (
    "image_name", "job_id", "hardware_type", "weight_mount_path", "deploy_mode", "tls_config",
    "e_instances_num", "single_e_instance_pod_num", "e_pod_npu_num",
    "enable_pd_heterogeneous", "pd_heterogeneous_label_key", "pd_heterogeneous_prefill_label_value",
    "pd_heterogeneous_decode_label_value", "engine_topology",
)


ENGINE_SECTION_KEYS = (
    "engine_type", "engine_config", "motor_nodemanger_config", "health_check_config",
    "dispatch_profile", "dispatch_capabilities", "enable_multi_endpoints",
)


ENDPOINT_RE = re.compile(r"^tcp://\*:(\d+)$")


SEGMENT_SIZE_RE = re.compile(r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB)$", re.IGNORECASE)


ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


ENGINE_CONFIG_PATH_RE = re.compile(r"^(motor_engine_[a-z]+_config\.engine_config\.)([^.\[]+)")


HANDOFF_CONNECTORS = ("MooncakeConnectorV1", "MooncakeHybridConnector", "NixlConnector")


TRIGGER_CONNECTORS = ("MooncakeLayerwiseConnector",)


STORE_CONNECTORS = ("AscendStoreConnector", "MooncakeConnectorStoreV1")


CAPABILITY_BY_CONNECTOR = dict(
    [(name.lower(), "handoff") for name in HANDOFF_CONNECTORS]
    + [(name.lower(), "trigger") for name in TRIGGER_CONNECTORS]
)


STORE_BY_LOWER = {name.lower(): name for name in STORE_CONNECTORS}


EXPECTED_KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}


CONTRARY_KV_ROLE = {"prefill": "kv_consumer", "decode": "kv_producer"}


ENV_SECTIONS = (
    "motor_common_env", "motor_controller_env", "motor_coordinator_env",
    "motor_engine_prefill_env", "motor_engine_decode_env", "motor_engine_union_env",
    "motor_engine_encode_env", "motor_kv_cache_pool_env", "motor_kv_conductor_env",
    "motor_mf_store_env",
)


ROLE_ENV_SECTIONS = (
    ("controller", "motor_controller_env"),
    ("coordinator", "motor_coordinator_env"),
    ("prefill", "motor_engine_prefill_env"),
    ("decode", "motor_engine_decode_env"),
    ("union", "motor_engine_union_env"),
    ("kv_pool", "motor_kv_cache_pool_env"),
    ("kv_conductor", "motor_kv_conductor_env"),
)
