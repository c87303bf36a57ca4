# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Unit tests for plugins/plugin_utils/plan/ (placement, ports, env, per-container user_config)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import condition_met, missing_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import expected_kv_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hosts import misspelt_host_vars
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, Planner, build_plan, placement_of
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import readiness_checks
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import own_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import model_dirs, plan_table, weight_dir


REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "configs"
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if (p / "user_config.json").is_file()) if FIXTURES.is_dir() else []
ENGINE = "motor_engine_hosts"
CONTROL = "motor_control_hosts"


# --------------------------------------------------------------------------------------------------
# helpers: contract-shaped motor_config output (docs/design.md) and inventories


def contract_config(hw="800I_A2", roles=None, affinity=False, pool=False, conductor=None, kv_port="30001",
                    job_id="job", env=None, env_config=None, decode_events=False, replay=True):
    """A dict shaped like motor_config's output. roles: {role: (count, pods, npus_per_pod, dp)}."""
    roles = roles or {"prefill": (1, 1, 2, 1), "decode": (1, 1, 2, 1)}
    conductor = affinity if conductor is None else conductor
    user_config = {
        "version": "v2.0",
        "motor_deploy_config": {"job_id": job_id, "hardware_type": hw, "image_name": "img:1"},
        "motor_controller_config": {},
        "motor_coordinator_config": {"scheduler_config": {"scheduler_type": "kv_cache_affinity" if affinity else "load_balance"}},
    }
    engines = {}
    publisher = "union" if "union" in roles else "prefill"
    for role, (count, pods, npus, dp) in roles.items():
        section = f"motor_engine_{role}_config"
        dpl = dp // pods
        tp = max(1, npus // dpl)
        engine_config = {
            "served_model_name": "m", "model": "/mnt/weight/m", "data_parallel_size": dp,
            "tensor_parallel_size": tp, "pipeline_parallel_size": 1, "data_parallel_rpc_port": 9000,
        }
        if role != "union":
            engine_config["kv_transfer_config"] = {
                "kv_connector": "MooncakeLayerwiseConnector",
                "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
                "kv_port": kv_port,
            }
        if (affinity and role == publisher) or (decode_events and role == "decode"):
            engine_config["kv_events_config"] = {
                "publisher": "zmq", "enable_kv_cache_events": True, "endpoint": "tcp://*:5557", "topic": "kv-events",
            }
            if replay:
                engine_config["kv_events_config"]["replay_endpoint"] = "tcp://*:6667"
        user_config[section] = {"engine_type": "vllm", "engine_config": engine_config}
        engines[role] = {"section": section, "count": count, "pods": pods, "npus_per_pod": npus, "dp": dp, "tp": tp,
                         "pp": 1, "dp_local_per_pod": dpl, "engine_type": "vllm", "served_model_name": "m",
                         "model": "/mnt/weight/m", "transfer": {}}
    if affinity:
        user_config["motor_coordinator_config"]["prefill_kv_event_config"] = {
            "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:6667" if replay else "", "block_size": 128,
            "http_server_port": 13333, "model_path": "/mnt/weight/m", "engine_type": "vLLM",
        }
    if pool:
        user_config["kv_cache_pool_config"] = {"eviction_high_watermark_ratio": 0.9, "eviction_ratio": 0.1,
                                               "port": 50088, "default_kv_lease_ttl": 11000}
    if conductor:
        user_config["kv_conductor_config"] = {"http_server_port": 13333}
    base_env = {"CANN_INSTALL_PATH": "/usr/local/Ascend", "SERVICE_ID": job_id}
    env_roles = ("common", "controller", "coordinator", "prefill", "decode", "union", "kv_pool", "kv_conductor")
    all_env = {r: dict(base_env) for r in env_roles}
    for role, extra in (env or {}).items():
        all_env[role].update(extra)
    return {
        "version": "v2.0",
        "mode": "pd_hybrid" if "union" in roles else "pd_separation",
        "job_id": job_id,
        "hardware_type": hw,
        "npus_per_host": 16 if hw == "800I_A3" else 8,
        "user_config": user_config,
        "engines": engines,
        "affinity": affinity,
        "kv_events": {"role": publisher, "endpoint_port": 5557, "replay_port": 6667 if replay else None,
                      "topic": "kv-events"} if affinity else None,
        "kv_pool": {"enabled": pool, "port": 50088, "metrics_port": 9003, "eviction_high_watermark_ratio": 0.9,
                    "eviction_ratio": 0.1, "default_kv_lease_ttl": 11000},
        "kv_conductor": {"enabled": bool(conductor), "http_server_port": 13333 if conductor else None},
        "env": all_env,
        "env_config": env_config or {"version": "2.0.0"},
        "overridden": {},
        "warnings": [],
    }


def inventory(engine=2, control=1, shared=0, **per_host):
    """engine hosts e1.., control hosts c1.., plus `shared` hosts s1.. in both groups; per_host: name -> extra vars."""
    hosts = {}
    n = 1
    for i in range(engine):
        hosts[f"e{i + 1}"] = {"motor_host_ip": f"10.0.0.{n}", "group_names": [ENGINE]}
        n += 1
    for i in range(shared):
        hosts[f"s{i + 1}"] = {"motor_host_ip": f"10.0.0.{n}", "group_names": [ENGINE, CONTROL]}
        n += 1
    for i in range(control):
        hosts[f"c{i + 1}"] = {"motor_host_ip": f"10.0.1.{i + 1}", "group_names": [CONTROL]}
    for name, extra in per_host.items():
        hosts.setdefault(name, {}).update(extra)
    return hosts


def load_fixture(name, overrides=None):
    user = json.loads((FIXTURES / name / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((FIXTURES / name / "env.json").read_text(encoding="utf-8"))
    return normalize(user, env, overrides)


def by_name(plan):
    return {c["name"]: c for c in plan["containers"]}


def assert_invariants(plan, hosts):
    """The properties every plan must have."""
    reserved = {}
    for name, hvars in hosts.items():
        ports = set()
        for item in hvars.get("motor_reserved_ports") or []:
            if isinstance(item, str) and "-" in item:
                lo, hi = item.split("-")
                ports.update(range(int(lo), int(hi) + 1))
            else:
                ports.add(int(item))
        reserved[name] = ports
    seen_ports = {}
    seen_npus = {}
    for cont in plan["containers"]:
        for port in cont["ports"]:
            key = (cont["host"], port)
            assert key not in seen_ports, f"port {port} twice on {cont['host']}: {seen_ports.get(key)} {cont['name']}"
            seen_ports[key] = cont["name"]
            assert 1024 <= port <= 65535
            assert port not in reserved[cont["host"]]
        assert cont["ports"] == sorted(cont["ports"])
        for npu in cont["npu_ids"]:
            key = (cont["host"], npu)
            assert key not in seen_npus
            seen_npus[key] = cont["name"]
        # every container sees the final control-plane ports
        uc = cont["user_config"]
        assert uc["motor_controller_config"]["api_config"]["controller_api_port"] == plan["controller"]["api_port"]
        assert uc["motor_coordinator_config"]["api_config"]["coordinator_api_mgmt_port"] == plan["coordinator"]["mgmt_port"]
    for inst in plan["instances"]:
        hosts_of = [p["host"] for p in inst["pods"]]
        assert len(hosts_of) == len(set(hosts_of))
    tiers = [c["tier"] for c in plan["containers"]]
    assert tiers == sorted(tiers)
    json.dumps(plan)  # JSON-serialisable


# --------------------------------------------------------------------------------------------------
# seed configurations through the real motor_config


def test_seed_pd_separation_on_example_inventory():
    cfg = load_fixture("seed_pd_separation")
    hosts = inventory(engine=2, control=1)
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    conts = by_name(plan)
    assert sorted(conts) == sorted([
        "mindie-motor-controller", "mindie-motor-coordinator", "mindie-motor-kv-conductor", "mindie-motor-kv-pool",
        "mindie-motor-kv-watcher", "mindie-motor-p0-0", "mindie-motor-d0-0"])
    p0, d0 = conts["mindie-motor-p0-0"], conts["mindie-motor-d0-0"]
    assert (p0["host"], p0["npu_ids"]) == ("e1", [0, 1, 2, 3])
    assert (d0["host"], d0["npu_ids"]) == ("e1", [4, 5, 6, 7])
    assert [c["name"] for c in plan["containers"]][0] == "mindie-motor-kv-pool"
    assert conts["mindie-motor-kv-pool"]["tier"] == 0 and p0["tier"] == 2 and conts["mindie-motor-coordinator"]["tier"] == 1
    # ports: P keeps the defaults, D shifts where it shares the host
    assert p0["port_map"] == {"node_manager": 3026, "engine_base": 10000, "dp_rpc": 9000, "kv": 28000,
                              "kv_events": 5557, "kv_events_replay": 6667, "hccl": 60000}
    assert p0["ports"] == [3026, 5557, 5558, 6667, 6668, 9000, 10000, 10001, 10002, 10003, 28000, 28001, 28002, 28003,
                           *range(60000, 60032)]
    assert d0["port_map"] == {"node_manager": 4026, "engine_base": 10004, "dp_rpc": 9001, "kv": 28004, "hccl": 60032}
    assert conts["mindie-motor-coordinator"]["ports"] == [1025, 1026, 1027, 12000, 12001, 12002, 12003]
    assert conts["mindie-motor-controller"]["ports"] == [2026, 2027]
    assert conts["mindie-motor-kv-pool"]["ports"] == [9003, 50088]
    assert conts["mindie-motor-kv-conductor"]["ports"] == [13333]
    # the KV watcher: next to the conductor, binds only its /metrics, runs the collection's script from its config
    # directory
    watcher = conts["mindie-motor-kv-watcher"]
    assert (watcher["host"], watcher["tier"], watcher["ports"], watcher["devices"]) == ("c1", 1, [13334], [])
    assert watcher["command"] == ["python3", "-u", watcher["configmap_path"] + "/motor_kv_watcher.py",
                                  watcher["configmap_path"] + "/kv_watcher.json"]
    config = json.loads(own_files(plan, "")[watcher["name"]]["kv_watcher.json"])
    assert {k: config[k] for k in ("conductor", "interval", "state")} == {
        "conductor": "http://10.0.1.1:13333", "interval": 2, "state": "/var/tmp/motor_kv_watcher.json"}
    # per-container user_config
    puc = p0["user_config"]["motor_engine_prefill_config"]
    assert puc["motor_nodemanger_config"] == {"api_config": {"node_manager_port": 3026}, "endpoint_config": {"base_port": 10000}}
    assert puc["engine_config"]["kv_transfer_config"]["kv_connector_extra_config"]["connectors"][0]["kv_port"] == "28000"
    assert puc["engine_config"]["kv_events_config"]["endpoint"] == "tcp://*:5557"
    duc = d0["user_config"]["motor_engine_decode_config"]
    assert duc["engine_config"]["data_parallel_rpc_port"] == 9001
    assert duc["engine_config"]["kv_transfer_config"]["kv_connector_extra_config"]["connectors"][0]["kv_port"] == "28004"
    assert duc["motor_nodemanger_config"]["api_config"]["node_manager_port"] == 4026
    coord_uc = conts["mindie-motor-coordinator"]["user_config"]["motor_coordinator_config"]
    assert coord_uc["api_config"] == {"coordinator_api_infer_port": 1025, "coordinator_api_mgmt_port": 1026,
                                      "coordinator_obs_port": 1027}
    assert coord_uc["prefill_kv_event_config"]["endpoint"] == "tcp://*:5557"
    assert coord_uc["prefill_kv_event_config"]["http_server_port"] == 13333
    for cont in plan["containers"]:
        assert cont["user_config"]["motor_controller_config"]["api_config"] == {
            "controller_api_port": 2026, "observability_api_port": 2027}
        assert cont["user_config"]["kv_cache_pool_config"]["port"] == 50088
    # the normalized input is not modified
    assert "motor_nodemanger_config" not in cfg["user_config"]["motor_engine_prefill_config"]
    # env
    env = p0["env"]
    assert env["ROLE"] == "prefill" and env["JOB_NAME"] == "mindie-motor-p0"
    assert env["POD_IP"] == env["HOST_IP"] == env["HCCL_IF_IP"] == "10.0.0.1"
    assert env["CONTROLLER_SERVICE"] == env["COORDINATOR_SERVICE"] == env["KVP_MASTER_SERVICE"] == "10.0.1.1"
    assert env["PYTHONHASHSEED"] == "0" and env["ASCEND_RUNTIME_OPTIONS"] == "NODRV"
    assert env["CONFIGMAP_PATH"] == "/etc/pymotor/mindie-motor/mindie-motor-p0-0"
    assert env["CONFIG_PATH"] == "/usr/local/Ascend/pyMotor/conf"
    assert "HCCL_BUFFSIZE" not in env  # env.json reaches the container through the shell functions only (PyMotor)
    assert p0["shell_env"]["set_prefill_env"]["HCCL_BUFFSIZE"] == "200"
    assert "HCCL_BUFFSIZE" not in p0["shell_env"]["set_common_env"] and "ROLE" not in p0["shell_env"]["set_prefill_env"]
    assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == env["HCCL_SOCKET_IFNAME"] == "eth0"
    coord_env = conts["mindie-motor-coordinator"]["env"]
    assert coord_env["KV_CONDUCTOR_SERVICE"] == "10.0.1.1" and "KVP_MASTER_SERVICE" not in coord_env
    assert "KV_CONDUCTOR_SERVICE" not in env
    pool_env = conts["mindie-motor-kv-pool"]["env"]
    assert pool_env["KV_POOL_PORT"] == "50088" and pool_env["DEFAULT_KV_LEASE_TTL"] == "11000"
    assert pool_env["KV_POOL_EVICTION_HIGH_WATERMARK_RATIO"] == "0.9" and pool_env["KV_POOL_EVICTION_RATIO"] == "0.1"
    assert conts["mindie-motor-kv-conductor"]["env"]["KVP_MASTER_SERVICE"] == "10.0.1.1"
    # docker settings
    assert p0["devices"] == [f"/dev/davinci{n}:/dev/davinci{n}:rwm" for n in range(4)] + [
        "/dev/davinci_manager:/dev/davinci_manager:rwm", "/dev/devmm_svm:/dev/devmm_svm:rwm",
        "/dev/hisi_hdc:/dev/hisi_hdc:rwm"]
    assert conts["mindie-motor-controller"]["devices"] == []
    assert p0["ipc_mode"] == "host" and conts["mindie-motor-kv-pool"]["ipc_mode"] == "host"
    assert conts["mindie-motor-controller"]["ipc_mode"] is None
    assert p0["mounts_profile"] == "engine" and conts["mindie-motor-coordinator"]["mounts_profile"] == "control"
    assert {c["mounts_profile"] for c in conts.values() if c["role"] in ("kv_pool", "kv_conductor")} == {"kv"}
    assert conts["mindie-motor-coordinator"]["needs_weights"] is True
    assert p0["endpoints"] == [{"dp_rank": 0, "local_index": 0, "service_port": 10000, "mgmt_port": 10001},
                               {"dp_rank": 1, "local_index": 1, "service_port": 10002, "mgmt_port": 10003}]
    # summary
    assert plan["coordinator"]["url"] == "http://10.0.1.1:1025"
    assert plan["kv_events"] == {"role": "prefill", "endpoint_port": 5557, "replay_port": 6667}
    assert plan["hosts"]["e1"]["used_npu_ids"] == list(range(8))
    assert plan["hosts"]["e2"]["containers"] == [] and plan["hosts"]["e2"]["free_npu_ids"] == list(range(8))
    assert any("kv_port" in w and "28000" in w for w in plan["warnings"])


def test_seed_pd_hybrid_on_a3():
    cfg = load_fixture("seed_pd_hybrid")
    hosts = inventory(engine=1, control=1)
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    conts = by_name(plan)
    u0 = conts["mindie-motor-u0-0"]
    assert u0["role"] == "union" and u0["npu_ids"] == [0, 1]
    assert u0["port_map"]["kv_events"] == 5557 and "kv" not in u0["port_map"]
    assert u0["env"]["ROLE"] == "union" and u0["env"]["KVP_MASTER_SERVICE"] == "10.0.1.1"
    assert conts["mindie-motor-coordinator"]["env"]["KV_CONDUCTOR_SERVICE"] == "10.0.1.1"
    assert plan["mode"] == "pd_hybrid" and plan["hardware_type"] == "800I_A3"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@pytest.mark.parametrize("hw", ["800I_A2", "800I_A3"])
@pytest.mark.parametrize("n_hosts", [1, 2, 8])
def test_fixture_configs_on_inventories(name, hw, n_hosts):
    """Every example config on 1-, 2- and 8-host inventories: a valid plan, or an error saying need vs available."""
    try:
        cfg = load_fixture(name, [{"motor_deploy_config": {"hardware_type": hw}}])
    except MotorConfigError as err:
        assert "hardware_type" in str(err) or "npu_num" in str(err)
        return
    hosts = {f"h{i}": {"motor_host_ip": f"10.1.0.{i + 1}", "group_names": [ENGINE, CONTROL]} for i in range(n_hosts)}
    if cfg["user_config"]["motor_deploy_config"].get("enable_pd_heterogeneous") is True:
        with pytest.raises(MotorPlanError) as unlabelled:  # no host carries the card_type labels
            build_plan(cfg, hosts)
        assert "motor_host_labels" in str(unlabelled.value)
        return
    per_host = cfg["npus_per_host"]
    needed = sum(e["count"] * e["pods"] * e["npus_per_pod"] for e in cfg["engines"].values())
    max_pods = max(e["pods"] for e in cfg["engines"].values())
    try:
        plan = build_plan(cfg, hosts)
    except MotorPlanError as err:
        assert needed > n_hosts * per_host or max_pods > n_hosts, str(err)
        text = str(err)
        assert "NPUs" in text and hw in text and ("need" in text or "needs" in text)
        return
    assert_invariants(plan, hosts)
    assert sum(len(c["npu_ids"]) for c in plan["containers"]) == needed
    assert plan["hosts"]["h0"]["containers"]  # first fit starts at the first host


def test_expected_errors_for_large_examples():
    cfg = load_fixture("vllm_models_deepseek_v3_1")
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1))
    assert "motor_deploy_config.single_d_instance_pod_num" in str(err.value)
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=3, control=1))
    assert "need 64 NPUs" in str(err.value) and "available 48 NPUs on 3 hosts" in str(err.value)
    plan = build_plan(cfg, inventory(engine=4, control=1))
    d0 = [c for c in plan["containers"] if c["job_name"] == "mindie-motor-d0"]
    assert [c["host"] for c in d0] == ["e3", "e4"]
    assert [c["dp_ranks"] for c in d0] == [list(range(16)), list(range(16, 32))]
    assert len({c["port_map"]["dp_rpc"] for c in d0}) == 1 and len({c["port_map"]["kv"] for c in d0}) == 1
    assert all(c["port_map"]["kv"] >= 36000 for c in plan["containers"] if "kv" in c["port_map"])


# --------------------------------------------------------------------------------------------------
# placement


def test_two_pods_of_one_instance_never_share_a_host():
    cfg = contract_config(roles={"decode": (1, 2, 2, 2), "prefill": (1, 1, 2, 1)})
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1))
    assert "single_d_instance_pod_num" in str(err.value) and "distinct hosts" in str(err.value)
    plan = build_plan(cfg, inventory(engine=2, control=1))
    assert [c["host"] for c in plan["containers"] if c["role"] == "decode"] == ["e1", "e2"]


def test_a3_die_pairs_and_contiguous_blocks():
    cfg = contract_config(hw="800I_A3", roles={"prefill": (1, 1, 2, 1), "decode": (1, 1, 4, 1)})
    hosts = inventory(engine=1, control=1, e1={"motor_npu_ids": "1-7"})
    plan = build_plan(cfg, hosts)
    conts = by_name(plan)
    assert conts["job-p0-0"]["npu_ids"] == [2, 3]
    assert conts["job-d0-0"]["npu_ids"] == [4, 5, 6, 7]
    # on A2 there are no die pairs
    cfg2 = contract_config(hw="800I_A2", roles={"prefill": (1, 1, 2, 1), "decode": (1, 1, 3, 1)})
    plan2 = build_plan(cfg2, inventory(engine=1, control=1, e1={"motor_npu_ids": [1, 2, 4, 5, 6, 7]}))
    assert by_name(plan2)["job-p0-0"]["npu_ids"] == [1, 2]
    assert by_name(plan2)["job-d0-0"]["npu_ids"] == [4, 5, 6]


def test_fragmented_hosts_report_placement_failure():
    # 8 NPUs free in total but no contiguous block of 4 on the host
    cfg = contract_config(roles={"prefill": (1, 1, 4, 1), "decode": (1, 1, 4, 1)})
    hosts = inventory(engine=1, control=1, e1={"motor_npu_ids": [0, 1, 2, 4, 5, 6, 7, 3]})
    assert build_plan(cfg, hosts)  # [0..7] listed out of order is still contiguous
    hosts = inventory(engine=2, control=1, e1={"motor_npu_ids": [0, 1, 3, 4]}, e2={"motor_npu_ids": [0, 2, 4, 6]})
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, hosts)
    text = str(err.value)
    assert text.startswith("motor_deploy_config.p_instances_num: cannot place prefill instance 0")
    assert "need 8 NPUs" in text and "available 8 NPUs on 2 hosts" in text


def test_first_fit_in_inventory_order_and_deterministic():
    cfg = contract_config(roles={"prefill": (3, 1, 4, 1), "decode": (2, 1, 8, 1)})
    hosts = inventory(engine=4, control=1)
    plan = build_plan(cfg, hosts)
    placed = {c["name"]: (c["host"], c["npu_ids"][0]) for c in plan["containers"] if c["tier"] == 2}
    assert placed == {"job-p0-0": ("e1", 0), "job-p1-0": ("e1", 4), "job-p2-0": ("e2", 0),
                      "job-d0-0": ("e3", 0), "job-d1-0": ("e4", 0)}
    assert build_plan(copy.deepcopy(cfg), copy.deepcopy(hosts)) == plan
    names = [c["name"] for c in plan["containers"]]
    assert names == ["job-controller", "job-coordinator", "job-d0-0", "job-d1-0", "job-p0-0", "job-p1-0", "job-p2-0"]


def test_natural_name_order_with_many_instances():
    cfg = contract_config(roles={"prefill": (12, 1, 1, 1), "decode": (1, 1, 1, 1)})
    plan = build_plan(cfg, inventory(engine=2, control=1))
    prefill = [c["name"] for c in plan["containers"] if c["role"] == "prefill"]
    assert prefill == [f"job-p{i}-0" for i in range(12)]


def test_affinity_keeps_publishing_pods_with_same_ranks_apart():
    cfg = contract_config(roles={"prefill": (2, 1, 2, 1), "decode": (1, 1, 2, 1)}, affinity=True)
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1))
    assert "publishing pods" in str(err.value)
    plan = build_plan(cfg, inventory(engine=2, control=1))
    conts = by_name(plan)
    assert conts["job-p0-0"]["host"] == "e1" and conts["job-p1-0"]["host"] == "e2"
    assert conts["job-d0-0"]["host"] == "e1"
    assert conts["job-p0-0"]["port_map"]["kv_events"] == conts["job-p1-0"]["port_map"]["kv_events"] == 5557
    # without affinity the two prefill instances share a host with shifted ports
    plan = build_plan(contract_config(roles={"prefill": (2, 1, 2, 1), "decode": (1, 1, 2, 1)}), inventory(engine=1, control=1))
    conts = by_name(plan)
    assert conts["job-p0-0"]["host"] == conts["job-p1-0"]["host"] == "e1"
    assert conts["job-p0-0"]["port_map"] == {"node_manager": 3026, "engine_base": 10000, "dp_rpc": 9000, "kv": 30001,
                                             "hccl": 60000}
    assert conts["job-p1-0"]["port_map"] == {"node_manager": 3027, "engine_base": 10002, "dp_rpc": 9001, "kv": 30003,
                                             "hccl": 60032}


def test_affinity_multi_pod_ranks_and_event_ports():
    # The real controller gives a pod its DP ranks in registration order (upstream instance_assembler.py): any pod
    # of a 2-pod DP-4 prefill instance may bind base+0..base+3, so no two publishing pods share a host.
    cfg = contract_config(roles={"prefill": (2, 2, 4, 4), "decode": (1, 1, 8, 8)}, affinity=True, pool=True)
    with pytest.raises(MotorPlanError, match="no two publishing pods that may get the same DP rank on one host"):
        build_plan(cfg, inventory(engine=3, control=1))  # used to pack p1-1 (ranks 2-3) next to p0-0 (0-1) on e1
    hosts = inventory(engine=5, control=1)
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    conts = by_name(plan)
    prefill = ("job-p0-0", "job-p0-1", "job-p1-0", "job-p1-1")
    assert len({conts[n]["host"] for n in prefill}) == 4
    assert conts["job-d0-0"]["host"] not in {conts[n]["host"] for n in prefill}
    for name in prefill:
        assert conts[name]["rank_pool"] == [0, 1, 2, 3]
        assert {5557, 5558, 5559, 5560} <= set(conts[name]["ports"])  # reserved whatever ranks it gets
    assert conts["job-p0-1"]["dp_ranks"] == [2, 3]  # the labels if the pods register in index order
    assert conts["job-p0-1"]["endpoints"][0] == {"dp_rank": 2, "local_index": 0, "service_port": 10000, "mgmt_port": 10001}
    expected = {e["container"]: e for e in expected_kv_endpoints(plan)}
    ip = conts["job-p0-1"]["ip"]
    assert expected["job-p0-1"] == {"container": "job-p0-1", "host": conts["job-p0-1"]["host"], "need": 2, "ranks": [2, 3],
                                    "of": [f"tcp://{ip}:{port}" for port in (5557, 5558, 5559, 5560)]}


def test_multi_pod_events_readiness_any_registration_order():
    """Whichever pod registers first, the conductor's endpoints satisfy the readiness check and verify's check;
    a pod missing its ranks does not."""
    cfg = contract_config(roles={"prefill": (1, 2, 4, 4), "decode": (1, 2, 4, 4)}, affinity=True)
    hosts = inventory(engine=3, control=1)
    plan = build_plan(cfg, hosts)
    conts = by_name(plan)
    pods = ["job-p0-0", "job-p0-1"]
    base = plan["kv_events"]["endpoint_port"]

    def services(order):
        """/services after the pods registered in ``order``: the k-th gets ranks 2k, 2k+1 (id_offset)."""
        return {"services": [{"Endpoint": f"tcp://{conts[name]['ip']}:{base + 2 * k + r}", "DPRank": 2 * k + r}
                             for k, name in enumerate(order) for r in range(2)]}

    check = next(c for c in readiness_checks(plan, {"ready": 5, "port": 5}) if c["until"] == "endpoints")
    for order in (pods, pods[::-1]):
        assert condition_met("endpoints", 200, services(order), check["endpoints"]), order
    partial = {"services": services(pods[::-1])["services"][:2]}
    assert not condition_met("endpoints", 200, partial, check["endpoints"])
    assert missing_endpoints(partial, check["endpoints"]) == [
        f"job-p0-0: 0/2 of tcp://{conts['job-p0-0']['ip']}:{base}..{base + 3}"]


def test_event_base_moves_for_everyone_when_reserved():
    cfg = contract_config(roles={"prefill": (1, 2, 2, 2), "decode": (1, 1, 2, 1)}, affinity=True)
    hosts = inventory(engine=2, control=1, e2={"motor_reserved_ports": [5558]})
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    # either pod may get rank 0 or 1 (registration order): base 5557 or 5558 would put a rank on 5558, reserved on e2
    assert plan["kv_events"]["endpoint_port"] == 5559
    for cont in plan["containers"]:
        uc = cont["user_config"]
        assert uc["motor_engine_prefill_config"]["engine_config"]["kv_events_config"]["endpoint"] == "tcp://*:5559"
        assert uc["motor_coordinator_config"]["prefill_kv_event_config"]["endpoint"] == "tcp://*:5559"


def test_non_publishing_events_shift_per_container():
    cfg = contract_config(roles={"prefill": (1, 1, 2, 1), "decode": (2, 1, 2, 1)}, decode_events=True)
    plan = build_plan(cfg, inventory(engine=1, control=1))
    conts = by_name(plan)
    assert conts["job-d0-0"]["port_map"]["kv_events"] == 5557 and conts["job-d1-0"]["port_map"]["kv_events"] == 5558
    assert conts["job-d1-0"]["user_config"]["motor_engine_decode_config"]["engine_config"]["kv_events_config"] == {
        "publisher": "zmq", "enable_kv_cache_events": True, "endpoint": "tcp://*:5558", "topic": "kv-events",
        "replay_endpoint": "tcp://*:6668"}


def test_engine_hosts_of_another_hardware_type_are_refused():
    """Issue 36: a job whose hardware_type does not match its engine hosts is an error listing every such host (it was
    a warning, and the host stayed idle); a control host of another type is fine."""
    cfg = contract_config(roles={"prefill": (1, 1, 8, 1), "decode": (1, 1, 8, 1)})
    hosts = inventory(engine=3, control=1, e1={"motor_hardware_type": "800I_A3"}, e3={"motor_hardware_type": "800I_A3"})
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, hosts)
    assert [p.path for p in err.value.problems] == ["hosts.e1.motor_hardware_type", "hosts.e3.motor_hardware_type"]
    assert "800I_A3 host in motor_engine_hosts, but the job's hardware_type is 800I_A2" in str(err.value)
    plan = build_plan(cfg, inventory(engine=2, control=1, c1={"motor_hardware_type": "800I_A3"}))
    assert {c["host"] for c in plan["containers"] if c["tier"] == 2} == {"e1", "e2"}


# --------------------------------------------------------------------------------------------------
# control plane


def test_control_plane_spread_over_control_hosts():
    cfg = contract_config(affinity=True, pool=True)
    plan = build_plan(cfg, inventory(engine=1, control=3))
    conts = by_name(plan)
    assert conts["job-controller"]["host"] == conts["job-coordinator"]["host"] == "c1"
    assert conts["job-kv-conductor"]["host"] == "c2" and conts["job-kv-pool"]["host"] == "c3"
    assert conts["job-coordinator"]["env"]["KV_CONDUCTOR_SERVICE"] == "10.0.1.2"
    assert conts["job-p0-0"]["env"]["KVP_MASTER_SERVICE"] == "10.0.1.3"
    assert plan["kv_pool"] == {"host": "c3", "ip": "10.0.1.3", "port": 50088, "metrics_port": 9003}
    plan = build_plan(cfg, inventory(engine=1, control=2))
    conts = by_name(plan)
    assert conts["job-kv-conductor"]["host"] == "c2" and conts["job-kv-pool"]["host"] == "c1"


def test_control_falls_back_to_first_engine_host_without_collisions():
    cfg = contract_config(roles={"prefill": (1, 1, 4, 2), "decode": (1, 1, 4, 2)}, affinity=True, pool=True)
    hosts = inventory(engine=2, control=0)
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    assert {c["host"] for c in plan["containers"] if c["tier"] < 2} == {"e1"}
    assert any("no host in motor_control_hosts" in w for w in plan["warnings"])


def test_hosts_without_group_names_are_in_both_groups():
    cfg = contract_config()
    hosts = {"a": {"motor_host_ip": "10.9.0.1"}}
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    assert {c["host"] for c in plan["containers"]} == {"a"}


def test_reserved_ports_move_control_plane_ports_with_warnings():
    cfg = contract_config(pool=True)
    hosts = inventory(engine=1, control=1, c1={"motor_reserved_ports": [1025, "2026-2030", "50088"]})
    plan = build_plan(cfg, hosts)
    assert_invariants(plan, hosts)
    assert plan["coordinator"]["infer_port"] == 1026
    assert plan["controller"]["api_port"] == 2031 and plan["controller"]["obs_port"] == 2032
    assert plan["kv_pool"]["port"] == 50089
    # only defaults move, and the warning names the key that pins them
    assert "motor_coordinator_config.api_config.coordinator_api_infer_port: default 1025 is taken or reserved on " \
           "host c1, the plan uses 1026 (clients must use the port shown in the plan; set " \
           "motor_coordinator_config.api_config.coordinator_api_infer_port to a free port to pin it)" in plan["warnings"]
    for cont in plan["containers"]:
        assert cont["user_config"]["kv_cache_pool_config"]["port"] == 50089
        assert cont["user_config"]["motor_coordinator_config"]["api_config"]["coordinator_api_infer_port"] == 1026
    assert by_name(plan)["job-kv-pool"]["env"]["KV_POOL_PORT"] == "50089"


def test_user_ports_are_preferred_values():
    cfg = contract_config(kv_port=40000)
    cfg["user_config"]["motor_controller_config"]["api_config"] = {"controller_api_port": 7000}
    workers = {"num_workers": 2, "worker_metaserver_base_port": 0}
    cfg["user_config"]["motor_coordinator_config"]["inference_workers_config"] = workers
    plan = build_plan(cfg, inventory(engine=1, control=1))
    conts = by_name(plan)
    assert plan["controller"]["api_port"] == 7000
    assert conts["job-coordinator"]["ports"] == [1025, 1026, 1027]
    assert conts["job-p0-0"]["port_map"]["kv"] == 40000
    assert conts["job-p0-0"]["user_config"]["motor_engine_prefill_config"]["engine_config"]["kv_transfer_config"]["kv_port"] == 40000
    assert not any("kv_port" in w for w in plan["warnings"])


def test_kv_pool_metrics_port_reserved_is_an_error():
    cfg = contract_config(pool=True)
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1, c1={"motor_reserved_ports": [9003]}))
    assert str(err.value).startswith("hosts.c1.motor_reserved_ports: mooncake_master (kv_pool) always binds")


def test_conductor_without_affinity_warns_and_is_not_wired():
    cfg = contract_config(conductor=True)
    plan = build_plan(cfg, inventory(engine=1, control=1))
    assert "KV_CONDUCTOR_SERVICE" not in by_name(plan)["job-coordinator"]["env"]
    assert any("kv_conductor_config.http_server_port" in w for w in plan["warnings"])


# --------------------------------------------------------------------------------------------------
# env


def test_env_json_cannot_override_wiring_but_other_keys_pass():
    env_config = {"motor_common_env": {"POD_IP": "1.2.3.4"}, "motor_engine_prefill_env": {"ROLE": "decode"}}
    cfg = contract_config(env={r: {"POD_IP": "1.2.3.4", "MY_VAR": "x"} for r in ("controller", "coordinator", "prefill", "decode")}
                          | {"prefill": {"POD_IP": "1.2.3.4", "ROLE": "decode", "MY_VAR": "x"}},
                          env_config=env_config)
    plan = build_plan(cfg, inventory(engine=1, control=1))
    p0 = by_name(plan)["job-p0-0"]
    assert p0["env"]["POD_IP"] == "10.0.0.1" and p0["env"]["ROLE"] == "prefill" and "MY_VAR" not in p0["env"]
    assert list(p0["env"]) == sorted(p0["env"])
    # env.json reaches the container through set_*_env (as in PyMotor), without the variables the plan wires
    assert p0["shell_env"]["set_prefill_env"]["MY_VAR"] == "x" and not {"POD_IP", "ROLE"} & set(p0["shell_env"]["set_prefill_env"])
    assert p0["shell_env"]["set_kv_conductor_env"]["PYTHONPATH"] == "/tmp/motor/examples/deployer${PYTHONPATH:+:$PYTHONPATH}"
    warnings = [w for w in plan["warnings"] if w.startswith("env_config.")]
    assert "env_config.motor_common_env.POD_IP: is set by the deployment plan; the env.json value is ignored " \
           "(remove it from env.json)" in warnings
    assert any(w.startswith("env_config.motor_engine_prefill_env.ROLE") for w in warnings)
    assert len(warnings) == len(set(warnings))


def test_no_pool_means_no_pool_wiring():
    plan = build_plan(contract_config(), inventory(engine=1, control=1))
    for cont in plan["containers"]:
        assert "KVP_MASTER_SERVICE" not in cont["env"] and "PYTHONHASHSEED" not in cont["env"]
        assert cont["ipc_mode"] is None and cont["shm_size"] in ("4g", "1g")
    assert plan["kv_pool"] is None and plan["kv_conductor"] is None and plan["kv_events"] is None


def test_nic_and_ipv6_hosts():
    cfg = contract_config()
    hosts = {"a": {"motor_host_ip": "fd00::1", "motor_nic": "bond0", "group_names": [ENGINE, CONTROL]}}
    plan = build_plan(cfg, hosts)
    p0 = by_name(plan)["job-p0-0"]
    assert p0["env"]["HCCL_SOCKET_IFNAME"] == "bond0" and p0["env"]["POD_IP"] == "fd00::1"
    assert plan["coordinator"]["url"] == "http://[fd00::1]:1025"


# --------------------------------------------------------------------------------------------------
# input errors


@pytest.mark.parametrize("hosts, expected", [
    ({}, "hosts: must be a non-empty mapping"),
    ({"a": {"group_names": [ENGINE]}}, "hosts.a.motor_host_ip: missing"),
    ({"a": {"motor_host_ip": "node-a"}}, "hosts.a.motor_host_ip: 'node-a' is not an IP address"),
    ({"a": {"ansible_host": "node-a"}}, "hosts.a.motor_host_ip: missing, and ansible_host 'node-a' is a host name"),
    ({"a": {"motor_host_ip": "", "ansible_host": "10.0.0.1", "motor_nic": ""}}, None),
    ({"a": {"motor_host_ip": "10.0.0.1"}, "b": {"motor_host_ip": "10.0.0.1"}},
     "hosts.b.motor_host_ip: 10.0.0.1 is also the address of host a"),
    ({"a": {"motor_host_ip": "10.0.0.1", "motor_npu_ids": [0, 8]}}, "hosts.a.motor_npu_ids[1]: 8 is outside 0..7"),
    ({"a": {"motor_host_ip": "10.0.0.1", "motor_npu_ids": [0, 0]}}, "hosts.a.motor_npu_ids: lists an NPU id twice"),
    ({"a": {"motor_host_ip": "10.0.0.1", "motor_reserved_ports": ["x"]}},
     "hosts.a.motor_reserved_ports[0]: 'x' is not a port or a range"),
    ({"a": {"motor_host_ip": "10.0.0.1", "motor_reserved_ports": {"a": 1}}},
     "hosts.a.motor_reserved_ports: must be a list of ports"),
    ({"a": {"motor_host_ip": "10.0.0.1", "motor_nic": "not a nic"}}, "hosts.a.motor_nic: 'not a nic' is not"),
    ({"a": {"motor_host_ip": "10.0.0.1", "motor_hardware_type": "A5"}}, "hosts.a.motor_hardware_type: 'A5' is not supported"),
    ({"a": {"motor_host_ip": "10.0.0.1", "group_names": [CONTROL]}}, "hosts: no 800I_A2 host in group motor_engine_hosts"),
    ({"a": "x"}, "hosts.a: must be a mapping"),
])
def test_host_errors(hosts, expected):
    if expected is None:  # empty values count as absent: ansible_host is the address, the NIC eth0
        plan = build_plan(contract_config(), hosts)
        assert plan["hosts"]["a"]["ip"] == "10.0.0.1" and plan["hosts"]["a"]["nic"] == "eth0"
        return
    with pytest.raises(MotorPlanError) as err:
        build_plan(contract_config(), hosts)
    assert any(line.startswith(expected) for line in str(err.value).splitlines()), str(err.value)
    assert err.value.problems


def test_host_errors_name_kinds_not_python_types():
    class AnsibleDict(dict):  # Ansible hands over subclasses such as _AnsibleLazyTemplateDict
        pass

    hosts = {"a": {"motor_host_ip": "10.0.0.1", "motor_npu_ids": AnsibleDict(first=0),
                   "motor_reserved_ports": AnsibleDict(ssh=22)}}
    with pytest.raises(MotorPlanError) as err:
        build_plan(contract_config(), hosts)
    assert str(err.value).splitlines() == [
        'hosts.a.motor_npu_ids: must be a list of NPU ids, got a mapping (e.g. [1, 2] or "0-3")',
        'hosts.a.motor_reserved_ports: must be a list of ports, got a mapping (e.g. [1, 2] or "1-4")']


def test_all_host_problems_reported_at_once():
    hosts = {"a": {}, "b": {"motor_host_ip": "10.0.0.2", "motor_npu_ids": ["z"], "motor_reserved_ports": ["70000"]}}
    with pytest.raises(MotorPlanError) as err:
        build_plan(contract_config(), hosts)
    paths = [p.path for p in err.value.problems]
    assert paths == ["hosts.a.motor_host_ip", "hosts.b.motor_npu_ids[0]", "hosts.b.motor_reserved_ports[0]"]
    for line in str(err.value).splitlines():
        assert line.endswith(")")


@pytest.mark.parametrize("mutate, expected", [
    (lambda c: c.pop("user_config"), "config: is not the output of pymotor.ascend.motor_config"),
    (lambda c: c.update(hardware_type="Ascend950PR"), "motor_deploy_config.hardware_type: 'Ascend950PR' is not supported"),
    (lambda c: c.update(job_id="bad name"), "motor_deploy_config.job_id: 'bad name' cannot prefix container names"),
    (lambda c: c.update(engines={}), "config.engines: no engine role"),
    (lambda c: c["engines"]["prefill"].update(npus_per_pod=9), "motor_deploy_config.p_pod_npu_num: 9 NPUs per pod do not fit"),
    (lambda c: c["engines"]["decode"].update(count=0), "motor_deploy_config.d_instances_num: must be a positive integer"),
])
def test_config_errors(mutate, expected):
    cfg = contract_config()
    mutate(cfg)
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1))
    assert str(err.value).startswith(expected), str(err.value)


def test_not_enough_npus_message():
    cfg = contract_config(roles={"prefill": (4, 1, 8, 1), "decode": (4, 1, 8, 1)})
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=2, control=1))
    assert str(err.value) == (
        "motor_deploy_config: 800I_A2 engine hosts need 64 NPUs (prefill 4 x 1 pods x 8, decode 4 x 1 pods x 8), "
        "available 16 NPUs on 2 hosts (add engine hosts, list more motor_npu_ids, or lower the counts "
        "(motor_deploy_config.p_instances_num, d_instances_num, p_pod_npu_num, d_pod_npu_num); "
        "in motor_engine_hosts: 800I_A2: 16 NPUs on 2 hosts)")


def test_ports_exhausted_is_an_error():
    cfg = contract_config()
    hosts = inventory(engine=1, control=1, e1={"motor_reserved_ports": ["1024-65535"]})
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, hosts)
    assert "hosts.e1.motor_reserved_ports: no free TCP port left" in str(err.value)


def test_user_port_without_room_above_names_the_config_key():
    # both node managers prefer 65535 on the one engine host: the second finds nothing above it
    cfg = contract_config()
    for role in ("prefill", "decode"):
        cfg["user_config"][f"motor_engine_{role}_config"]["motor_nodemanger_config"] = {
            "api_config": {"node_manager_port": 65535}}
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1))
    assert [p.path for p in err.value.problems] == [
        "motor_engine_decode_config.motor_nodemanger_config.api_config.node_manager_port"]
    assert "from 65535 up to 65535 on host e1" in str(err.value) and "use a lower port" in str(err.value)


def test_reservations_above_a_user_port_name_the_config_key():
    cfg = contract_config()
    cfg["user_config"]["motor_engine_prefill_config"]["engine_config"]["data_parallel_rpc_port"] = 60000
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, inventory(engine=1, control=1, e1={"motor_reserved_ports": ["60000-65535"]}))
    assert [p.path for p in err.value.problems] == ["motor_engine_prefill_config.engine_config.data_parallel_rpc_port"]


def test_sections_of_the_wrong_type_fall_back_to_defaults():
    # motor_config reports these; called directly the planner must not crash on them
    cfg = contract_config()
    cfg["user_config"]["motor_controller_config"]["api_config"] = [2026]
    cfg["user_config"]["motor_coordinator_config"]["api_config"] = "1025"
    cfg["user_config"]["motor_coordinator_config"]["inference_workers_config"] = 4
    cfg["user_config"]["motor_engine_prefill_config"]["motor_nodemanger_config"] = {"api_config": 1, "endpoint_config": []}
    plan = build_plan(cfg, inventory(engine=1, control=1))
    assert plan["controller"]["api_port"] == 2026 and plan["coordinator"]["infer_port"] == 1025
    assert by_name(plan)["job-p0-0"]["port_map"]["node_manager"] == 3026


# --------------------------------------------------------------------------------------------------
# previous: sticky placement for scale / reconfigure


def masked(cont):
    """A container entry with the instance counts of motor_deploy_config masked (they change when scaling)."""
    cont = copy.deepcopy(cont)
    deploy = cont["user_config"].get("motor_deploy_config") or {}
    for key in [k for k in deploy if k.endswith("_instances_num")]:
        deploy[key] = "*"
    return cont


def assert_kept(before, after, names):
    """Every container in ``names`` is byte-identical in both plans but for the masked instance counts."""
    old, new = by_name(before), by_name(after)
    for name in names:
        assert masked(old[name]) == masked(new[name]), name


def seed_scaled(p_count):
    return load_fixture("seed_pd_separation", [{"motor_deploy_config": {"p_instances_num": p_count}}])


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_previous_none_empty_or_unusable_is_todays_plan(name):
    cfg = load_fixture(name)
    hosts = inventory(engine=4, control=1, e1={"motor_reserved_ports": [3026, "10000-10003"]})  # defaults move
    try:
        plan = build_plan(cfg, hosts)
    except MotorPlanError:
        pytest.skip("does not fit this inventory")
    assert build_plan(cfg, hosts, None) == plan
    assert build_plan(cfg, hosts, {}) == plan
    assert build_plan(cfg, hosts, ["not", "a", "dict"]) == plan
    assert build_plan(cfg, hosts, {"ghost-p0-0": {"host": "e1"}, 7: None}) == plan
    # the plan's own placement keeps everything: a fixed point
    assert build_plan(cfg, hosts, placement_of(plan)) == plan
    # whole previous plan containers keyed by name do too (extra keys are ignored)
    assert build_plan(cfg, hosts, by_name(plan)) == plan


def test_seed_scale_out_and_back_keeps_existing_containers():
    hosts = inventory(engine=2, control=1)
    one = build_plan(seed_scaled(1), hosts)
    two = build_plan(seed_scaled(2), hosts, placement_of(one))
    assert_invariants(two, hosts)
    survivors = sorted(by_name(one))
    assert set(by_name(two)) - set(survivors) == {"mindie-motor-p1-0"}
    assert_kept(one, two, survivors)
    p1 = by_name(two)["mindie-motor-p1-0"]
    assert (p1["host"], p1["npu_ids"]) == ("e2", [0, 1, 2, 3])  # p0's DP ranks already publish on e1
    assert p1["port_map"]["kv_events"] == 5557
    assert by_name(two)["mindie-motor-p0-0"]["user_config"]["motor_deploy_config"]["p_instances_num"] == 2
    back = build_plan(seed_scaled(1), hosts, placement_of(two))
    assert sorted(by_name(back)) == survivors
    assert_kept(one, back, survivors)
    assert back == one


def test_previous_keeps_decode_where_first_fit_would_move_it():
    def cfg(p_count):
        return contract_config(roles={"prefill": (p_count, 1, 4, 1), "decode": (1, 1, 4, 1)})

    hosts = inventory(engine=3, control=1)
    one = build_plan(cfg(1), hosts)
    assert [(c["name"], c["host"], c["npu_ids"][0]) for c in one["containers"] if c["tier"] == 2] == [
        ("job-d0-0", "e1", 4), ("job-p0-0", "e1", 0)]
    # first fit without previous: p1 takes e1 4-7 and pushes d0 to e2
    fresh = by_name(build_plan(cfg(2), hosts))
    assert (fresh["job-p1-0"]["host"], fresh["job-d0-0"]["host"]) == ("e1", "e2")
    # with previous d0 stays, p1 goes to the next free block, its ports do not disturb anyone
    two = build_plan(cfg(2), hosts, placement_of(one))
    assert_invariants(two, hosts)
    assert_kept(one, two, ["job-d0-0", "job-p0-0", "job-controller", "job-coordinator"])
    p1 = by_name(two)["job-p1-0"]
    assert (p1["host"], p1["npu_ids"]) == ("e2", [0, 1, 2, 3])
    # scale in from the first-fit plan: d0 stays on e2 instead of moving into the NPUs p1 frees
    fresh_two = build_plan(cfg(2), hosts)
    back = build_plan(cfg(1), hosts, placement_of(fresh_two))
    assert by_name(back)["job-d0-0"]["host"] == "e2"
    assert_kept(fresh_two, back, ["job-d0-0", "job-p0-0", "job-controller", "job-coordinator"])
    assert by_name(build_plan(cfg(1), hosts))["job-d0-0"]["host"] == "e1"


def test_kept_pods_take_their_ports_before_new_pods():
    def cfg(p_count):
        return contract_config(roles={"prefill": (p_count, 1, 2, 1), "decode": (1, 1, 2, 1)})

    # without affinity p0, p1 and d0 share e1, each with the next free ports
    hosts = inventory(engine=1, control=1)
    two = build_plan(cfg(2), hosts)
    before = by_name(two)
    assert before["job-p1-0"]["port_map"] == {"node_manager": 3027, "engine_base": 10002, "dp_rpc": 9001, "kv": 30003,
                                              "hccl": 60032}
    grown = build_plan(cfg(3), hosts, placement_of(two))
    assert_invariants(grown, hosts)
    assert_kept(two, grown, ["job-p0-0", "job-p1-0", "job-d0-0", "job-controller", "job-coordinator"])
    p2 = by_name(grown)["job-p2-0"]
    assert p2["npu_ids"] == [6, 7] and p2["port_map"]["node_manager"] == 3028
    # scale in: d0 keeps the ports it got next to p1
    shrunk = build_plan(cfg(1), hosts, placement_of(two))
    assert_kept(two, shrunk, ["job-p0-0", "job-d0-0", "job-controller", "job-coordinator"])
    # a kept pod whose previous port is taken by a pod kept before it (nonsense previous) gets a fresh one
    previous = placement_of(two)
    previous["job-p1-0"]["port_map"]["node_manager"] = 3026
    conts = by_name(build_plan(cfg(2), hosts, previous))
    assert conts["job-p0-0"]["port_map"]["node_manager"] == 3026
    assert conts["job-p1-0"]["npu_ids"] == before["job-p1-0"]["npu_ids"]
    assert conts["job-p1-0"]["port_map"] == dict(before["job-p1-0"]["port_map"], node_manager=3027)
    # previous ports that are not port numbers are ignored
    previous = placement_of(two)
    previous["job-p1-0"]["port_map"] = {"node_manager": "x", "engine_base": None, "dp_rpc": True, "kv": [1]}
    assert by_name(build_plan(cfg(2), hosts, previous))["job-p1-0"] == before["job-p1-0"]


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda prev: prev["job-d0-0"].update(host="ghost"), id="unknown-host"),
    pytest.param(lambda prev: prev["job-d0-0"].update(host="c1"), id="control-host"),
    pytest.param(lambda prev: prev["job-d0-0"].update(host="x1"), id="other-hardware-host"),
    pytest.param(lambda prev: prev["job-d0-0"].update(npu_ids=[6, 7, 8, 9]), id="npus-out-of-range"),
    pytest.param(lambda prev: prev["job-d0-0"].update(npu_ids=[4, 5]), id="npu-count-changed"),
    pytest.param(lambda prev: prev["job-d0-0"].update(npu_ids=[3, 4, 6, 7]), id="not-contiguous"),
    pytest.param(lambda prev: prev["job-d0-0"].update(host="e1", npu_ids=[0, 1, 2, 3]), id="npus-of-a-kept-pod"),
    pytest.param(lambda prev: prev["job-d0-0"].update(npu_ids=["4", "x", 6, 7]), id="npu-not-an-int"),
    pytest.param(lambda prev: prev["job-d0-0"].update(npu_ids="4-7"), id="npus-not-a-list"),
    pytest.param(lambda prev: prev["job-d0-0"].pop("host"), id="no-host"),
    pytest.param(lambda prev: prev.update({"job-d0-0": "e1"}), id="entry-not-a-dict"),
    pytest.param(lambda prev: prev.pop("job-d0-0"), id="missing"),
])
def test_unusable_previous_entries_place_the_instance_fresh(mutate):
    cfg = contract_config(roles={"prefill": (1, 1, 4, 1), "decode": (1, 1, 4, 1)})
    hosts = inventory(engine=2, control=1, x1={"motor_host_ip": "10.0.2.1", "group_names": [CONTROL],
                                               "motor_hardware_type": "800I_A3"})
    hosts["e1"]["motor_npu_ids"] = "0-7"
    # previous: p0 on e1 0-3, d0 on e2 4-7 (not where first fit would put it)
    previous = {"job-p0-0": {"host": "e1", "npu_ids": [0, 1, 2, 3], "port_map": {}},
                "job-d0-0": {"host": "e2", "npu_ids": [4, 5, 6, 7], "port_map": {}}}
    plan = build_plan(cfg, hosts, previous)
    assert (by_name(plan)["job-d0-0"]["host"], by_name(plan)["job-d0-0"]["npu_ids"]) == ("e2", [4, 5, 6, 7])
    mutate(previous)
    plan = build_plan(cfg, hosts, previous)
    assert_invariants(plan, hosts)
    conts = by_name(plan)
    assert (conts["job-p0-0"]["host"], conts["job-p0-0"]["npu_ids"]) == ("e1", [0, 1, 2, 3])
    assert (conts["job-d0-0"]["host"], conts["job-d0-0"]["npu_ids"]) == ("e1", [4, 5, 6, 7])  # first fit
    assert not any(w.startswith("previous") for w in plan["warnings"])


def test_npus_no_longer_listed_or_a3_odd_die_pair_are_not_kept():
    cfg = contract_config(hw="800I_A3", roles={"prefill": (1, 1, 2, 1), "decode": (1, 1, 2, 1)})
    hosts = inventory(engine=1, control=1, e1={"motor_npu_ids": "0-9"})
    previous = {"job-p0-0": {"host": "e1", "npu_ids": [1, 2]}, "job-d0-0": {"host": "e1", "npu_ids": [8, 9]}}
    conts = by_name(build_plan(cfg, hosts, previous))
    assert conts["job-d0-0"]["npu_ids"] == [8, 9]  # kept
    assert conts["job-p0-0"]["npu_ids"] == [0, 1]  # 1-2 splits two die pairs: placed fresh
    hosts["e1"]["motor_npu_ids"] = "0-7"
    conts = by_name(build_plan(cfg, hosts, previous))
    assert conts["job-d0-0"]["npu_ids"] == [2, 3]


def test_an_instance_keeps_all_its_pods_or_none():
    cfg = contract_config(roles={"prefill": (1, 2, 4, 2), "decode": (1, 1, 4, 1)})
    hosts = inventory(engine=3, control=1)
    previous = {"job-p0-0": {"host": "e2", "npu_ids": [4, 5, 6, 7]}, "job-p0-1": {"host": "e3", "npu_ids": [0, 1, 2, 3]},
                "job-d0-0": {"host": "e3", "npu_ids": [4, 5, 6, 7]}}
    conts = by_name(build_plan(cfg, hosts, previous))
    assert [(conts[n]["host"], conts[n]["npu_ids"][0]) for n in ("job-p0-0", "job-p0-1", "job-d0-0")] == [
        ("e2", 4), ("e3", 0), ("e3", 4)]
    # both pods on one host is not a valid placement: p0 is placed fresh (first fit), d0 still kept
    previous["job-p0-1"]["host"] = "e2"
    previous["job-p0-1"]["npu_ids"] = [0, 1, 2, 3]
    conts = by_name(build_plan(cfg, hosts, previous))
    assert [(conts[n]["host"], conts[n]["npu_ids"][0]) for n in ("job-p0-0", "job-p0-1", "job-d0-0")] == [
        ("e1", 0), ("e2", 0), ("e3", 4)]
    # one pod unusable: the whole instance is placed fresh
    previous = {"job-p0-0": {"host": "e2", "npu_ids": [4, 5, 6, 7]}, "job-p0-1": {"host": "e3", "npu_ids": [0, 1, 2]}}
    conts = by_name(build_plan(cfg, hosts, previous))
    assert [(conts[n]["host"], conts[n]["npu_ids"][0]) for n in ("job-p0-0", "job-p0-1", "job-d0-0")] == [
        ("e1", 0), ("e2", 0), ("e1", 4)]


def test_previous_respects_the_publishing_rank_rule():
    cfg = contract_config(roles={"prefill": (2, 1, 2, 1), "decode": (1, 1, 2, 1)}, affinity=True)
    hosts = inventory(engine=2, control=1)
    previous = {"job-p0-0": {"host": "e1", "npu_ids": [0, 1]}, "job-p1-0": {"host": "e1", "npu_ids": [2, 3]}}
    conts = by_name(build_plan(cfg, hosts, previous))
    assert (conts["job-p0-0"]["host"], conts["job-p0-0"]["npu_ids"]) == ("e1", [0, 1])
    assert conts["job-p1-0"]["host"] == "e2"  # rank 0 already publishes on e1


def test_control_ports_and_event_base_are_kept():
    cfg = contract_config(roles={"prefill": (1, 1, 2, 1), "decode": (1, 1, 2, 1)}, affinity=True, pool=True)
    hosts = inventory(engine=2, control=1, e1={"motor_reserved_ports": [5557, 10000]}, c1={"motor_reserved_ports": [1025]})
    before = build_plan(cfg, hosts)
    assert before["coordinator"]["infer_port"] == 1026 and before["kv_events"]["endpoint_port"] == 5558
    # the reservations are lifted: nothing moves back
    hosts = inventory(engine=2, control=1)
    after = build_plan(cfg, hosts, placement_of(before))
    assert after["coordinator"] == before["coordinator"] and after["kv_events"] == before["kv_events"]
    assert_kept(before, after, sorted(by_name(before)))
    # a kept port that is reserved now, or below a raised preferred value, moves; the rest stays
    hosts = inventory(engine=2, control=1, c1={"motor_reserved_ports": [1027, 5558]})
    cfg["user_config"]["motor_controller_config"]["api_config"] = {"controller_api_port": 2100}
    after = build_plan(cfg, hosts, placement_of(before))
    assert_invariants(after, hosts)
    # mgmt loses 1027; obs keeps 1028, so mgmt gets the next free port above its preferred 1026
    assert [after["coordinator"][k] for k in ("infer_port", "mgmt_port", "obs_port")] == [1026, 1029, 1028]
    assert after["controller"]["api_port"] == 2100 and after["controller"]["obs_port"] == 2027
    assert after["kv_events"]["endpoint_port"] == 5558  # 5558 is reserved on c1, where nothing publishes
    # an event base no longer free for every rank is planned as usual (from the preferred 5557), for everyone
    hosts = inventory(engine=2, control=1, e1={"motor_reserved_ports": [5558]})
    after = build_plan(cfg, hosts, placement_of(before))
    assert after["kv_events"]["endpoint_port"] == 5557
    assert by_name(after)["job-p0-0"]["port_map"]["kv_events"] == 5557
    assert by_name(after)["job-coordinator"]["user_config"]["motor_coordinator_config"][
        "prefill_kv_event_config"]["endpoint"] == "tcp://*:5557"


def test_previous_that_leaves_no_room_falls_back_to_a_fresh_plan():
    cfg = contract_config(roles={"prefill": (1, 1, 4, 1), "decode": (1, 1, 4, 1)})
    hosts = inventory(engine=1, control=1)
    fresh = build_plan(cfg, hosts)
    # d0 in the middle of the only host: no block of 4 is left for p0
    plan = build_plan(cfg, hosts, {"job-d0-0": {"host": "e1", "npu_ids": [2, 3, 4, 5]}})
    assert plan["warnings"][:-1] == fresh["warnings"]
    assert plan["warnings"][-1].startswith("previous: the running containers cannot all keep their place "
                                           "(motor_deploy_config.p_instances_num: cannot place prefill instance 0")
    assert plan["containers"] == fresh["containers"]
    # a config that cannot be planned at all reports the plain error
    with pytest.raises(MotorPlanError) as err:
        build_plan(contract_config(roles={"prefill": (3, 1, 4, 1), "decode": (1, 1, 4, 1)}), hosts, placement_of(fresh))
    assert str(err.value).startswith("motor_deploy_config: 800I_A2 engine hosts need 16 NPUs")


# --------------------------------------------------------------------------------------------------
# table and filter shim


def test_plan_table():
    plan = build_plan(load_fixture("seed_pd_separation"), inventory(engine=2, control=1))
    text = plan_table(plan)
    lines = text.splitlines()
    assert lines[0].split() == ["HOST", "IP", "CONTAINER", "ROLE", "TIER", "NPUS", "PORTS"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    rows = [line.split() for line in lines[2:9]]
    assert rows[0][:6] == ["e1", "10.0.0.1", "mindie-motor-d0-0", "decode", "2", "4-7"]
    assert rows[1][2] == "mindie-motor-p0-0" and rows[1][6] == "3026,5557-5558,6667-6668,9000,10000-10003,28000-28003,60000-60031"
    assert rows[2][:6] == ["c1", "10.0.1.1", "mindie-motor-kv-pool", "kv_pool", "0", "-"]
    assert rows[6][2:5] == ["mindie-motor-kv-watcher", "kv_watcher", "1"]
    assert "7 containers on 2 hosts" in lines[9] and "http://10.0.1.1:1025" in lines[9]
    assert lines[10].startswith("WARNING: ")


def test_filter_shim():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.pymotor.ascend.plugins.filter.motor_plan import FilterModule

    filters = FilterModule().filters()
    assert set(filters) == {"motor_plan", "motor_plan_table", "motor_plan_model_dirs", "motor_plan_weight_dir",
                            "motor_plan_cert_dirs", "motor_plan_vip"}
    plan = filters["motor_plan"](contract_config(), inventory(engine=1, control=1))
    assert "job-p0-0" in filters["motor_plan_table"](plan)
    assert filters["motor_plan"](contract_config(), inventory(engine=1, control=1), None) == plan
    assert filters["motor_plan"](contract_config(), inventory(engine=1, control=1), placement_of(plan)) == plan
    moved = {"job-d0-0": {"host": "e1", "npu_ids": [6, 7], "port_map": {"node_manager": 4100}}}
    conts = by_name(filters["motor_plan"](contract_config(), inventory(engine=1, control=1), previous=moved))
    assert conts["job-d0-0"]["npu_ids"] == [6, 7] and conts["job-d0-0"]["port_map"]["node_manager"] == 4100
    with pytest.raises(AnsibleFilterError, match="hosts: must be a non-empty mapping"):
        filters["motor_plan"](contract_config(), {})
    with pytest.raises(AnsibleFilterError, match="expects the output of pymotor.ascend.motor_plan"):
        filters["motor_plan_table"]({"x": 1})


def test_invariant_check_catches_planner_bugs():

    planner = Planner(contract_config(), inventory(engine=1, control=1))  # pylint: disable=protected-access
    planner.place_engines()
    planner.place_control()
    planner.assign_ports()
    planner.assign_hccl_ports()
    planner.build_containers()
    planner.check_invariant()
    p0 = next(c for c in planner.containers if c["name"] == "job-p0-0")
    d0 = next(c for c in planner.containers if c["name"] == "job-d0-0")
    d0["ports"].append(p0["ports"][0])
    d0["npu_ids"].append(p0["npu_ids"][0])
    with pytest.raises(MotorPlanError) as err:
        planner.check_invariant()
    text = str(err.value)
    assert f"plan: port {p0['ports'][0]} is bound twice on e1 (job-d0-0 and job-p0-0)" in text or \
           f"plan: port {p0['ports'][0]} is bound twice on e1 (job-p0-0 and job-d0-0)" in text
    assert "is given to" in text and "this is a bug in motor_plan" in text


def test_model_and_weight_dirs_of_entries_and_of_a_whole_config():
    """One selection (Python) for the discovery before planning (whole config) and the precheck (plan entries)."""

    user = json.loads((REPO / "examples" / "seed_pd_separation" / "user_config.json").read_text())
    user["motor_engine_decode_config"]["engine_config"]["model"] = "/models/decode/"
    user["motor_deploy_config"]["weight_mount_path"] = "/data/w//"
    config = normalize(user, json.loads((REPO / "examples" / "seed_pd_separation" / "env.json").read_text()))
    plan = build_plan(config, inventory(engine=2, control=1))
    coordinator = config["user_config"].get("motor_coordinator_config", {}).get("prefill_kv_event_config", {})
    coordinator_model = str(coordinator.get("model_path", "")).rstrip("/")
    assert model_dirs(config) == ["/mnt/weight/qwen3_8B", "/models/decode"] + (
        [coordinator_model] if coordinator_model not in ("", "/mnt/weight/qwen3_8B") else [])
    by_role = {c["role"]: c for c in plan["containers"]}
    assert model_dirs([by_role["decode"]]) == ["/models/decode"]
    assert model_dirs([by_role["controller"]]) == []
    assert set(model_dirs(plan["containers"])) <= set(model_dirs(config))
    assert weight_dir(user) == "/data/w" and weight_dir({}) == "/mnt/weight"


def test_misspelt_host_variables_are_problems_with_the_name_meant():
    cfg = contract_config()
    hosts = inventory(engine=1, control=1)
    hosts["e1"]["motor_var_names"] = ["motor_host_ip", "motor_npu_id", "motor_service_log_root", "motor_image"]
    hosts["c1"]["motor_var_names"] = ["motor_reserved_port", "motor_config_dir"]
    with pytest.raises(MotorPlanError) as err:
        build_plan(cfg, hosts)
    text = str(err.value)
    assert "hosts.e1.motor_npu_id: is not a host variable of the plan, so it would be ignored (did you mean motor_npu_ids?" in text
    assert "hosts.c1.motor_reserved_port:" in text and "did you mean motor_reserved_ports?" in text
    assert "motor_service_log_root" not in text and "motor_image" not in text and "motor_config_dir" not in text


def test_no_variable_the_collection_uses_looks_like_a_misspelt_host_variable():
    """Every motor_* name in the roles, playbooks, inventories and examples is either a host variable of the plan or
    far from all of them (else a role setting in group_vars would stop every plan)."""
    import re

    names = set()
    for folder in ("roles", "playbooks", "inventories", "examples", "extensions"):
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".j2", ".json"):
                # not the plugin names (pymotor.ascend.motor_host_probe)
                names.update(re.findall(r"(?<![.\w])motor_[a-z0-9_]+", path.read_text(encoding="utf-8", errors="replace")))
    plugins = {path.stem for path in (REPO / "plugins" / "modules").glob("*.py")}  # named in comments too
    assert len(names - plugins) > 50
    assert misspelt_host_vars(names - plugins) == []


def test_a_dns_name_in_ansible_host_is_one_problem_per_host_with_a_hint():
    hosts = {"npu-a2-01": {"ansible_host": "npu-a2-01.dc1.example.com", "group_names": [ENGINE]},
             "ctl": {"ansible_host": "ctl.dc1.example.com", "group_names": [CONTROL]},
             "ok": {"ansible_host": "npu-ok.dc1.example.com", "motor_host_ip": "10.0.0.3", "group_names": [ENGINE]}}
    with pytest.raises(MotorPlanError) as err:
        build_plan(contract_config(), hosts)
    lines = str(err.value).splitlines()
    assert [p.path for p in err.value.problems] == ["hosts.npu-a2-01.motor_host_ip", "hosts.ctl.motor_host_ip"]
    assert lines[0] == ("hosts.npu-a2-01.motor_host_ip: missing, and ansible_host 'npu-a2-01.dc1.example.com' is a "
                        "host name, not an IP address (set motor_host_ip to the address other hosts reach this one on, "
                        "or plan with discovery (deploy.yml, or plan.yml -e motor_plan_discover=true), which takes the "
                        "address of motor_nic or of the default route's interface)")
    assert "is not an IP address (" not in str(err.value)
