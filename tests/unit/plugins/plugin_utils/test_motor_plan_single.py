# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""deploy_mode single_container (plan/single.py): one container runs every role, its node managers' ports and NPUs are
the ones upstream's offsets reach (motor/config/node_manager.py:141-211), all free and listed on the container."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.routing import routes_expected
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import service_targets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import engine_step_waits, readiness_checks
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.healer import healer_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.probes import healthcheck, probe_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps

REPO = Path(__file__).resolve().parents[4]
VLLM = REPO / "tests" / "unit" / "fixtures" / "configs" / "vllm"
ENV_FUNCTIONS = {"common.sh": ["set_common_env"], "controller.sh": ["set_controller_env"],
                 "engine.sh": ["set_prefill_env", "set_decode_env"]}


def single_config(p_num=2, d_num=1, p_dp=1, d_dp=2, **deploy):
    user = json.loads((VLLM / "user_config.json").read_text(encoding="utf-8"))
    env = json.loads((VLLM / "env.json").read_text(encoding="utf-8"))
    user["motor_deploy_config"].update(deploy_mode="single_container", p_instances_num=p_num, d_instances_num=d_num,
                                       single_p_instance_pod_num=1, single_d_instance_pod_num=1,
                                       p_pod_npu_num=p_dp, d_pod_npu_num=d_dp, **deploy)
    user["motor_coordinator_config"].setdefault("scheduler_config", {})["deploy_mode"] = "pd_disaggregation_single_container"
    user["motor_coordinator_config"]["scheduler_config"]["scheduler_type"] = "load_balance"
    for section, dp in (("motor_engine_prefill_config", p_dp), ("motor_engine_decode_config", d_dp)):
        engine = user[section]["engine_config"]
        engine.update(data_parallel_size=dp, tensor_parallel_size=1, pipeline_parallel_size=1)
        engine.pop("data_parallel_size_local", None)
        engine.pop("kv_events_config", None)
    user.pop("kv_conductor_config", None)
    return user, env


def hosts(n=1, hw="800I_A3"):
    out = {"e%d" % i: {"motor_host_ip": "10.0.0.%d" % (i + 1), "group_names": ["motor_engine_hosts"],
                       "motor_hardware_type": hw} for i in range(n)}
    out["c0"] = {"motor_host_ip": "10.0.1.1", "group_names": ["motor_control_hosts"]}
    return out


def plan_of(**kwargs):
    user, env = single_config(**kwargs)
    return build_plan(normalize(user, env), hosts())


def test_one_container_runs_every_role_with_upstreams_offsets():
    plan = plan_of()
    (cont,) = plan["containers"]
    assert cont["name"] == plan["job_id"] + "-single-container" and cont["role"] == "single_container"
    assert cont["env"]["ROLE"] == "SINGLE_CONTAINER" and cont["host"] == "e0"
    # 2 prefill x 1 NPU + 1 decode x 2 NPUs: the devices the upstream device offsets reach, contiguous
    assert cont["npu_ids"] == [0, 1, 2, 3]
    uc = cont["user_config"]
    p_nm = uc["motor_engine_prefill_config"]["motor_nodemanger_config"]
    d_nm = uc["motor_engine_decode_config"]["motor_nodemanger_config"]
    managers = {nm["job_name"]: nm for nm in cont["node_managers"]}
    assert sorted(managers) == ["d0", "p0", "p1"]
    # node manager ports: prefill port + i, decode port + p_instances x p_dp + i (node_manager.py:176-187)
    assert managers["p1"]["node_manager_port"] == p_nm["api_config"]["node_manager_port"] + 1
    assert managers["d0"]["node_manager_port"] == d_nm["api_config"]["node_manager_port"] + 2
    # engine base: prefill base + i x d_dp x 2, decode base + (p_instances x p_dp + i x d_dp) x 2
    assert managers["p1"]["endpoints"][0]["service_port"] == p_nm["endpoint_config"]["base_port"] + 4
    assert [ep["service_port"] for ep in managers["d0"]["endpoints"]] == [
        d_nm["endpoint_config"]["base_port"] + 4, d_nm["endpoint_config"]["base_port"] + 6]
    listed = set(cont["ports"])
    for nm in cont["node_managers"]:
        assert nm["node_manager_port"] in listed
        assert all({ep["service_port"], ep["mgmt_port"]} <= listed for ep in nm["endpoints"])
    assert len(cont["ports"]) == len(set(cont["ports"]))
    assert {plan["controller"]["api_port"], plan["coordinator"]["infer_port"], plan["coordinator"]["mgmt_port"]} <= listed
    assert [i["job_name"] for i in plan["instances"]] == ["p0", "p1", "d0"]


def test_the_one_container_gets_the_combined_script_and_its_functions_only():
    """Upstream's set_env_to_shell injects every role's function into the combined script; no other container gets
    it, and the role setting (hashed for every container) does not name it."""
    plan = plan_of()
    (cont,) = plan["containers"]
    (cmap,) = configmaps(plan["containers"], ENV_FUNCTIONS)
    assert set(cmap["functions"]["all_combine_in_single_container.sh"]) >= {
        "set_controller_env", "set_coordinator_env", "set_prefill_env", "set_decode_env", "set_kv_pool_env"}
    assert cmap["functions"]["all_combine_in_single_container.sh"]["set_prefill_env"]  # the env.json section's body
    other = dict(cont, role="controller", name="x")
    assert "all_combine_in_single_container.sh" not in configmaps([other], ENV_FUNCTIONS)[0]["functions"]


def test_readiness_is_the_controller_and_the_coordinator_of_the_one_container():
    plan = plan_of()
    checks = readiness_checks(plan, {"ready": 60, "port": 10})
    ip = plan["containers"][0]["ip"]
    assert [c["until"] for c in checks][:2] == ["answers", "ready"]
    assert all(ip in c["url"] for c in checks)
    # every engine endpoint of every node manager of the container is checked
    assert len([c for c in checks if c["until"] == "status_ok"]) == 4
    # no wait for the control plane before the engine tier starts: it starts in it (it would wait forever)
    assert engine_step_waits(plan, {"ready": 60, "port": 10}) == []


def test_overlapping_prefill_engine_ports_are_refused():
    user, env = single_config(p_num=2, p_dp=2, d_dp=1, d_num=1)
    with pytest.raises(MotorPlanError) as err:
        build_plan(normalize(user, env), hosts())
    assert "node_manager.py" in str(err.value)


def test_not_enough_npus_on_one_host():
    user, env = single_config(p_num=6, d_num=3, p_dp=2, d_dp=2)
    with pytest.raises(MotorPlanError) as err:
        build_plan(normalize(user, env), hosts(n=2))
    assert "contiguous free NPUs on one engine host" in str(err.value)


def test_the_scheduler_mode_is_filled_in_or_refused():
    user, env = single_config()
    del user["motor_coordinator_config"]["scheduler_config"]["deploy_mode"]
    config = normalize(user, env)
    assert any(w.startswith("motor_coordinator_config.scheduler_config.deploy_mode: missing") for w in config["warnings"])
    user, env = single_config()
    user["motor_coordinator_config"]["scheduler_config"]["deploy_mode"] = "pd_separate"
    with pytest.raises(MotorConfigError) as err:
        normalize(user, env)
    assert "node_manager.py:145" in str(err.value)


def test_the_plan_is_deterministic_and_keeps_its_place():
    first, second = plan_of(), plan_of()
    assert first == second


def test_the_one_container_is_probed_as_upstream_probes_it():
    """single_container_template.yaml:59-67: the coordinator's and the controller's liveness, 5 s, 12 failures."""
    plan = plan_of()
    (cont,) = plan["containers"]
    check = healthcheck(cont)
    assert check["interval"] == 5 and check["retries"] == 12 and check["start_period"] == 500
    files = probe_files(plan)[cont["name"]]
    urls = [json.loads(files[name])["target"]["url"] for name in sorted(files) if name.endswith(".json")]
    assert sorted(urls) == sorted(["http://%s:%d/liveness" % (cont["ip"], plan["controller"]["api_port"]),
                                   "http://%s:%d/liveness" % (cont["ip"], plan["coordinator"]["mgmt_port"])])
    assert all(name.split("/")[-1] in check["test"][-1] for name in files)


def test_no_healer_watches_the_one_container_as_an_engine_pod():
    """The pod healers and the stall repair look engine pods up by name among the node-manager targets: the single
    container's node managers are keyed <container>/<job_name>, so none of them treats it as a pod (whose node
    manager would be at no port)."""
    plan = plan_of()
    (cont,) = plan["containers"]
    targets = service_targets(plan)
    assert cont["name"] not in targets["node_managers"]
    assert sorted(targets["node_managers"]) == [cont["name"] + "/" + j for j in ("d0", "p0", "p1")]
    assert all(":None" not in t["url"] for t in list(targets["node_managers"].values()) + list(targets["engines"].values()))
    assert healer_files(plan) == {}
    routes = {r["name"]: r for r in routes_expected(plan)}
    assert sorted(routes) == ["d0", "p0", "p1"] and routes["p0"]["need"] == 2


def test_a_change_in_any_role_section_restarts_the_one_container():
    """The config hash of the single container covers every section a role reads (it runs them all)."""
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import spec_digest  # noqa: PLC0415

    first = plan_of()
    user, env = single_config()
    user["motor_engine_decode_config"]["engine_config"]["max_model_len"] = 1234
    second = build_plan(normalize(user, env), hosts())
    assert spec_digest(first["containers"][0]) != spec_digest(second["containers"][0])
