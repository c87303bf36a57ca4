"""Unit tests of a deploy that goes on without failed hosts (reconcile/degraded.py): what needs which host, what is
left out (nothing moved), the share of failed hosts, and the readiness checks of the rest."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import with_host_healers
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import readiness_checks
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.degraded import (
    container_needs,
    exceeded,
    left_out,
    left_out_message,
    live_decision,
    live_plan,
    needing,
    with_needs,
)

SEED = Path(__file__).resolve().parents[4] / "examples" / "seed_pd_separation"
ENGINE = {"group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"}
# 2 P x 1 pod x 4 NPUs and 1 D x 2 pods x 4 NPUs on three 8-NPU hosts and one control host
HOSTS = {"h1": dict(ENGINE, motor_host_ip="10.0.0.1"), "h2": dict(ENGINE, motor_host_ip="10.0.0.2"),
         "h3": dict(ENGINE, motor_host_ip="10.0.0.3"),
         "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]}}


def fleet_plan():
    user = json.loads((SEED / "user_config.json").read_text())
    env = json.loads((SEED / "env.json").read_text())
    user["motor_deploy_config"].update(p_instances_num=2, single_d_instance_pod_num=2)
    return build_plan(normalize(user, env), HOSTS)


def test_an_engine_pod_needs_its_instance_and_the_control_plane_and_nothing_else():
    plan = fleet_plan()
    needs = container_needs(plan)
    control = sorted({c["host"] for c in plan["containers"] if c["tier"] != 2})
    assert control == ["ctl"]
    for c in plan["containers"]:
        mates = {m["host"] for m in plan["containers"] if m["tier"] == 2 and m["job_name"] == c["job_name"]}
        expected = sorted(set(control) | mates) if c["tier"] == 2 else control
        assert needs[c["name"]] == expected, c["name"]
    decode = [c for c in plan["containers"] if c["role"] == "decode"]
    assert len(decode) == 2, "the test wants one instance spanning hosts"


def test_with_the_per_host_healers_a_failed_engine_host_leaves_out_only_its_instances_and_its_own_healer():
    """decide reconciles the plan with a healer and its socket proxy on every host (tier 3): neither is part of the
    control plane, so an engine host down takes out its instances and its own two only, never the controller or
    other hosts."""
    plan = with_host_healers(fleet_plan())
    needs = container_needs(plan)
    healers = [c for c in plan["containers"] if c["tier"] == 3]  # each host's healer and its Docker socket proxy
    assert sorted((c["host"], c["role"]) for c in healers) == sorted(
        (host, role) for host in {c["host"] for c in plan["containers"]} for role in ("healer", "sockproxy"))
    assert all(needs[c["name"]] == [c["host"]] for c in healers)
    assert all(needs[c["name"]] == ["ctl"] for c in plan["containers"] if c["tier"] in (0, 1))
    engines = [c for c in plan["containers"] if c["tier"] == 2]
    for down in sorted({c["host"] for c in engines}):
        hit = {c["job_name"] for c in engines if c["host"] == down}
        expected = {c["name"] for c in engines if c["job_name"] in hit} | {c["name"] for c in healers if c["host"] == down}
        assert {c["name"] for c in left_out(plan, [down])["containers"]} == expected, down
        assert left_out(plan, [down])["serving"]
    for host, work in with_needs({h: {"steps": []} for h in HOSTS}, plan).items():
        assert work["control"] == ["ctl"], host


def test_a_failed_engine_host_leaves_out_exactly_the_instances_with_a_pod_there_and_moves_nothing():
    plan = fleet_plan()
    engines = [c for c in plan["containers"] if c["tier"] == 2]
    for down in sorted({c["host"] for c in engines}):
        gone = left_out(plan, [down])
        hit = {c["job_name"] for c in engines if c["host"] == down}
        assert gone["instances"] == sorted(hit)
        assert {c["name"] for c in gone["containers"]} == {c["name"] for c in engines if c["job_name"] in hit}
        assert gone["hosts"] == [down]
        live = live_plan(plan, gone)
        # the rest keeps its hosts: the live plan is the plan without the left-out containers, nothing re-placed
        assert [c for c in plan["containers"] if c["job_name"] not in hit] == live["containers"]
        assert gone["serving"] == any(c["tier"] == 2 for c in live["containers"])


def test_a_failed_control_host_leaves_everything_out():
    plan = fleet_plan()
    gone = left_out(plan, ["ctl"])
    assert {c["name"] for c in gone["containers"]} == {c["name"] for c in plan["containers"]}
    assert not gone["serving"]
    assert "control-plane containers left out" in left_out_message(gone)


def test_each_host_gets_the_needs_of_its_own_containers_and_filters_its_steps():
    plan = fleet_plan()
    work = with_needs({h: {"steps": []} for h in HOSTS}, plan)
    for host, w in work.items():
        assert set(w["needs"]) == {c["name"] for c in plan["containers"] if c["host"] == host}
        assert w["control"] == ["ctl"] and w["job_id"] == plan["job_id"]
    decode_hosts = sorted({c["host"] for c in plan["containers"] if c["role"] == "decode"})
    other = next(h for h in decode_hosts if h != decode_hosts[0])
    held = needing(work[other]["needs"], [decode_hosts[0]])
    assert held == sorted(c["name"] for c in plan["containers"] if c["host"] == other and c["role"] == "decode")
    assert needing(work[other]["needs"], []) == []
    assert needing(work["ctl"]["needs"], [decode_hosts[0]]) == []


def test_the_share_of_failed_hosts_follows_ansibles_max_fail_percentage():
    hosts = ["a", "b", "c", "d"]
    assert not exceeded([], hosts, 0)
    assert exceeded(["a"], hosts, 0)
    assert not exceeded(["a"], hosts, 25) and exceeded(["a", "b"], hosts, 25)
    assert not exceeded(["a", "b"], hosts, 50) and exceeded(["a", "b", "c"], hosts, 50)
    assert not exceeded(["a", "a"], hosts, 25), "a host counts once"


def test_readiness_of_the_rest_waits_for_nothing_on_or_needing_the_failed_host():
    plan = fleet_plan()
    timeouts = {"ready": 60, "port": 30}
    decode_host = next(c["host"] for c in plan["containers"] if c["role"] == "decode")
    gone = left_out(plan, [decode_host])
    names = {c["name"] for c in gone["containers"]}
    checks = readiness_checks(live_plan(plan, gone), timeouts)
    full = readiness_checks(plan, timeouts)
    assert len(checks) < len(full)
    assert not any(c.get("host") == decode_host for c in checks)
    assert not any(name in c["name"] for c in checks for name in names)
    kv = [c for c in checks if c["until"] == "endpoints"]
    assert all(e["container"] not in names for c in kv for e in c["endpoints"])
    message = left_out_message(gone)
    assert decode_host in message and all(i in message for i in gone["instances"])


def test_the_live_decision_drops_the_stall_watch_and_rolling_restart_of_left_out_instances():
    plan = fleet_plan()
    decode_host = next(c["host"] for c in plan["containers"] if c["role"] == "decode")
    gone = left_out(plan, [decode_host])
    instances = sorted({c["job_name"] for c in plan["containers"] if c["tier"] == 2})
    decision = {"stalls": [{"instance": i} for i in instances], "rolling": [{"job_name": i} for i in instances],
                "work": {"h1": {}}}
    live = live_decision(decision, gone, ["checks"])
    kept = [i for i in instances if i not in gone["instances"]]
    assert [s["instance"] for s in live["stalls"]] == kept and [r["job_name"] for r in live["rolling"]] == kept
    assert live["readiness"] == ["checks"] and live["work"] == decision["work"]
    assert live["left_out"]["message"] == left_out_message(gone) and gone["instances"]


def _report(plan, runs, **args):
    """motor_report's phase (the action plugin without Ansible's plumbing) on a decision whose hosts all have work."""
    from ansible_collections.pymotor.ascend.plugins.action.motor_report import ActionModule

    decision = {"work": {h: {"steps": [{"containers": []}]} for h in HOSTS}, "stalls": [], "rolling": []}
    base = {"plan": plan, "decision": decision, "host_run": "run", "states": {}, "summary": False, "down": [],
            "max_fail_percentage": 0, "ready_timeout": 60, "port_timeout": 30}
    return ActionModule.__new__(ActionModule).phase(dict(base, **args),
                                                    {"hostvars": {h: {"run": r} for h, r in runs.items()}})


def test_the_report_stops_by_default_and_goes_on_within_the_share():
    plan = fleet_plan()
    ok = {"states": {}}
    decode_host = next(c["host"] for c in plan["containers"] if c["role"] == "decode")
    runs = {h: ({"unreachable": True} if h == decode_host else ok) for h in HOSTS}
    assert _report(plan, {h: ok for h in HOSTS}) == {}
    stopped = _report(plan, runs)
    assert stopped["failed"] and stopped["msg"].startswith("deploy stopped: %s did not finish" % decode_host)
    # one of four hosts is 25 %: within 25, beyond 20
    assert _report(plan, runs, max_fail_percentage=20)["failed"]
    going = _report(plan, runs, max_fail_percentage=25)
    live = going["ansible_facts"]["motor_decision"]
    assert going["_ansible_no_log"] and live["left_out"]["hosts"] == [decode_host]
    assert not any(c.get("host") == decode_host for c in live["readiness"])
    # a host the tier play reported failed counts even when its last run looked fine
    assert _report(plan, {h: ok for h in HOSTS}, down=[decode_host])["failed"]
    # without the control host no engine instance is left: stop, whatever the share
    assert _report(plan, {h: ok for h in HOSTS}, down=["ctl"], max_fail_percentage=100)["failed"]
    summary = _report(plan, {h: ok for h in HOSTS}, decision=dict(live, work={h: {} for h in HOSTS}), summary=True)
    assert summary["incomplete"] == live["left_out"]["message"]
    assert all("left-out" in line for line in summary["summary"]
               if any(c["name"] in line for c in live["left_out"]["containers"]))


SETTINGS = {
    "motor_service_image": "local/pymotor:1", "motor_service_config_root": "/etc/pymotor",
    "motor_service_docker_min_version": "20.10.0", "motor_service_driver_dir": "/usr/local/Ascend/driver",
    "motor_service_hccn_tool": "/usr/local/Ascend/driver/tools/hccn_tool", "motor_service_log_root": "/var/log/pymotor",
    "motor_service_min_free_log_mb": 1024, "motor_service_check_links": False,
    "motor_service_engine_mounts": ["/usr/local/Ascend/driver"],
    "motor_service_command": ["bash", "-c", "source $CONFIGMAP_PATH/boot.sh"],
    "motor_service_restart_policy": "unless-stopped", "motor_service_log_max_size": "100m",
    "motor_service_log_max_file": "5", "motor_service_env_functions": {"common.sh": ["set_common_env"]},
    "motor_service_extra_volumes": [],
}


def _probe(plan, host):
    npus = sorted({n for c in plan["containers"] if c["host"] == host for n in c.get("npu_ids") or []})
    return {"can_talk_to_docker": True, "host_info": {"ServerVersion": "24.0.7"}, "images": [{"Id": "sha256:img"}],
            "containers": [], "npu_devices": npus, "npu_health": {str(n): "OK" for n in npus}, "npu_error": "",
            "listening": [], "links": {}, "free_mb": 50000, "models": {"/mnt/weight/qwen3_8B": "ok"},
            "paths": {"/usr/local/Ascend/driver": True, "/usr/local/Ascend/driver/tools/hccn_tool": True}}


def test_a_host_without_docker_at_discovery_gets_no_work_within_the_share_and_stops_the_deploy_above_it():
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import decide

    plan = fleet_plan()
    hosts = list(HOSTS)
    probes = {h: _probe(plan, h) for h in hosts}
    probes["h2"] = dict(probes["h2"], can_talk_to_docker=False, msg="connection refused")
    options = {"startup_cache": "/var/cache/pymotor/startup", "startup_in_image": "/tmp/startup",
               "ready_timeout": 600, "port_timeout": 60}
    stopped = decide(plan, hosts, probes, SETTINGS, {}, dict(options, max_fail_percentage=0))
    assert [p for p in stopped["problems"] if p.startswith("h2: docker")], stopped["problems"]
    assert "work" not in stopped
    went_on = decide(plan, hosts, probes, SETTINGS, {}, dict(options, max_fail_percentage=25))  # 1 of 4 hosts
    assert went_on["problems"] == [] and went_on["unreachable"] == ["h2"]
    assert all(step is None for step in went_on["work"]["h2"]["steps"])
    assert any(step is not None for step in went_on["work"]["h1"]["steps"])
    probes["h1"] = dict(probes["h1"], can_talk_to_docker=False)  # 2 of 4: more than 25 %
    assert decide(plan, hosts, probes, SETTINGS, {}, dict(options, max_fail_percentage=25))["problems"]


def test_the_per_host_healers_are_no_control_plane_so_a_failed_engine_host_holds_back_only_what_needs_it():
    """The deploy's decision adds a healer on every host of the job (plan/healer.py, tier 3): counted as control
    plane, every host was one and a host unreachable at discovery kept every container of the fleet unstarted."""
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import HOST_HEALER_ROLE, SOCKPROXY_ROLE
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import decide

    plan = fleet_plan()
    hosts = list(HOSTS)
    probes = {h: _probe(plan, h) for h in hosts}
    down = next(c["host"] for c in plan["containers"] if c["role"] == "decode")
    probes[down] = dict(probes[down], can_talk_to_docker=False, msg="connection refused")
    options = {"startup_cache": "/var/cache/pymotor/startup", "startup_in_image": "/tmp/startup",
               "ready_timeout": 600, "port_timeout": 60, "max_fail_percentage": 25}
    work = decide(plan, hosts, probes, SETTINGS, {}, options)["work"]
    hit = {c["job_name"] for c in plan["containers"] if c["host"] == down and c["tier"] == 2}
    for host, w in work.items():
        assert w["control"] == ["ctl"], host
        assert w["unreachable"] == [down], host  # the tier play reads it from the host's own work
        if not w["needs"]:
            continue  # a host without containers of the job gets no healer
        agents = [name for name in w["needs"] if "-healer-" in name or "-sockproxy-" in name]  # healer and proxy
        assert len(agents) == 2 and all(w["needs"][a] == [host] for a in agents), (host, w["needs"])
        held = needing(w["needs"], [down])
        expected = sorted(c["name"] for c in plan["containers"] if c["host"] == host and c["job_name"] in hit)
        assert held == sorted(expected + (agents if host == down else [])), host
    gone = left_out(dict(plan, containers=plan["containers"] + [
        {"name": "job-healer-" + down, "host": down, "role": HOST_HEALER_ROLE, "tier": 3, "job_name": "x"},
        {"name": "job-sockproxy-" + down, "host": down, "role": SOCKPROXY_ROLE, "tier": 3, "job_name": "y"}]), [down])
    assert "control-plane containers left out" not in left_out_message(gone)
