# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The roll of a master/standby pair (reconcile/pair_roll.py, docs/ha.md "Rolls and heals"): replicas that change
only their image leave the tier steps and move after them, standby first; their dependents (the engines) keep
running; any other change, or a replica not running, recreates them in the tier step as before."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTAINER_LABEL, HASH_LABEL, PARTS_LABEL
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import pair_work, readiness_checks
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import reconcile
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import container_hashes, spec_digest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.pair_roll import PAIR_REASON, handover, pair_targets

SEED = Path(__file__).resolve().parents[4] / "examples" / "seed_pd_separation"
VIP = "10.0.0.100"
HOSTS = {
    "h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    **{name: {"motor_host_ip": ip, "group_names": ["motor_control_hosts"], "motor_vip": VIP}
       for name, ip in (("c1", "10.0.0.11"), ("c2", "10.0.0.12"), ("c3", "10.0.0.13"))},
}
OLD, NEW = "sha256:old", "sha256:new"


def standby_plan():
    user = json.loads((SEED / "user_config.json").read_text())
    for section in ("motor_controller_config", "motor_coordinator_config"):
        user[section]["standby_config"] = {"enable_master_standby": True}
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


def parts_of(plan, images):
    """Hash parts with the image (and its name in the shared settings) of each container's host."""
    return {c["name"]: {"image": images.get(c["host"], OLD), "spec": spec_digest(c),
                        "shared": "shared-" + images.get(c["host"], OLD)} for c in plan["containers"]}


def deployed(plan, parts, states=None):
    hashes, labels = container_hashes(plan, parts)
    out = {}
    for c in plan["containers"]:
        out.setdefault(c["host"], []).append({
            "Names": ["/" + c["name"]], "State": (states or {}).get(c["name"], "running"),
            "Labels": {CONTAINER_LABEL: c["name"], "io.pymotor.role": c["role"], HASH_LABEL: hashes[c["name"]],
                       PARTS_LABEL: labels[c["name"]]}})
    return out


def rows(result):
    return {r["container"]: r for r in result["actions"]}


def test_an_image_change_on_the_replica_hosts_moves_both_pairs_and_keeps_the_engines():
    plan = standby_plan()
    before = parts_of(plan, {})
    result = reconcile(plan, parts_of(plan, {"c1": NEW, "c2": NEW}), deployed(plan, before))
    by_name = rows(result)
    assert result["pairs"] == {"controller": ["mindie-motor-controller", "mindie-motor-controller-2"],
                               "coordinator": ["mindie-motor-coordinator", "mindie-motor-coordinator-2"]}
    for names in result["pairs"].values():
        for name in names:
            assert (by_name[name]["action"], by_name[name]["mode"]) == ("recreate", "pair")
            assert PAIR_REASON in by_name[name]["reason"]
            # not started in a tier step: the pair moves after them
            assert name not in [n for names in result["start"].values() for n in names]
    # the KV conductor on c2 restarts in its tier step, before the coordinator pair moves
    conductor = next(r for r in by_name.values() if r["role"] == "kv_conductor")
    assert (conductor["action"], conductor["mode"]) == ("recreate", "parallel")
    # the engines outlive the move, as they outlive a failover: kept, no roll
    engines = [r for r in by_name.values() if r["role"] in ("prefill", "decode")]
    assert engines and all(r["action"] == "keep" for r in engines), engines
    assert result["rolling"] == []


def test_the_same_image_again_changes_nothing():
    plan = standby_plan()
    after = parts_of(plan, {"c1": NEW, "c2": NEW})
    result = reconcile(plan, after, deployed(plan, after))
    assert result["pairs"] == {} and result["changes"] == []


def test_a_replica_not_running_or_a_config_change_recreates_in_the_tier_step():
    plan = standby_plan()
    before = parts_of(plan, {})
    stopped = reconcile(plan, parts_of(plan, {"c1": NEW, "c2": NEW}),
                        deployed(plan, before, {"mindie-motor-controller-2": "exited"}))
    assert "controller" not in stopped["pairs"] and "coordinator" in stopped["pairs"]
    assert rows(stopped)["mindie-motor-controller"]["mode"] == "parallel"
    # an own-config change of the controller is no pair move: both replicas restart in the tier step
    changed = parts_of(plan, {})
    for name in ("mindie-motor-controller", "mindie-motor-controller-2"):
        changed[name] = dict(changed[name], spec="other")
    result = reconcile(plan, changed, deployed(plan, before))
    assert result["pairs"] == {}
    assert rows(result)["mindie-motor-controller"]["mode"] == "parallel"


def test_one_replica_host_alone_is_no_pair_move():
    plan = standby_plan()
    result = reconcile(plan, parts_of(plan, {"c1": NEW}), deployed(plan, parts_of(plan, {})))
    assert result["pairs"] == {}
    assert rows(result)["mindie-motor-controller"]["mode"] == "parallel"
    assert rows(result)["mindie-motor-controller-2"]["action"] == "keep"


def test_without_master_standby_nothing_moves_as_a_pair():
    user = json.loads((SEED / "user_config.json").read_text())
    plan = build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)
    result = reconcile(plan, parts_of(plan, {"c1": NEW, "c2": NEW}), deployed(plan, parts_of(plan, {})))
    assert result["pairs"] == {}
    assert all(r["mode"] != "pair" for r in result["actions"])


def test_pair_work_reads_each_replica_and_waits_on_the_vip():
    plan = standby_plan()
    result = reconcile(plan, parts_of(plan, {"c1": NEW, "c2": NEW}), deployed(plan, parts_of(plan, {})))
    judged = {"settings": {h: {"image": "img", "command": "", "log_root": "/var/log/m", "extra_volumes": [],
                               "restart_policy": "unless-stopped", "log_max_size": "", "log_max_file": 1,
                               "driver_dir": "", "env_functions": {}} for h in ("c1", "c2")},
              "hosts": {h: {"mounts_present": []} for h in ("c1", "c2")}}
    work = pair_work(plan, result, judged, {"ready": 60, "port": 30})
    assert [w["role"] for w in work] == ["controller", "coordinator"]
    api, mgmt = plan["controller"]["api_port"], plan["coordinator"]["mgmt_port"]
    controller, coordinator = work
    assert [(r["name"], r["host"], r["readiness"], r["liveness"]) for r in controller["replicas"]] == [
        ("mindie-motor-controller", "c1", f"http://10.0.0.11:{api}/readiness", f"http://10.0.0.11:{api}/liveness"),
        ("mindie-motor-controller-2", "c2", f"http://10.0.0.12:{api}/readiness", f"http://10.0.0.12:{api}/liveness")]
    assert [r["runs"][0]["host"] for r in controller["replicas"]] == ["c1", "c2"]
    assert [c["name"] for c in controller["replicas"][1]["runs"][0]["containers"]] == ["mindie-motor-controller-2"]
    assert controller["vip_readiness"] == f"http://{VIP}:{api}/readiness" and controller["after"] == []
    assert coordinator["vip_readiness"] == f"http://{VIP}:{mgmt}/readiness"
    # a new coordinator master answers 200 with ready: false until it has its instances
    assert [c["until"] for c in coordinator["after"]] == ["ready", "routes"]
    assert coordinator["after"][0]["url"] == f"http://{VIP}:{mgmt}/readiness"
    assert pair_targets(plan, "coordinator")[1]["readiness"] == f"http://10.0.0.12:{mgmt}/readiness"
    # the coordinator hands over (handover_pair.yml); the controller's move stops its master as before
    assert controller["handover"] is None
    handover = coordinator["handover"]
    # locks.py:34 "/locks/" + etcd_client.py:85-90 POD_NAMESPACE/JOB_NAME + coordinator.py:353-357's key
    assert handover["lock_key"] == "/locks//mindie-motor-coordinator/coordinator/master_lock"
    assert handover["etcd_endpoint"] == "https://127.0.0.1:2379"
    assert handover["haproxy"] == {"hosts": ["c1", "c2"], "container": f"{plan['job_id']}-haproxy",
                                   "socket": "/dev/shm/haproxy-admin.sock"}
    assert handover["infer_backend"] == "coordinator_infer"
    for name in ("mindie-motor-coordinator", "mindie-motor-coordinator-2"):
        backends = handover["backends"][name]
        assert "coordinator_infer" in backends and "coordinator_mgmt" in backends
        assert not [b for b in backends if b.startswith("controller")]
        # HAProxy runtime API lines: the other ports drained first, inference last, every backend given back after
        commands = handover["commands"][name]
        others = [b for b in backends if b != "coordinator_infer"]
        assert commands["drain"] == "; ".join(f"set server {b}/{name} state drain" for b in others)
        assert commands["drain_infer"] == f"set server coordinator_infer/{name} state drain"
        assert commands["undrain"] == "; ".join(f"set server {b}/{name} state ready" for b in backends)


def test_a_users_own_lock_key_and_namespace_make_the_handovers_key():
    plan = standby_plan()
    for container in plan["containers"]:
        if container["role"] == "coordinator":
            container["user_config"]["motor_coordinator_config"]["standby_config"]["master_lock_key"] = "/my_lock"
            container["env"]["POD_NAMESPACE"] = "ns"
    assert handover(plan, "coordinator")["lock_key"] == "/locks/ns/mindie-motor-coordinator/my_lock"
    assert handover(plan, "controller") is None


def test_a_deploy_waits_until_the_vips_inference_port_answers():
    # HAProxy sends chat only to a master that says "ready": true: the deploy ends once the VIP's inference port answers
    plan = standby_plan()
    checks = readiness_checks(plan, {"ready": 60, "port": 30})
    infer = [c for c in checks if c["name"] == "the coordinator's inference port answers through the VIP"]
    assert [(c["until"], c["url"]) for c in infer] == [
        ("answers", f"http://{VIP}:{plan['coordinator']['infer_port']}/v1/chat/completions")]
    plan.pop("standby")
    assert not [c for c in readiness_checks(plan, {"ready": 60, "port": 30}) if "through the VIP" in c["name"]]
