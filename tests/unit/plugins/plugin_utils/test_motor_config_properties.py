# -*- coding: utf-8 -*-
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Property tests: normalization is idempotent for random valid PyMotor configurations."""

from __future__ import annotations

import json

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_SECTIONS, HARDWARE_NPUS


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

HANDOFF = ["MooncakeConnectorV1", "mooncakeconnectorv1", "MooncakeHybridConnector", "NixlConnector"]
STORES = ["AscendStoreConnector", "MooncakeConnectorStoreV1"]
KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer", "union": "kv_both"}


def _spell(draw, key):
    """Either spelling of an engine_config key: vLLM treats them as one flag."""
    return draw(st.sampled_from([key, key.replace("_", "-")]))


def _transfer(style, role, draw, transport):
    if style == "trigger":
        return {"kv_connector": "MooncakeLayerwiseConnector", "kv_role": KV_ROLE[role], "kv_port": "30001"}
    if style == "handoff":
        return {"kv_connector": draw(st.sampled_from(HANDOFF)), "kv_role": KV_ROLE[role]}
    if style == "custom":
        return {"kv_connector": "CustomConnector", "kv_role": KV_ROLE[role]}
    return {
        "kv_connector": "MultiConnector", "kv_role": KV_ROLE[role],
        "kv_connector_extra_config": {"use_layerwise": False, "connectors": [
            {"kv_connector": transport, "kv_role": KV_ROLE[role]},
            {"kv_connector": draw(st.sampled_from(STORES)), "kv_role": KV_ROLE[role]},
        ]},
    }


def _engine(draw, role, max_npus, style, affinity, transport):
    pods = draw(st.integers(1, 3))
    npus = draw(st.integers(1, max_npus))
    tp = draw(st.sampled_from([size for size in range(1, npus + 1) if npus % size == 0]))
    pp = draw(st.integers(1, npus // tp))
    dp = draw(st.integers(1, npus // (tp * pp))) * pods
    engine_config = {
        "served_model_name": "qwen3-8B",
        "model": draw(st.sampled_from(["/mnt/weight/qwen3_8B", "/mnt/weight/", "/data/qwen"])),
        "data_parallel_size": dp,
        _spell(draw, "tensor_parallel_size"): tp,
        _spell(draw, "pipeline_parallel_size"): pp,
        _spell(draw, "max_model_len"): draw(st.integers(512, 8192)),
        _spell(draw, "enforce_eager"): draw(st.booleans()),
    }
    if draw(st.booleans()):
        engine_config[_spell(draw, "block_size")] = draw(st.sampled_from([16, 64, 128]))
    if style is not None:
        engine_config[_spell(draw, "kv_transfer_config")] = _transfer(style, role, draw, transport)
    if affinity and role != "decode":
        engine_config[_spell(draw, "enable_prefix_caching")] = True
        engine_config[_spell(draw, "kv_events_config")] = {
            "publisher": "zmq", "enable_kv_cache_events": True, "topic": "kv-events",
            "endpoint": "tcp://*:%d" % draw(st.integers(1, 65535)),
            "replay_endpoint": "tcp://*:%d" % draw(st.integers(1, 65535)),
        }
    section = {"engine_type": "vllm", "engine_config": engine_config}
    if style == "custom":
        section["dispatch_profile"] = "handoff"
    return section, (pods, npus)


def _kv_pool(draw, store_used):
    pool = {"metadata_server": "P2PHANDSHAKE", "protocol": "ascend",
            "global_segment_size": draw(st.sampled_from(["1GB", "512mb", "10 GB", 1073741824]))}
    if store_used or draw(st.booleans()):
        pool["eviction_high_watermark_ratio"] = draw(st.sampled_from([0.9, 1, 0.5]))
        pool["eviction_ratio"] = draw(st.sampled_from([0.1, 0.05, 1.0]))
    if draw(st.booleans()):
        pool["port"] = draw(st.integers(1, 65535))
    return pool


def _deploy(draw, hardware, hybrid, sizes):
    deploy = {"job_id": draw(st.sampled_from(["mindie-motor", "a", "job-1"])), "hardware_type": hardware,
              "image_name": ""}
    if draw(st.booleans()):
        deploy["weight_mount_path"] = draw(st.sampled_from(["/mnt/weight", "/mnt/weight/", "/data"]))
    prefixes = (("hybrid", "union"),) if hybrid else (("p", "prefill"), ("d", "decode"))
    for prefix, role in prefixes:
        pods, npus = sizes[role]
        deploy["%s_instances_num" % prefix] = draw(st.integers(1, 16))
        deploy["single_%s_instance_pod_num" % prefix] = pods
        deploy["%s_pod_npu_num" % prefix] = npus
    return deploy


@st.composite
def configs(draw):
    """A random valid (user_config, env_config, overrides) triple."""
    hardware = draw(st.sampled_from(["800I_A2", "800I_A3"]))
    hybrid, affinity = draw(st.booleans()), draw(st.booleans())
    user = {"version": "v2.0", "motor_controller_config": {}}
    scheduler = {"scheduler_type": "kv_cache_affinity" if affinity else draw(st.sampled_from(["load_balance", "round_robin"]))}
    if hybrid:
        scheduler["deploy_mode"] = "single_node"
        style = draw(st.sampled_from([None, "store"]))
        roles = ("union",)
    else:
        style = draw(st.sampled_from(["trigger", "handoff", "multi", "custom"]))
        roles = ("prefill", "decode")
    sizes = {}
    transport = draw(st.sampled_from(["MooncakeLayerwiseConnector"] + HANDOFF))  # P and D must agree
    for role in roles:
        transfer_style = style if style != "store" else None
        section, sizes[role] = _engine(draw, role, HARDWARE_NPUS[hardware], transfer_style, affinity, transport)
        if style == "store":
            section["engine_config"]["kv_transfer_config"] = {
                "kv_connector": draw(st.sampled_from(STORES)), "kv_role": "kv_both"}
        user[ENGINE_SECTIONS[role]] = section
    user["motor_deploy_config"] = _deploy(draw, hardware, hybrid, sizes)
    user["motor_coordinator_config"] = {"scheduler_config": scheduler}
    store_used = style in ("multi", "store")
    if store_used or draw(st.booleans()):
        user["kv_cache_pool_config"] = _kv_pool(draw, store_used)
    if affinity and draw(st.booleans()):
        user["kv_conductor_config"] = {"http_server_port": draw(st.integers(1, 65535))}
    env = {"version": "2.0.0", "motor_common_env": {"CANN_INSTALL_PATH": "/usr/local/Ascend"},
           "motor_engine_prefill_env": {"HCCL_BUFFSIZE": draw(st.sampled_from([200, "200", 2.5, True]))}}
    overrides = draw(st.sampled_from([None, [], [{"motor_deploy_config": {"image_name": "site:1"}}],
                                      [{"motor_controller_config": {"api_config": {"controller_api_port": 2026}}},
                                       {"motor_controller_config": {"api_config": None}}]]))
    return user, env, overrides


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(configs())
def test_normalize_is_idempotent(triple):
    user, env, overrides = triple
    first = normalize(user, env, overrides)
    second = normalize(first["user_config"], env, overrides)
    assert second == first
    assert json.dumps(second, indent=2) == json.dumps(first, indent=2)  # key order is stable too


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(configs())
def test_normalized_engine_keys_use_underscores(triple):
    user, env, overrides = triple
    result = normalize(user, env, overrides)
    for engine in result["engines"].values():
        keys = result["user_config"][engine["section"]]["engine_config"]
        assert all("-" not in key for key in keys)
    assert result["mode"] == ("pd_hybrid" if "motor_engine_union_config" in user else "pd_separation")
    capabilities = {engine["transfer"]["capability"] for engine in result["engines"].values()}
    assert len(capabilities) == 1
