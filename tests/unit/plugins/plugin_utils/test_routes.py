# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The coordinator's routing as its /metrics?type=dp tells it (module_utils/motor_health.py), the instances a roll
expects there (operations/routing.py), and where the roll waits for it: after each rolled instance, and after the
control plane restarted, with a controller restart when an instance's add was lost (reconcile/decide.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import (
    condition_met, routed_ids, routed_instances, unrouted)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.routing import instance_pods, routes_expected
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile import roll_drain
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import instance_checks, routes_checks

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers of the neighbouring tests (importlib mode)

from test_heal import seed_plan  # noqa: E402
from test_roll_drain import TASKS, dp_metrics_of, make_plan, rolling  # noqa: E402

TEXT = """# HELP vllm:kv_cache_usage_perc u
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{dp_rank="0",role="decode",instance_id="7",pod_ip="10.0.0.5",model_name="m"} 0.5
vllm:kv_cache_usage_perc{dp_rank="1",role="decode",instance_id="7",pod_ip="10.0.0.6",model_name="m"} 0.5
vllm:kv_cache_usage_perc{dp_rank="0",role="prefill",instance_id="8",pod_ip="10.0.0.5",model_name="m"} 0.1
vllm:num_requests_running{dp_rank="0",role="prefill",instance_id="8",pod_ip="10.0.0.5",model_name="m"} 2.0
motor_coordinator_ready 1
"""


def test_the_dp_metrics_name_each_routed_instance_with_its_role_and_pod_ips():
    routed = routed_instances(TEXT)
    assert routed == {7: {"role": "decode", "ips": {"10.0.0.5", "10.0.0.6"}}, 8: {"role": "prefill", "ips": {"10.0.0.5"}}}
    assert routed_ids(routed, "decode", ["10.0.0.6"]) == [7]
    assert routed_ids(routed, "prefill", ["10.0.0.6"]) == []
    assert routed_instances("") == {} and routed_instances(None) == {}


def test_routes_holds_when_each_expected_instance_is_routed_and_says_what_is_missing():
    expected = [{"name": "d0", "role": "decode", "ips": ["10.0.0.5"], "need": 1},
                {"name": "p0", "role": "prefill", "ips": ["10.0.0.5"], "need": 1}]
    assert condition_met("routes", 200, None, expected, TEXT)
    assert not condition_met("routes", 503, None, expected, TEXT)
    two = [dict(expected[1], need=2)]
    assert not condition_met("routes", 200, None, two, TEXT)
    assert unrouted(routed_instances(TEXT), two) == ["p0: 1/2 prefill instance(s) at 10.0.0.5"]


def test_instances_of_a_role_that_share_a_host_are_expected_together():
    plan = {"containers": [
        {"name": "p0", "role": "prefill", "job_name": "P0", "ip": "10.0.0.1"},
        {"name": "p1", "role": "prefill", "job_name": "P1", "ip": "10.0.0.1"},
        {"name": "d0-0", "role": "decode", "job_name": "D0", "ip": "10.0.0.1"},
        {"name": "d0-1", "role": "decode", "job_name": "D0", "ip": "10.0.0.2"},
        {"name": "c", "role": "coordinator", "job_name": "c", "ip": "10.0.0.9"}]}
    assert instance_pods(plan)["D0"] == {"role": "decode", "ips": ["10.0.0.1", "10.0.0.2"], "containers": ["d0-0", "d0-1"]}
    assert routes_expected(plan) == [
        {"name": "D0", "role": "decode", "ips": ["10.0.0.1", "10.0.0.2"], "need": 1},
        {"name": "P0", "role": "prefill", "ips": ["10.0.0.1"], "need": 2},
        {"name": "P1", "role": "prefill", "ips": ["10.0.0.1"], "need": 2}]
    assert [e["name"] for e in routes_expected(plan, {"P1"})] == ["P1"]


def test_each_rolled_instance_waits_until_the_coordinator_routes_it_again():
    plan = make_plan()
    timeouts = {"ready": 600, "port": 60}
    ids = {inst["job_name"]: n for n, (inst, _members) in enumerate(rolling(plan))}
    for inst, members in rolling(plan):
        routes = [c for c in instance_checks(plan, inst, members, timeouts) if c["until"] == "routes"]
        assert len(routes) == 1 and routes[0]["url"].endswith("/metrics?type=dp")
        assert routes[0]["endpoints"] == routes_expected(plan, {inst["job_name"]})
        others = {job: n for job, n in ids.items() if job != inst["job_name"]}
        assert condition_met("routes", 200, None, routes[0]["endpoints"], dp_metrics_of(plan, ids))
        assert not condition_met("routes", 200, None, routes[0]["endpoints"], dp_metrics_of(plan, others))
    assert routes_checks(dict(plan, coordinator=dict(plan["coordinator"], obs_port=None)), 5) == []


def test_the_roll_repairs_a_lost_add_by_restarting_the_controller_then_waits_again():
    tasks = yaml.safe_load((TASKS / "rolling.yml").read_text())
    names = [t["name"] for t in tasks]
    repair = tasks[names.index("Make sure the restarted coordinator routes every running engine instance")]
    assert names.index("Restart the changed engine instances one at a time") > names.index(repair["name"])
    assert "upgrade.repair.routes" in repair["block"][0]["pymotor.ascend.motor_wait"]["checks"]
    restart = next(t for t in repair["rescue"] if "pymotor.ascend.motor_containers" in t)
    assert "upgrade.repair.runs" in restart["loop"]
    after = tasks[names.index(repair["name"]) + 1]
    assert "upgrade.repair.after" in after["block"][0]["pymotor.ascend.motor_wait"]["checks"]
    assert any("not_ready.yml" in str(t.get("ansible.builtin.include_tasks")) for t in after["rescue"])


def test_union_instances_of_pd_hybrid_drain_and_wait_for_their_routes_the_same_way():
    plan = seed_plan("seed_pd_hybrid", hybrid_instances_num=2)
    unions = [(inst, members) for inst, members in rolling(plan) if inst["role"] == "union"]
    assert len(unions) == 2
    ids = {inst["job_name"]: n for n, (inst, _members) in zip((3, 4), unions)}
    for inst, members in unions:
        drain = roll_drain.roll_drain(plan, inst, members)
        assert drain["how"] == "del" and drain["role"] == "union"
        event = roll_drain.drain_event(drain, dp_metrics_of(plan, ids, roles=("union",)))
        assert event["instances"][0]["id"] == ids[inst["job_name"]]
        routes = [c for c in instance_checks(plan, inst, members, {"ready": 600, "port": 60}) if c["until"] == "routes"]
        assert routes[0]["endpoints"][0]["role"] == "union"
        assert condition_met("routes", 200, None, routes[0]["endpoints"], dp_metrics_of(plan, ids, roles=("union",)))
    single = seed_plan("seed_pd_hybrid")
    inst, members = next((i, m) for i, m in rolling(single) if i["role"] == "union")
    assert roll_drain.roll_drain(single, inst, members)["how"] == "none"  # the only union instance
