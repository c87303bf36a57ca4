# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The keys PyMotor, the Mooncake conductor and vLLM accept, as data (names only, read from their sources).

Paths below are of PyMotor's tree (``../shared/upstream/pymotor``) unless said otherwise; the unit test
``tests/unit/plugins/plugin_utils/test_known_keys_upstream.py`` re-reads those sources when they are present and fails
when a list here drifts from them. The strict checks that use the lists are in ``config/strict.py``.
"""

from __future__ import annotations

# Where each list was read (with its commit), and who may read a key the list lacks: named in the message about a key
# far from every known one, a warning unless motor_unknown_keys=error (config/context.py: unknown_key).
PYMOTOR = ("PyMotor 7d15c04", "a newer PyMotor")  # ../shared/upstream/pymotor, master 7d15c04
VLLM = ("vLLM 99d7eb5d", "the image's vLLM")  # vllm-project/vllm at 99d7eb5d (see VLLM_ENGINE_ARGS)
CONDUCTOR = ("Mooncake conductor 3d88bf917", "a newer conductor")  # ../shared/upstream/mooncake, dev/kv-indexer
MOONCAKE_STORE = ("the Mooncake store keys of PyMotor 7d15c04's examples", "the image's Mooncake")

# --------------------------------------------------------------------------------------------------
# PyMotor's config dataclasses: the fields each accepts (dataclass fields, without ``field(init=False)``).
# PyMotor's loaders copy a JSON key only when the object has that attribute (coordinator.py:403,
# controller.py:186, node_manager.py:366): any other key is dropped without a word.
CLASS_FIELDS = {
    # motor/config/log_config.py:17
    "log_config.LoggingConfig": (
        "log_level", "log_max_line_length", "log_format", "log_date_format", "host_log_dir",
        "log_rotation_size", "log_rotation_count", "log_compress", "log_compress_level",
        "log_max_total_size", "log_cleanup_interval",
    ),
    # motor/config/tls_config.py:17
    "tls_config.TLSConfig": (
        "enable_tls", "ca_file", "cert_file", "key_file", "passwd_file", "crl_file",
    ),
    # motor/config/standby.py:19
    "standby.StandbyConfig": (
        "enable_master_standby", "master_standby_check_interval", "master_lock_ttl",
        "master_lock_retry_interval", "master_lock_max_failures", "master_lock_key",
    ),
    # motor/config/etcd.py:17
    "etcd.EtcdConfig": (
        "etcd_host", "etcd_port", "etcd_timeout", "enable_etcd_persistence",
    ),
    # motor/config/controller.py:40
    "controller.ApiConfig": (
        "controller_api_host", "controller_api_dns", "controller_api_port", "observability_api_port",
    ),
    # motor/config/controller.py:51
    "controller.ObservabilityConfig": (
        "observability_enable", "metrics_ttl",
    ),
    # motor/config/controller.py:61
    "controller.InstanceConfig": (
        "instance_assemble_timeout", "instance_assembler_check_interval",
        "instance_assembler_cmd_send_interval", "instance_manager_check_interval",
        "instance_heartbeat_timeout", "instance_expired_timeout", "send_cmd_retry_times",
    ),
    # motor/config/controller.py:83
    "controller.EventPusherConfig": (
        "event_consumer_sleep_interval", "coordinator_heartbeat_interval",
    ),
    # motor/config/controller.py:96
    "controller.FaultToleranceConfig": (
        "enable_fault_tolerance", "strategy_center_check_interval", "configmap_namespace",
        "configmap_prefix", "k8s_cert_path", "enable_scale_p2d", "enable_token_reinference",
    ),
    # motor/config/coordinator.py:127
    "coordinator.SchedulerConfig": (
        "deploy_mode", "scheduler_type", "endpoint_instance_score_weight", "kv_affinity_mode",
        "kv_affinity_load_weight", "kv_affinity_overlap_credit", "kv_affinity_prefill_load_scale",
        "kv_affinity_load_gate_topn",
    ),
    # motor/config/coordinator.py:152
    "coordinator.PrometheusMetricsConfig": (
        "reuse_time", "pool_metrics_enable", "pool_metrics_endpoint",
    ),
    # motor/config/coordinator.py:161
    "coordinator.ExceptionConfig": (
        "max_retry", "recompute_enabled", "transport_max_retry", "recompute_max_retry", "retry_delay",
        "first_token_timeout", "infer_timeout",
    ),
    # motor/config/coordinator.py:185
    "coordinator.TimeoutConfig": (
        "request_timeout", "connection_timeout", "read_timeout", "write_timeout", "keep_alive_timeout",
    ),
    # motor/config/coordinator.py:194
    "coordinator.APIKeyConfig": (
        "enable_api_key", "valid_keys", "header_name", "key_prefix", "skip_paths", "encryption_algorithm",
    ),
    # motor/config/coordinator.py:218
    "coordinator.InferenceWorkersConfig": (
        "num_workers", "worker_metaserver_base_port",
    ),
    # motor/config/coordinator.py:251
    "coordinator.RateLimitConfig": (
        "enable_rate_limit", "provider", "max_requests", "window_size", "scope", "skip_paths",
        "error_message", "error_status_code", "olc_config_path",
    ),
    # motor/config/coordinator.py:267
    "coordinator.ApiConfig": (
        "coordinator_api_host", "coordinator_api_dns", "coordinator_api_infer_dns",
        "coordinator_api_obs_dns", "coordinator_api_infer_port", "coordinator_api_mgmt_port",
        "coordinator_obs_port",
    ),
    # motor/config/coordinator.py:283
    "coordinator.DeployConfig": (
        "p_instances_num", "d_instances_num", "hybrid_instances_num", "single_hybrid_instance_pod_num",
        "hybrid_pod_npu_num",
    ),
    # motor/config/coordinator.py:294
    "coordinator.TracerConfig": (
        "endpoint", "root_sampling_rate", "remote_parent_sampled", "remote_parent_not_sampled",
        "local_parent_sampled", "local_parent_not_sampled",
    ),
    # motor/config/coordinator.py:306
    "coordinator.PrefillKvEventConfig": (
        "conductor_service", "http_server_port", "block_size", "endpoint", "replay_endpoint", "engine_type",
        "model_path",
    ),
    # motor/config/node_manager.py:86
    "node_manager.BasicConfig": (
        "job_name", "role", "model_name", "hardware_type", "heartbeat_interval_seconds", "device_num",
        "parallel_config", "enable_multi_endpoints", "nnodes",
    ),
    # motor/config/node_manager.py:109
    "node_manager.APIConfig": (
        "pod_ip", "node_manager_port",
    ),
    # motor/config/node_manager.py:118
    "node_manager.EndpointConfig": (
        "endpoint_num", "base_port", "mgmt_ports", "service_ports",
    ),
    # motor/config/node_manager.py:217
    "node_manager.NodeManagerFaultToleranceConfig": (
        "enable_fault_tolerance", "zmq_pub_port",
    ),
    # motor/common/resources/instance.py:74 (a pydantic model; enable_ep is read from **kwargs at :106)
    "instance.ParallelConfig": (
        "dp_size", "pcp_size", "tp_size", "ep_size", "pp_size", "world_size", "local_world_size", "enable_ep",
    ),
    # motor/config/endpoint.py:107
    "endpoint.HealthCheckConfig": (
        "health_collector_timeout", "npu_usage_threshold", "enable_virtual_inference", "max_failure_count",
    ),
}

# The sections each top-level loader reads, and the class of each (None: free-form, not checked).
# motor/config/controller.py:190-221 (from_json: one `if '<section>' in cfg` per section)
CONTROLLER_SECTIONS = {
    "logging_config": "log_config.LoggingConfig", "api_config": "controller.ApiConfig",
    "mgmt_tls_config": "tls_config.TLSConfig", "etcd_tls_config": "tls_config.TLSConfig",
    "grpc_tls_config": "tls_config.TLSConfig", "observability_tls_config": "tls_config.TLSConfig",
    "instance_config": "controller.InstanceConfig", "event_config": "controller.EventPusherConfig",
    "fault_tolerance_config": "controller.FaultToleranceConfig",
    "observability_config": "controller.ObservabilityConfig", "standby_config": "standby.StandbyConfig",
    "etcd_config": "etcd.EtcdConfig",
}
# motor/config/coordinator.py:439-457 (config_mappings) and :463 ('aigw', a free-form object)
COORDINATOR_SECTIONS = {
    "logging_config": "log_config.LoggingConfig", "prometheus_metrics_config": "coordinator.PrometheusMetricsConfig",
    "exception_config": "coordinator.ExceptionConfig", "scheduler_config": "coordinator.SchedulerConfig",
    "inference_workers_config": "coordinator.InferenceWorkersConfig", "timeout_config": "coordinator.TimeoutConfig",
    "api_key_config": "coordinator.APIKeyConfig", "rate_limit_config": "coordinator.RateLimitConfig",
    "standby_config": "standby.StandbyConfig", "etcd_config": "etcd.EtcdConfig",
    "infer_tls_config": "tls_config.TLSConfig", "mgmt_tls_config": "tls_config.TLSConfig",
    "etcd_tls_config": "tls_config.TLSConfig", "api_config": "coordinator.ApiConfig",
    "deploy_config": "coordinator.DeployConfig", "tracer_config": "coordinator.TracerConfig",
    "prefill_kv_event_config": "coordinator.PrefillKvEventConfig", "aigw": None,
}
# motor/config/node_manager.py:359-392 (_update_from_config_data); basic_config.parallel_config is built with
# ParallelConfig(**pc) (node_manager.py:392): the ParallelConfig node_manager.py:18 imports from
# motor/common/resources/instance.py, a pydantic model that drops any other key without a word.
NODE_MANAGER_SECTIONS = {
    "logging_config": "log_config.LoggingConfig", "api_config": "node_manager.APIConfig",
    "mgmt_tls_config": "tls_config.TLSConfig", "fault_tolerance_config": "node_manager.NodeManagerFaultToleranceConfig",
    "endpoint_config": "node_manager.EndpointConfig", "basic_config": "node_manager.BasicConfig",
}
NESTED_FIELDS = {("node_manager.BasicConfig", "parallel_config"): "instance.ParallelConfig"}
# motor_deploy_config.tls_config: motor/config/config_utils.py:17-22 (the sections _update_tls_config copies) and
# examples/deployer/lib/update_config_whitelist.py:16-17 (north_tls_config)
DEPLOY_TLS_SECTIONS = {name: "tls_config.TLSConfig" for name in (
    "mgmt_tls_config", "infer_tls_config", "etcd_tls_config", "grpc_tls_config", "observability_tls_config",
    "north_tls_config")}

# kv_conductor_config as the Mooncake conductor reads it (../shared/upstream/mooncake/mooncake-conductor/
# conductor-ctrl/main.go:30-31); kvevent_instance maps a name to a service (main.go:35-44).
CONDUCTOR_KEYS = ("kvevent_instance", "http_server_port")
CONDUCTOR_SERVICE_KEYS = ("endpoint", "replay_endpoint", "type", "modelname", "lora_name", "tenant_id",
                          "instance_id", "block_size", "dp_rank", "additionalsalt")

# kv_cache_pool_config: the deployer's keys (examples/deployer/lib/constant.py:78-81,
# startup/mooncake_config.py:21-24) and the Mooncake store keys PyMotor's examples and Mooncake's store config
# use. The store's own reader is not in ../shared/upstream, so a key near one of these is an error and any
# other key a warning.
KV_POOL_KEYS = ("port", "eviction_high_watermark_ratio", "eviction_ratio", "default_kv_lease_ttl",
                "master_server_address", "metadata_server", "global_segment_size", "local_buffer_size", "protocol",
                "device_name", "alloc_in_same_node", "local_hostname", "use_ascend_direct")

# --------------------------------------------------------------------------------------------------
# vLLM: PyMotor's image is built on vllm-ascend v0.18.0 (docker/OVERVIEW.md:37). The names below are vLLM's
# EngineArgs fields (vllm/engine/arg_utils.py, vllm-project/vllm at 99d7eb5d, the newest vLLM source we could read),
# FrontendArgs (vllm/entrypoints/openai/cli_args.py) and the serve parser's own flags; PyMotor's vLLM path adds the
# cross-node keys it reads from engine_config (motor/engine_server/core/vllm/vllm_config.py:238-265).
VLLM_ENGINE_ARGS = (
    "model", "served_model_name", "tokenizer", "hf_config_path", "runner", "convert", "task",
    "skip_tokenizer_init", "enable_prompt_embeds", "tokenizer_mode", "trust_remote_code",
    "allowed_local_media_path", "allowed_media_domains", "download_dir", "safetensors_load_strategy",
    "load_format", "config_format", "dtype", "kv_cache_dtype", "seed", "max_model_len", "cuda_graph_sizes",
    "cudagraph_capture_sizes", "max_cudagraph_capture_size", "distributed_executor_backend",
    "pipeline_parallel_size", "tensor_parallel_size", "decode_context_parallel_size", "data_parallel_size",
    "data_parallel_rank", "data_parallel_start_rank", "data_parallel_size_local", "data_parallel_address",
    "data_parallel_rpc_port", "data_parallel_hybrid_lb", "data_parallel_backend", "enable_expert_parallel",
    "all2all_backend", "enable_dbo", "dbo_decode_token_threshold", "dbo_prefill_token_threshold",
    "disable_nccl_for_dp_synchronization", "eplb_config", "enable_eplb", "expert_placement_strategy",
    "num_redundant_experts", "eplb_window_size", "eplb_step_interval", "eplb_log_balancedness",
    "max_parallel_loading_workers", "block_size", "enable_prefix_caching", "prefix_caching_hash_algo",
    "disable_sliding_window", "disable_cascade_attn", "swap_space", "cpu_offload_gb", "gpu_memory_utilization",
    "kv_cache_memory_bytes", "max_num_batched_tokens", "max_num_partial_prefills", "max_long_partial_prefills",
    "long_prefill_token_threshold", "max_num_seqs", "max_logprobs", "logprobs_mode", "disable_log_stats",
    "aggregate_engine_logging", "revision", "code_revision", "rope_scaling", "rope_theta", "hf_token",
    "hf_overrides", "tokenizer_revision", "quantization", "enforce_eager", "disable_custom_all_reduce",
    "limit_mm_per_prompt", "enable_mm_embeds", "interleave_mm_strings", "media_io_kwargs",
    "mm_processor_kwargs", "disable_mm_preprocessor_cache", "mm_processor_cache_gb", "mm_processor_cache_type",
    "mm_shm_cache_max_object_size_mb", "mm_encoder_tp_mode", "mm_encoder_attn_backend", "io_processor_plugin",
    "skip_mm_profiling", "video_pruning_rate", "enable_lora", "max_loras", "max_lora_rank", "default_mm_loras",
    "fully_sharded_loras", "max_cpu_loras", "lora_dtype", "lora_extra_vocab_size", "ray_workers_use_nsight",
    "num_gpu_blocks_override", "num_lookahead_slots", "model_loader_extra_config", "ignore_patterns",
    "enable_chunked_prefill", "disable_chunked_mm_input", "disable_hybrid_kv_cache_manager",
    "structured_outputs_config", "reasoning_parser", "guided_decoding_backend",
    "guided_decoding_disable_fallback", "guided_decoding_disable_any_whitespace",
    "guided_decoding_disable_additional_properties", "logits_processor_pattern", "speculative_config",
    "show_hidden_metrics_for_version", "otlp_traces_endpoint", "collect_detailed_traces", "scheduling_policy",
    "scheduler_cls", "external_parameters", "pooler_config", "override_pooler_config", "compilation_config",
    "worker_cls", "worker_extension_cls", "kv_transfer_config", "kv_events_config", "generation_config",
    "enable_sleep_mode", "override_generation_config", "model_impl", "override_attention_dtype",
    "calculate_kv_scales", "mamba_cache_dtype", "mamba_ssm_cache_dtype", "mamba_block_size",
    "additional_config", "use_tqdm_on_load", "pt_load_map_location", "enable_multimodal_encoder_data_parallel",
    "logits_processors", "async_scheduling", "kv_sharing_fast_prefill",
)
VLLM_FRONTEND_ARGS = (
    "host", "port", "uds", "uvicorn_log_level", "disable_uvicorn_access_log", "allow_credentials",
    "allowed_origins", "allowed_methods", "allowed_headers", "api_key", "lora_modules", "chat_template",
    "chat_template_content_format", "trust_request_chat_template", "response_role", "ssl_keyfile",
    "ssl_certfile", "ssl_ca_certs", "enable_ssl_refresh", "ssl_cert_reqs", "root_path", "middleware",
    "return_tokens_as_token_ids", "disable_frontend_multiprocessing", "enable_request_id_headers",
    "enable_auto_tool_choice", "exclude_tools_when_tool_choice_none", "tool_call_parser", "tool_parser_plugin",
    "tool_server", "log_config_file", "max_log_len", "disable_fastapi_docs", "enable_prompt_tokens_details",
    "enable_server_load_tracking", "enable_force_include_usage", "enable_tokenizer_info_endpoint",
    "enable_log_outputs", "log_error_stack", "tokens_only",
)
VLLM_SERVE_ARGS = ("headless", "api_server_count", "config", "enable_log_requests", "disable_log_requests")
PYMOTOR_VLLM_KEYS = ("nnodes", "master_port", "master_addr", "node_rank", "prefill_context_parallel_size")
VLLM_KEYS = frozenset(VLLM_ENGINE_ARGS + VLLM_FRONTEND_ARGS + VLLM_SERVE_ARGS + PYMOTOR_VLLM_KEYS)
