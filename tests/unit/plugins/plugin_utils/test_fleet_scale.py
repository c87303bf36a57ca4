"""Fleet scale (issue 34): what the deploy decision hands the readiness wait grows linearly with the hosts, and the
compact KV-endpoint ranges judge a conductor listing exactly as the URL lists do."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import condition_met, missing_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import (
    expected_kv_endpoints,
    kv_endpoint_ranges,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import readiness_checks

SEED = Path(__file__).resolve().parents[4] / "examples" / "seed_pd_separation"
INSTANCES, NPUS, TP = 16, 16, 2  # bench/plan_scaling's proportional A3 config: 8 DP ranks per pod


def fleet_plan(n_hosts):
    user = json.loads((SEED / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((SEED / "env.json").read_text(encoding="utf-8"))
    pods = n_hosts // (2 * INSTANCES)
    dp = pods * NPUS // TP
    config = normalize(user, env, [{
        "motor_deploy_config": {"hardware_type": "800I_A3", "p_instances_num": INSTANCES, "d_instances_num": INSTANCES,
                                "single_p_instance_pod_num": pods, "single_d_instance_pod_num": pods,
                                "p_pod_npu_num": NPUS, "d_pod_npu_num": NPUS},
        "motor_engine_prefill_config": {"engine_config": {"data_parallel_size": dp, "tensor_parallel_size": TP}},
        "motor_engine_decode_config": {"engine_config": {"data_parallel_size": dp, "tensor_parallel_size": TP}}}])
    hosts = {f"npu-{i:04d}": {"motor_host_ip": f"10.{10 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}",
                              "group_names": ["motor_engine_hosts"]} for i in range(n_hosts)}
    hosts["ctl-0"] = {"motor_host_ip": "10.9.0.1", "group_names": ["motor_control_hosts"]}
    return build_plan(config, hosts)


@pytest.fixture(scope="module")
def plans():
    return {n: fleet_plan(n) for n in (256, 1024)}


def conductor_check(plan):
    return next(c for c in readiness_checks(plan, {"ready": 600, "port": 60}) if c["until"] == "endpoints")


def test_the_conductor_expectation_grows_linearly_with_the_hosts(plans):
    """One entry per publishing pod, of constant size: 4x the hosts, at most 4.5x the argument (the URL lists it
    replaces grow 16x: pods x the instance's rank pool)."""
    sizes, urls = {}, {}
    for n, plan in plans.items():
        entries = conductor_check(plan)["endpoints"]
        publishers = [c for c in plan["containers"] if c["role"] == plan["kv_events"]["role"]]
        assert len(entries) == len(publishers) and all("of" not in e for e in entries)
        sizes[n] = len(json.dumps(entries))
        urls[n] = sum(len(e["of"]) for e in expected_kv_endpoints(plan))
    assert sizes[1024] <= 4.5 * sizes[256]
    assert urls[1024] >= 15 * urls[256]  # what the wait no longer carries


def listing(plan, order_seed, drop=0):
    """The conductor's /services after every publishing pod registered in a random order (the k-th pod of an
    instance gets ranks k*dpl ..), less ``drop`` random endpoints."""
    rng = random.Random(order_seed)
    base = plan["kv_events"]["endpoint_port"]
    by_instance = {}
    for c in plan["containers"]:
        if c["role"] == plan["kv_events"]["role"]:
            by_instance.setdefault(c["job_name"], []).append(c)
    services = []
    for pods in by_instance.values():
        rng.shuffle(pods)
        for k, c in enumerate(pods):
            dpl = len(c["dp_ranks"])
            services += [{"Endpoint": f"tcp://{c['ip']}:{base + k * dpl + r}"} for r in range(dpl)]
    for dummy in range(drop):
        services.pop(rng.randrange(len(services)))
    return {"services": services}


@pytest.mark.parametrize("seed, drop", [(1, 0), (2, 0), (3, 1), (4, 5)])
def test_ranges_judge_a_listing_as_the_url_lists_do(plans, seed, drop):
    plan = plans[256]
    body = listing(plan, seed, drop)
    ranges, urls = kv_endpoint_ranges(plan), expected_kv_endpoints(plan)
    assert condition_met("endpoints", 200, body, ranges) is condition_met("endpoints", 200, body, urls) is (drop == 0)
    assert missing_endpoints(body, ranges) == missing_endpoints(body, urls)


def test_every_container_owns_its_user_config():
    """The user_configs are copies of one template (plan/fields.py ``from_template``) that share only their strings:
    a change to one container's dicts or lists reaches no other container's user_config."""
    plan = fleet_plan(64)
    engines = [c for c in plan["containers"] if c["role"] in ("prefill", "decode")]
    before = [json.dumps(c["user_config"], sort_keys=True) for c in engines]
    changed = engines[0]["user_config"]
    for section in changed.values():
        if isinstance(section, dict):
            for value in list(section.values()):
                if isinstance(value, dict):
                    value["changed"] = True
                elif isinstance(value, list):
                    value.append("changed")
            section["changed"] = True
    assert json.dumps(changed, sort_keys=True) != before[0]
    assert [json.dumps(c["user_config"], sort_keys=True) for c in engines[1:]] == before[1:]
    assert all(p["rank_pool"] == list(range(inst["dp"])) for inst in plan["instances"] for p in inst["pods"])
