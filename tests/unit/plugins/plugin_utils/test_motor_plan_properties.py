# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Property tests for motor_plan: random valid configs and inventories.

Properties: no port bound twice on a host, ports in 1024..65535 and never reserved, no NPU given twice, NPUs
from the host's list, contiguous and in die pairs on A3, the pods of an instance on distinct hosts, publishing
pods with affinity never share DP ranks on a host, inputs untouched, output deterministic and JSON-serialisable.
With ``previous``: a plan's own placement gives the same plan back, scaling a role by one instance leaves every
surviving container identical (but for the instance counts) whenever it fits, and any previous, however stale,
gives a plan that keeps the invariants whenever a plan exists.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan, placement_of


ENGINE = "motor_engine_hosts"
CONTROL = "motor_control_hosts"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def contract_config(hw, roles, affinity, pool, conductor, kv_port, events_replay, user_ports):
    """Contract-shaped motor_config output (docs/design.md). roles: {role: (count, pods, npus, dp)}."""
    publisher = "union" if "union" in roles else "prefill"
    user_config = {
        "version": "v2.0",
        "motor_deploy_config": {"job_id": "prop", "hardware_type": hw},
        "motor_controller_config": {"api_config": dict(user_ports.get("controller", {}))},
        "motor_coordinator_config": {"api_config": dict(user_ports.get("coordinator", {}))},
    }
    engines = {}
    for role, (count, pods, npus, dp) in roles.items():
        section = f"motor_engine_{role}_config"
        engine_config = {"data_parallel_size": dp, "data_parallel_rpc_port": 9000}
        if role != "union":
            engine_config["kv_transfer_config"] = {"kv_connector": "MultiConnector", "kv_connector_extra_config": {
                "connectors": [{"kv_connector": "MooncakeLayerwiseConnector", "kv_port": kv_port},
                               {"kv_connector": "AscendStoreConnector"}]}}
        if affinity and role == publisher:
            engine_config["kv_events_config"] = {"enable_kv_cache_events": True, "endpoint": "tcp://*:5557"}
            if events_replay:
                engine_config["kv_events_config"]["replay_endpoint"] = "tcp://*:6667"
        user_config[section] = {"engine_config": engine_config}
        engines[role] = {"section": section, "count": count, "pods": pods, "npus_per_pod": npus, "dp": dp,
                         "dp_local_per_pod": dp // pods}
    return {
        "mode": "pd_hybrid" if "union" in roles else "pd_separation",
        "job_id": "prop", "hardware_type": hw, "npus_per_host": 16 if hw == "800I_A3" else 8,
        "user_config": user_config, "engines": engines, "affinity": affinity,
        "kv_events": {"role": publisher, "endpoint_port": 5557, "replay_port": 6667 if events_replay else None}
        if affinity else None,
        "kv_pool": {"enabled": pool, "port": 50088, "metrics_port": 9003, "eviction_high_watermark_ratio": 0.9,
                    "eviction_ratio": 0.1, "default_kv_lease_ttl": 11000},
        "kv_conductor": {"enabled": conductor, "http_server_port": 13333},
        "env": {"common": {"A": "1"}}, "env_config": {}, "warnings": [],
    }


@st.composite
def scenarios(draw):
    hw = draw(st.sampled_from(["800I_A2", "800I_A3"]))
    per_host = 16 if hw == "800I_A3" else 8
    hybrid = draw(st.booleans())
    role_names = ["union"] if hybrid else ["prefill", "decode"]
    roles = {}
    for role in role_names:
        pods = draw(st.integers(1, 3))
        if hw == "800I_A3":
            npus = draw(st.sampled_from([1, 2, 4, 6, 8, 16]))
        else:
            npus = draw(st.integers(1, per_host))
        dpl = draw(st.sampled_from([d for d in (1, 2, 4, 8) if npus % d == 0]))
        roles[role] = (draw(st.integers(1, 4)), pods, npus, dpl * pods)
    affinity = draw(st.booleans())
    pool = draw(st.booleans())
    conductor = affinity or draw(st.booleans())
    kv_port = draw(st.sampled_from(["20001", "30001", 36000, "40000"]))
    user_ports = draw(st.sampled_from([{}, {"controller": {"controller_api_port": 1026}},
                                       {"coordinator": {"coordinator_api_infer_port": 2026}}]))
    cfg = contract_config(hw, roles, affinity, pool, conductor, kv_port, draw(st.booleans()), user_ports)

    n_engine = draw(st.integers(1, 6))
    n_shared = draw(st.integers(0, 2))
    n_control = draw(st.integers(0, 2))
    hosts = {}
    names = [f"e{i}" for i in range(n_engine)] + [f"s{i}" for i in range(n_shared)] + [f"c{i}" for i in range(n_control)]
    order = draw(st.permutations(names))
    for idx, name in enumerate(order):
        groups = {"e": [ENGINE], "s": [ENGINE, CONTROL], "c": [CONTROL]}[name[0]]
        hvars = {"motor_host_ip": f"10.2.{idx // 250}.{idx % 250 + 1}", "group_names": groups,
                 "motor_nic": draw(st.sampled_from(["eth0", "bond0"]))}
        if draw(st.integers(0, 3)) == 0:
            hvars["motor_npu_ids"] = sorted(draw(st.sets(st.integers(0, per_host - 1), min_size=1)))
        if draw(st.booleans()):
            hvars["motor_reserved_ports"] = draw(st.lists(
                st.one_of(st.sampled_from([1025, 1026, 2026, 3026, 4026, 5557, 5558, 6667, 9000, 9001, 10000,
                                           10003, 12001, 13333, 28000, 36001, 50088]),
                          st.integers(1024, 65535)), max_size=6))
        hosts[name] = hvars
    return cfg, hosts


def reserved_of(hvars):
    return {int(p) for p in hvars.get("motor_reserved_ports") or []}


def check_plan(plan, cfg, hosts):
    hw = cfg["hardware_type"]
    seen_ports = {}
    seen_npus = set()
    for cont in plan["containers"]:
        hvars = hosts[cont["host"]]
        reserved = reserved_of(hvars)
        for port in cont["ports"]:
            assert (cont["host"], port) not in seen_ports, (cont["name"], port, seen_ports.get((cont["host"], port)))
            seen_ports[(cont["host"], port)] = cont["name"]
            assert 1024 <= port <= 65535 and port not in reserved
        # kv_events* are base ports: a pod binds base + its global DP ranks
        named = {k: v for k, v in cont["port_map"].items() if not k.startswith("kv_events") and v}
        assert set(named.values()) <= set(cont["ports"])
        npus = cont["npu_ids"]
        allowed = hvars.get("motor_npu_ids") or list(range(16 if hw == "800I_A3" else 8))
        for npu in npus:
            assert (cont["host"], npu) not in seen_npus
            seen_npus.add((cont["host"], npu))
            assert npu in allowed
        if npus:
            assert npus == list(range(npus[0], npus[0] + len(npus)))
            if hw == "800I_A3" and len(npus) % 2 == 0:
                assert npus[0] % 2 == 0
            assert len(cont["devices"]) == len(npus) + 3
            assert cont["host"] in hosts and ENGINE in hvars["group_names"]
        else:
            assert cont["tier"] < 2
        assert cont["env"]["POD_IP"] == hvars["motor_host_ip"] and cont["env"]["HCCL_SOCKET_IFNAME"] == hvars["motor_nic"]
        uc = cont["user_config"]
        assert uc["motor_controller_config"]["api_config"]["controller_api_port"] == plan["controller"]["api_port"]
        assert uc["motor_coordinator_config"]["api_config"]["coordinator_api_infer_port"] == plan["coordinator"]["infer_port"]
    # instances: right pod count, distinct hosts, ranks
    for inst in plan["instances"]:
        spec = cfg["engines"][inst["role"]]
        assert len(inst["pods"]) == spec["pods"]
        assert len({p["host"] for p in inst["pods"]}) == spec["pods"]
        assert sorted(r for p in inst["pods"] for r in p["dp_ranks"]) == list(range(spec["dp"]))
        for pod in inst["pods"]:
            assert len(pod["npu_ids"]) == spec["npus_per_pod"]
    assert len(plan["instances"]) == sum(e["count"] for e in cfg["engines"].values())
    # affinity: publishing pods share the event base and never share ranks on a host
    if plan["kv_events"]:
        base = plan["kv_events"]["endpoint_port"]
        ranks_on = {}
        for cont in plan["containers"]:
            if cont["role"] == plan["kv_events"]["role"]:
                assert cont["port_map"]["kv_events"] == base
                for rank in cont["dp_ranks"]:
                    assert base + rank in cont["ports"]
                    assert (cont["host"], rank) not in ranks_on
                    ranks_on[(cont["host"], rank)] = cont["name"]
    # tiers in order, names unique
    tiers = [c["tier"] for c in plan["containers"]]
    assert tiers == sorted(tiers)
    assert len({c["name"] for c in plan["containers"]}) == len(plan["containers"])
    json.dumps(plan)


@SETTINGS
@given(scenarios())
def test_random_plans_keep_the_invariants(scenario):
    cfg, hosts = scenario
    cfg_before, hosts_before = copy.deepcopy(cfg), copy.deepcopy(hosts)
    try:
        plan = build_plan(cfg, hosts)
    except MotorPlanError as err:
        event("rejected: " + err.problems[0].path.split(".")[-1])
        assert err.problems
        assert all(str(p).count(": ") >= 1 for p in err.problems)
        assert "bug in motor_plan" not in str(err)
        assert cfg == cfg_before and hosts == hosts_before
        return
    event("planned")
    assert cfg == cfg_before and hosts == hosts_before
    check_plan(plan, cfg, hosts)
    assert build_plan(copy.deepcopy(cfg), copy.deepcopy(hosts)) == plan


@SETTINGS
@given(scenarios())
def test_enough_capacity_always_plans(scenario):
    """With spare hosts (one whole host per pod, no reserved ports) every scenario is placed."""
    cfg = scenario[0]
    pods = sum(e["count"] * e["pods"] for e in cfg["engines"].values())
    hosts = {f"h{i}": {"motor_host_ip": f"10.3.{i // 250}.{i % 250 + 1}", "group_names": [ENGINE, CONTROL]}
             for i in range(pods)}
    plan = build_plan(cfg, hosts)
    check_plan(plan, cfg, {k: dict(v, motor_nic="eth0") for k, v in hosts.items()})


def _fixture(name):
    user = json.loads((FIXTURES / name / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((FIXTURES / name / "env.json").read_text(encoding="utf-8"))
    return user, env


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["seed_pd_separation", "seed_pd_hybrid"]), st.integers(1, 4), st.integers(1, 2),
       st.sampled_from([1, 2, 4]), st.integers(1, 5), st.sampled_from(["800I_A2", "800I_A3"]))
def test_seed_configs_through_motor_config(name, count, pods, npus, n_hosts, hw):
    """The real motor_config output for scaled seed configs plans with the invariants, or fails cleanly."""
    user, env = _fixture(name)
    deploy = {"hardware_type": hw}
    if "hybrid_instances_num" in user["motor_deploy_config"]:
        deploy.update(hybrid_instances_num=count, single_hybrid_instance_pod_num=pods, hybrid_pod_npu_num=npus)
        engine = {"motor_engine_union_config": {"engine_config": {"data_parallel_size": pods, "tensor_parallel_size": npus}}}
    else:
        deploy.update(p_instances_num=count, d_instances_num=count, single_p_instance_pod_num=pods,
                      single_d_instance_pod_num=pods, p_pod_npu_num=npus, d_pod_npu_num=npus)
        engine = {f"motor_engine_{r}_config": {"engine_config": {"data_parallel_size": pods, "tensor_parallel_size": npus}}
                  for r in ("prefill", "decode")}
    try:
        cfg = normalize(user, env, [{"motor_deploy_config": deploy}, engine])
    except MotorConfigError:
        assume(False)
        return
    hosts = {f"n{i}": {"motor_host_ip": f"10.4.0.{i + 1}", "motor_nic": "eth0",
                       "group_names": [ENGINE] + ([CONTROL] if i == 0 else [])} for i in range(n_hosts)}
    try:
        plan = build_plan(cfg, hosts)
    except MotorPlanError as err:
        event("rejected")
        assert "bug in motor_plan" not in str(err)
        return
    event("planned")
    check_plan(plan, cfg, hosts)


# --------------------------------------------------------------------------------------------------
# previous: sticky placement

STICKY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
COUNT_KEYS = {"prefill": "p_instances_num", "decode": "d_instances_num", "union": "hybrid_instances_num"}


def with_counts(cfg, role=None, delta=0):
    """A copy of cfg with the instance counts also in motor_deploy_config, role's count changed by delta."""
    cfg = copy.deepcopy(cfg)
    if role is not None:
        cfg["engines"][role]["count"] += delta
    for name, eng in cfg["engines"].items():
        cfg["user_config"]["motor_deploy_config"][COUNT_KEYS[name]] = eng["count"]
    return cfg


def masked(cont):
    cont = copy.deepcopy(cont)
    for key in COUNT_KEYS.values():
        cont["user_config"]["motor_deploy_config"].pop(key, None)
    return cont


def plan_or_none(cfg, hosts, previous=None):
    try:
        return build_plan(cfg, hosts, previous)
    except MotorPlanError as err:
        assert "bug in motor_plan" not in str(err)
        return None


@STICKY_SETTINGS
@given(scenarios())
def test_previous_plan_is_a_fixed_point(scenario):
    cfg, hosts = scenario
    plan = plan_or_none(cfg, hosts)
    assume(plan is not None)
    assert build_plan(cfg, hosts, placement_of(plan)) == plan


@STICKY_SETTINGS
@given(scenarios(), st.data())
def test_scaling_by_one_keeps_every_surviving_container(scenario, data):
    cfg, hosts = scenario
    role = data.draw(st.sampled_from(sorted(cfg["engines"])))
    delta = data.draw(st.sampled_from([-1, 1]))
    assume(cfg["engines"][role]["count"] + delta >= 1)
    old_cfg, new_cfg = with_counts(cfg), with_counts(cfg, role, delta)
    old = plan_or_none(old_cfg, hosts)
    assume(old is not None)
    new = plan_or_none(new_cfg, hosts, placement_of(old))
    if new is None:
        assert delta > 0  # removing an instance always fits
        event("scale-out does not fit")
        return
    check_plan(new, new_cfg, hosts)
    if any(w.startswith("previous:") for w in new["warnings"]):
        assert delta > 0
        event("scale-out fits only from scratch")
        return
    if new["kv_events"] != old["kv_events"]:
        # only a new publishing pod on a host where the event base is taken or reserved moves it
        assert delta > 0 and role == old["kv_events"]["role"]
        assert any(h.get("motor_reserved_ports") for h in hosts.values())
        event("event base moved")
        return
    event(f"kept ({'out' if delta > 0 else 'in'})")
    before, after = ({c["name"]: c for c in p["containers"]} for p in (old, new))
    survivors = set(before) & set(after)
    assert len(survivors) == len(before) - (cfg["engines"][role]["pods"] if delta < 0 else 0)
    for name in survivors:
        for key in ("host", "npu_ids", "port_map", "ports", "env", "devices"):
            assert before[name][key] == after[name][key], (name, key)
        assert masked(before[name]) == masked(after[name]), name


def _garbage_entry():
    port = st.one_of(st.integers(0, 70000), st.sampled_from(["9000", "x", None, True]))
    return st.one_of(
        st.none(), st.text(max_size=3),
        st.fixed_dictionaries({}, optional={
            "host": st.one_of(st.sampled_from(["e0", "e1", "s0", "c0", "ghost"]), st.none()),
            "npu_ids": st.one_of(st.lists(st.integers(-1, 17), max_size=17), st.text(max_size=3)),
            "port_map": st.one_of(st.dictionaries(st.sampled_from(
                ["node_manager", "engine_base", "dp_rpc", "kv", "kv_events", "kv_events_replay", "infer", "mgmt",
                 "obs", "metaserver", "api", "master", "http"]), port), st.none()),
        }))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_any_previous_gives_a_valid_plan_when_one_exists(scenario, data):
    """Stale, shifted or nonsense previous entries never break the invariants nor turn a plan into an error."""
    cfg, hosts = scenario
    fresh = plan_or_none(cfg, hosts)
    previous = placement_of(fresh) if fresh is not None else {}
    for name in sorted(previous):
        choice = data.draw(st.integers(0, 4))
        if choice == 1:
            previous[name] = data.draw(_garbage_entry())
        elif choice == 2 and previous[name]["npu_ids"]:
            shift = data.draw(st.sampled_from([-2, -1, 1, 2]))
            previous[name]["npu_ids"] = [n + shift for n in previous[name]["npu_ids"]]
        elif choice == 3:
            previous[name]["host"] = data.draw(st.sampled_from(sorted(hosts)))
    extra = data.draw(st.lists(st.sampled_from(["prop-p0-0", "prop-d1-0", "prop-u0-1", "prop-p9-2", "prop-coordinator"]),
                               max_size=3))
    for name in extra:
        previous[name] = data.draw(_garbage_entry())
    previous_before = copy.deepcopy(previous)
    plan = plan_or_none(cfg, hosts, previous)
    assert previous == previous_before
    if fresh is None:
        assert plan is None
        return
    assert plan is not None
    check_plan(plan, cfg, hosts)
    event("fallback" if any(w.startswith("previous:") for w in plan["warnings"]) else "sticky")
