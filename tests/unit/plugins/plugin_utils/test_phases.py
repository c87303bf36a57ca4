"""Unit tests of the phase logic behind the entry points: the one job_id rule, the inventory view, the decision
(prechecks, per-host work per tier step, readiness), the end-of-deploy report and the support bundle files."""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.upgrade import ROUTES_SETTLE_S
from ansible_collections.pymotor.ascend.plugins.action.motor_decide import registrations
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import config_summary, normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    HARDWARE_NPUS,
    KV_PORT_FLOOR,
    Problem,
    failure_text,
    job_id_problem,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.bundle import host_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import host_view, pymotor_hosts, unread_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import with_host_healers
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import model_dirs
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import decide
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.report import deploy_summary, unfinished_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import natural_key, render_table

SEED = Path(__file__).resolve().parents[4] / "examples" / "seed_pd_separation"


def _precheck_tests():
    """The seed hosts and role settings of test_motor_precheck.py (one fixture for both files)."""
    spec = importlib.util.spec_from_file_location("precheck_fixtures", Path(__file__).with_name("test_motor_precheck.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PRECHECK = _precheck_tests()
HOSTS = _PRECHECK.HOSTS
SETTINGS = dict(_PRECHECK.DEFAULTS, motor_service_engine_mounts=["/usr/local/Ascend/driver"],
                motor_service_env_functions={"common.sh": ["set_common_env"]})
OPTIONS = {"startup_cache": "/var/cache/pymotor/startup", "startup_in_image": "/tmp/startup", "ready_timeout": 60,
           "port_timeout": 30}


def seed(job_id=None):
    user = json.loads((SEED / "user_config.json").read_text())
    if job_id is not None:
        user["motor_deploy_config"]["job_id"] = job_id
    return user, json.loads((SEED / "env.json").read_text())


@pytest.fixture(scope="module")
def plan():
    # with the per-host healers the decide step adds (plan/healer.py), so the converged states below list them
    return with_host_healers(build_plan(normalize(*seed()), HOSTS))


def healthy(plan, host, containers=()):
    own = [c for c in plan["containers"] if c["host"] == host]
    npus = sorted({n for c in own for n in c["npu_ids"]}) or [0]
    return {"can_talk_to_docker": True, "host_info": {"ServerVersion": "24.0.7"}, "images": [{"Id": "sha256:img"}],
            "containers": list(containers), "npu_devices": npus, "npu_health": {str(n): "OK" for n in npus},
            "npu_error": "", "listening": [], "links": {str(n): "UP" for n in npus},
            "npu_network": {str(n): {"ip": "29.%d.0.%d" % (sum(map(ord, host)) % 250, n + 1), "tls": "0"} for n in npus},
            "free_mb": 50000,
            "paths": {"/usr/local/Ascend/driver": True, "/usr/local/Ascend/driver/tools/hccn_tool": True,
                      "/mnt/weight": True},
            "models": {m: "ok" for m in model_dirs(own)}}


@pytest.mark.parametrize("job_id", ["a" * 41, "a" * 63, "mindie-motor-2"])
def test_validate_and_plan_accept_the_same_job_ids(job_id):
    config = normalize(*seed(job_id))
    assert config["job_id"] == job_id
    assert build_plan(config, HOSTS)["job_id"] == job_id


@pytest.mark.parametrize("job_id", ["a" * 64, "Mindie_Motor", "-x", "a.b"])
def test_validate_and_plan_reject_the_same_job_ids_with_the_same_hint(job_id):
    with pytest.raises(MotorConfigError) as validated:
        normalize(*seed(job_id))
    config = normalize(*seed())
    config["job_id"] = job_id
    with pytest.raises(MotorPlanError) as planned:
        build_plan(config, HOSTS)
    by_validate = [p for p in validated.value.problems if p.path == "motor_deploy_config.job_id"]
    by_plan = [p for p in planned.value.problems if p.path == "motor_deploy_config.job_id"]
    assert len(by_validate) == len(by_plan) == 1
    assert by_validate[0].hint == by_plan[0].hint == job_id_problem(job_id).hint
    assert "cannot prefix container names" in by_validate[0].message and "cannot prefix" in by_plan[0].message


def test_contract_facts_and_the_one_problem_format():
    # derived from the transport's random port range: 20000 + 1000 per NPU of the host
    assert KV_PORT_FLOOR["800I_A2"] == 28000 and KV_PORT_FLOOR["800I_A3"] == 36000
    assert KV_PORT_FLOOR["350-Atlas-4p-16"] == 36000 and KV_PORT_FLOOR["950-SuperPod-Atlas-8"] == 28000
    assert set(KV_PORT_FLOOR) == set(HARDWARE_NPUS)
    assert str(Problem("a.b", "is wrong", "fix it")) == "a.b: is wrong (fix it)"
    text = failure_text([Problem("a", "x", "y"), Problem("a", "x", "y"), "h1: disk: full (fix: free it)"],
                        [Problem("w", "odd", "hm")])
    assert text.splitlines() == ["1. a: x (y)", "2. h1: disk: full (fix: free it)", "", "warnings:",
                                 "w: odd (hm)"]
    assert sorted(["p10", "p2", "p1"], key=natural_key) == ["p1", "p2", "p10"]
    assert render_table([{"a": 1, "b": None}], [("a", "A"), ("b", "BB")]).splitlines() == ["A  BB", "-  --", "1"]


def test_config_summary_lines():
    lines = config_summary(normalize(*seed()))
    assert lines[0] == "mode: pd_separation" and lines[2] == "job_id: mindie-motor"
    assert lines[3] == "instances: prefill 1 x 1 pod(s) x 4 NPUs, decode 1 x 1 pod(s) x 4 NPUs"


def test_inventory_view_reads_what_the_plan_reads():
    groups = {"motor_engine_hosts": ["e1", "e2"], "motor_control_hosts": ["c1", "e1"], "all": ["x"]}
    assert pymotor_hosts(groups) == ["e1", "e2", "c1"]
    view = host_view({"ansible_host": "10.1.1.1", "motor_npu_id": [1], "group_names": ["motor_engine_hosts"]})
    assert view["motor_host_ip"] == "10.1.1.1" and view["motor_nic"] == "eth0" and view["motor_reserved_ports"] == []
    assert view["motor_var_names"] == ["motor_npu_id"]
    assert host_view({"ansible_default_ipv4": {"address": "10.2.2.2"}})["motor_host_ip"] == "10.2.2.2"
    assert host_view({"motor_host_ip": None, "ansible_host": "10.1.1.1"})["motor_host_ip"] is None
    # without a probe: the cached fact's interface, else eth0; a DNS name in ansible_host is handed on for the plan
    assert host_view({"ansible_default_ipv4": {"address": "10.2.2.2", "interface": "bond0"}})["motor_nic"] == "bond0"
    dns = host_view({"ansible_host": "npu-a2-01.dc1.example.com"})
    assert dns["motor_host_ip"] is None and dns["ansible_host"] == "npu-a2-01.dc1.example.com"
    assert unread_hosts(["a", "b", "c"], {"a": {"can_talk_to_docker": False}, "b": {"unreachable": True}}) == ["b", "c"]


def test_decision_gives_every_host_one_run_per_step_with_work(plan):
    probes = {"h1": healthy(plan, "h1"), "ctl": healthy(plan, "ctl")}
    decision = decide(plan, ["h1", "ctl"], probes, SETTINGS, {}, OPTIONS)
    assert decision["problems"] == []
    assert [s["tiers"] for s in decision["steps"]] == [[0, 1], [2]]  # the per-host healers make no step of their own
    ctl, h1 = decision["work"]["ctl"]["steps"], decision["work"]["h1"]["steps"]
    assert ctl[1] is None and h1[0] is None  # no run where a host has nothing to render or start
    assert "configmap" in ctl[0] and "configmap" in h1[1]  # each host renders in its first run
    early = {c["name"] for c in plan["containers"] if c["host"] == "ctl" and c["tier"] < 2}
    # each host's healer and its socket proxy start in its host's last run, after what the healer watches there (the
    # run's last start group)
    assert {c["name"] for c in ctl[0]["containers"]} == early | {"mindie-motor-sockproxy-ctl", "mindie-motor-healer-ctl"}
    assert [c["name"] for c in ctl[0]["containers"]][-2:] == ["mindie-motor-sockproxy-ctl", "mindie-motor-healer-ctl"]
    assert [c["name"] for c in h1[1]["containers"]][-2:] == ["mindie-motor-sockproxy-h1", "mindie-motor-healer-h1"]
    assert [c["group"] for c in h1[1]["containers"]] == [2, 2, 3, 3]
    assert len(h1[1]["containers"]) == 4 and h1[1]["containers"][0]["image"] == "local/pymotor:1"
    assert h1[1]["configmap"]["startup_dir"] == "/var/cache/pymotor/startup/sha256-img"
    names = [c["name"] for c in decision["readiness"]]
    assert names[0] == "the controller port answers" and "coordinator reports ready" in names[1]
    engines = [c for c in decision["readiness"] if c["name"].startswith("the engine of ")]
    assert [c["url"] for c in engines] == ["http://10.0.0.1:%d/status" % p for p in (10005, 10007, 10001, 10003)]
    assert all(c["until"] == "status_ok" for c in engines)  # every engine endpoint, not only the coordinator
    assert decision["readiness"][-1]["endpoints"]  # affinity: every prefill DP rank at the conductor
    assert decision["states"] == {"h1": {}, "ctl": {}}


def test_decision_of_a_converged_job_only_renders(plan):
    first = decide(plan, ["h1", "ctl"], {h: healthy(plan, h) for h in ("h1", "ctl")}, SETTINGS, {}, OPTIONS)
    specs = {s["name"]: s for step in ("ctl", "h1") for run in first["work"][step]["steps"] if run
             for s in run["containers"]}
    running = {h: [{"Names": ["/" + n], "State": "running", "Labels": s["labels"]} for n, s in specs.items()
                   if s["labels"]["io.pymotor.container"] in [c["name"] for c in plan["containers"] if c["host"] == h]]
               for h in ("h1", "ctl")}
    again = decide(plan, ["h1", "ctl"], {h: healthy(plan, h, running[h]) for h in ("h1", "ctl")}, SETTINGS, {},
                   OPTIONS)
    assert again["reconcile"]["changes"] == []
    runs = [run for host in ("h1", "ctl") for run in again["work"][host]["steps"] if run]
    assert len(runs) == 2 and all(run["containers"] == [] and "configmap" in run for run in runs)
    assert again["states"]["h1"] == {n: "running" for n in [c["name"] for c in plan["containers"] if c["host"] == "h1"]}


def test_decision_watches_every_engine_pod_and_can_restart_each_instance(plan):
    """stalls: every engine pod with its node manager and engine status targets, named by its instance; repairs: per
    instance the runs that restart all its pods, with the same specs the first deploy starts them with."""
    probes = {h: healthy(plan, h) for h in ("h1", "ctl")}
    decision = decide(plan, ["h1", "ctl"], probes, SETTINGS, {}, OPTIONS)
    engines = [c for c in plan["containers"] if c["tier"] == 2]
    assert [s["container"] for s in decision["stalls"]] == [c["name"] for c in engines]
    assert [s["instance"] for s in decision["stalls"]] == [c["job_name"] for c in engines]
    stall = decision["stalls"][0]
    assert stall["node_manager"]["url"].endswith("/node-manager/status")
    assert len(stall["engines"]) == len(engines[0]["endpoints"])
    assert all(e["url"].endswith("/status") and "tls" not in e for e in stall["engines"])  # plain http in the seed
    assert sorted(decision["repairs"]) == sorted({c["job_name"] for c in engines})
    started = {s["name"]: s for run in decision["work"]["h1"]["steps"] if run for s in run["containers"]}
    for job, runs in decision["repairs"].items():
        assert [r["host"] for r in runs] == ["h1"] and runs[0]["job_id"] == plan["job_id"]
        names = [s["name"] for s in runs[0]["containers"]]
        assert names == [c["name"] for c in engines if c["job_name"] == job]
        assert all(s == dict(started[s["name"]], restart=True) for s in runs[0]["containers"])


def test_the_kv_watcher_gets_its_script_and_config(plan):
    """The watcher's config directory holds the script handed to decide and its config (no instance count: a
    scale-out restarts nobody); its command runs them; a new script restarts the watcher and nobody else."""
    options = dict(OPTIONS, watcher_script="print('watching')\n")
    probes = {h: healthy(plan, h) for h in ("h1", "ctl")}
    decision = decide(plan, ["h1", "ctl"], probes, SETTINGS, {}, options)
    watcher = next(c for c in plan["containers"] if c["role"] == "kv_watcher")
    ctl = decision["work"]["ctl"]["steps"][0]
    files = next(c for c in ctl["configmap"]["containers"] if c["name"] == watcher["name"])["files"]
    assert files["motor_kv_watcher.py"] == "print('watching')\n"
    config = json.loads(files["kv_watcher.json"])
    assert config == {"conductor": "http://%s:13333" % watcher["ip"], "interval": 2,
                      "state": "/var/tmp/motor_kv_watcher.json",
                      "coordinator": "http://%s:1026/readiness" % plan["coordinator"]["ip"],
                      "metrics": {"host": watcher["ip"], "port": 13334}}  # its /metrics on the host's address only
    spec = next(s for s in ctl["containers"] if s["name"] == watcher["name"])
    assert spec["command"] == watcher["command"] and spec["devices"] == [] and not spec["stdin_open"]
    others = next(s for s in ctl["containers"] if s["name"] != watcher["name"])
    assert others["command"] == SETTINGS["motor_service_command"]
    newer = decide(plan, ["h1", "ctl"], probes, SETTINGS, {}, dict(options, watcher_script="print('v2')\n"))
    changed = {n for n, h in newer["reconcile"]["hashes"].items() if decision["reconcile"]["hashes"][n] != h}
    assert changed == {watcher["name"]}


def _running_as_planned(plan, first, skip=()):
    """Probes of hosts where every planned container runs with the labels of ``first``'s specs (but ``skip``)."""
    specs = {s["name"]: s for host in ("ctl", "h1") for run in first["work"][host]["steps"] if run
             for s in run["containers"]}
    running = {h: [{"Names": ["/" + n], "State": "running", "Labels": s["labels"]} for n, s in specs.items()
                   if n not in skip and n in [c["name"] for c in plan["containers"] if c["host"] == h]]
               for h in ("h1", "ctl")}
    return {h: healthy(plan, h, running[h]) for h in ("h1", "ctl")}


def test_a_rerun_repairs_the_registrations_a_restarted_conductor_lost(plan):
    """The conductor lists no rank of the running prefill pod: with the KV watcher running on, the deploy says so and
    leaves the repair to it; without a watcher that remembers (a new one), the coordinator restarts in its step."""
    options = dict(OPTIONS, watcher_script="print('watching')\n")
    first = decide(plan, ["h1", "ctl"], {h: healthy(plan, h) for h in ("h1", "ctl")}, SETTINGS, {}, options)
    empty = dict(options, registrations={"count": 0, "services": []})
    kept = decide(plan, ["h1", "ctl"], _running_as_planned(plan, first), SETTINGS, {}, empty)
    assert kept["reconcile"]["changes"] == [] and "KV watcher re-registers" in kept["registrations"]["repair"]
    assert kept["registrations"]["missing"] == ["mindie-motor-p0-0: 0/2 of tcp://10.0.0.1:5557..5558"]
    watcher = next(c["name"] for c in plan["containers"] if c["role"] == "kv_watcher")
    fresh = decide(plan, ["h1", "ctl"], _running_as_planned(plan, first, skip=[watcher]), SETTINGS, {}, empty)
    changes = {r["container"]: r["action"] for r in fresh["reconcile"]["changes"]}
    assert changes == {watcher: "create", "mindie-motor-coordinator": "restart"}
    specs = {s["name"]: s for s in fresh["work"]["ctl"]["steps"][0]["containers"]}
    assert specs["mindie-motor-coordinator"]["restart"] is True and "restart" not in specs[watcher]
    listed = {"services": [{"Endpoint": "tcp://10.0.0.1:%d" % p} for p in (5557, 5558)]}
    whole = decide(plan, ["h1", "ctl"], _running_as_planned(plan, first, skip=[watcher]), SETTINGS, {},
                   dict(options, registrations=listed))
    assert whole["registrations"] is None and [r["action"] for r in whole["reconcile"]["changes"]] == ["create"]


def test_running_containers_keep_their_user_config_file(plan):
    """Only a container that keeps running unchanged keeps its user_config.json as it is (upstream's sync loop would
    cp -f a rewritten one into it, and its config watchers can load the truncated file as the defaults); a container
    that is created or restarts gets the plan's."""
    first = decide(plan, ["h1", "ctl"], {h: healthy(plan, h) for h in ("h1", "ctl")}, SETTINGS, {}, OPTIONS)
    engine = next(c["name"] for c in plan["containers"] if c["host"] == "h1")
    again = decide(plan, ["h1", "ctl"], _running_as_planned(plan, first, skip=[engine]), SETTINGS, {}, OPTIONS)
    assert [(r["container"], r["action"]) for r in again["reconcile"]["changes"]] == [(engine, "create")]
    keep = {c["name"]: c["keep"] for host in ("h1", "ctl") for run in again["work"][host]["steps"]
            if run and "configmap" in run for c in run["configmap"]["containers"]}
    assert keep == {c["name"]: [] if c["name"] == engine else ["user_config.json"] for c in plan["containers"]}
    fresh = {c["name"]: c["keep"] for host in ("h1", "ctl") for run in first["work"][host]["steps"]
             if run and "configmap" in run for c in run["configmap"]["containers"]}
    assert set(map(tuple, fresh.values())) == {()}


def test_the_decide_entry_point_reads_the_conductors_registrations_itself(plan):
    """GET /services of the plan's conductor (plain http, 5 s) in the worker: the answer when it is 200 with a JSON
    object, else None (a first deploy: nothing listens yet), and nothing is asked without a conductor."""
    asked = []

    def answer(status, body):
        def get(url, timeout, tls):
            asked.append((url, timeout, tls))
            return status, body, ""
        return get

    listed = {"count": 0, "services": []}
    assert registrations(plan, answer(200, listed)) == listed
    conductor = plan["kv_conductor"]
    assert asked == [("http://%s:%s/services" % (conductor["ip"], conductor["port"]), 5, None)]
    assert registrations(plan, answer(-1, None)) is None
    assert registrations(plan, answer(500, {"error": "down"})) is None
    assert registrations(plan, answer(200, ["not", "an", "object"])) is None
    del asked[:]
    assert registrations(dict(plan, kv_conductor=None), answer(200, listed)) is None and asked == []


def test_a_hosts_own_setting_shapes_its_work(plan):
    probes = {"h1": healthy(plan, "h1"), "ctl": healthy(plan, "ctl")}
    decision = decide(plan, ["h1", "ctl"], probes, SETTINGS, {"h1": {"motor_service_log_root": "/data/logs"}}, OPTIONS)
    engine = decision["work"]["h1"]["steps"][1]
    assert all(d.startswith("/data/logs/") for d in engine["configmap"]["dirs"])
    assert any(v.startswith("/data/logs/") for v in engine["containers"][0]["volumes"])
    assert all(d.startswith("/var/log/pymotor/") for d in decision["work"]["ctl"]["steps"][0]["configmap"]["dirs"])


def test_precheck_problems_stop_the_decision(plan):
    probes = {"h1": dict(healthy(plan, "h1"), images=[]), "ctl": healthy(plan, "ctl")}
    decision = decide(plan, ["h1", "ctl"], probes, SETTINGS, {}, OPTIONS)
    assert decision["problems"] and "work" not in decision
    assert decision["problems"][0].startswith("h1: image: local/pymotor:1 is not present on the host (fix: ")


def test_config_root_is_honoured_by_the_plan():
    plan = build_plan(normalize(*seed()), HOSTS, None, "/srv/pymotor/")
    assert all(c["configmap_path"] == "/srv/pymotor/mindie-motor/" + c["name"] for c in plan["containers"])
    assert all(c["env"]["CONFIGMAP_PATH"] == c["configmap_path"] for c in plan["containers"])


def test_report_names_unfinished_hosts_and_layers_states(plan):
    decision = {"work": {"ctl": {"steps": [{"containers": []}, None]}, "h1": {"steps": [None, {"containers": []}]},
                         "idle": {"steps": [None, None]}}}
    assert unfinished_hosts(decision, {"ctl": {"states": {}}, "h1": {"failed": True}}) == ["h1"]
    assert unfinished_hosts(decision, {"ctl": {"states": {}}}) == ["h1"]
    assert unfinished_hosts(decision, {"ctl": {}, "h1": {"unreachable": True}}) == ["h1"]
    assert unfinished_hosts(decision, {"ctl": {"states": {}}, "h1": {"states": {}}}) == []
    p0 = next(c for c in plan["containers"] if c["role"] == "prefill")
    lines = deploy_summary(plan, [{"h1": {p0["name"]: "exited"}}, {"h1": {p0["name"]: "running"}}, {}])
    assert lines[0].split() == ["HOST", "CONTAINER", "ROLE", "NPUS", "STATE", "PORTS"]
    row = next(line for line in lines if p0["name"] in line)
    assert "running" in row and "0,1,2,3" in row.replace("-", ",")
    assert lines[-1] == "coordinator (OpenAI API): %s" % plan["coordinator"]["url"]
    assert any("missing" in line for line in lines)


def test_bundle_files_are_masked():
    config = json.dumps({"motor_controller_config": {"api_key": "s3cret"}})
    read = {"job": {"logs": [{"name": "job-p0-0", "id": "abc", "stdout": "hello token=abc", "stderr": ""}],
                    "engine": {"info": {"ServerVersion": "27.5.1"}}},
            "configs": {"results": [{"item": {"path": "/etc/pymotor/job/job-p0-0/user_config.json"},
                                     "content": base64.b64encode(config.encode()).decode()}]},
            "npu_smi": {"stdout": "npu ok"}}
    files = {f["path"]: f["text"] for f in host_files(copy.deepcopy(read), "/etc/pymotor/")}
    assert set(files) == {"logs/job-p0-0.log", "configs/job/job-p0-0/user_config.json", "npu-smi-info.txt",
                          "docker-info.txt"}
    assert "s3cret" not in files["configs/job/job-p0-0/user_config.json"] and "********" in files[
        "configs/job/job-p0-0/user_config.json"]
    assert files["logs/job-p0-0.log"].startswith("hello")
    assert '"ServerVersion": "27.5.1"' in files["docker-info.txt"]


PROBE = {"default_interface": "enp189s0f0",
         "interfaces": {"lo": {"ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
                        "enp189s0f0": {"ipv4": ["10.20.0.11", "10.20.0.99"], "ipv6": []},
                        "bond1": {"ipv4": ["192.168.7.11"], "ipv6": []}, "ib0": {"ipv4": [], "ipv6": []}}}


@pytest.mark.parametrize("hostvars, nic, ip", [
    # nothing set, ansible_host a DNS name: the default route's interface and its (first) IPv4 address
    ({"ansible_host": "npu-a2-01.dc1.example.com"}, "enp189s0f0", "10.20.0.11"),
    ({}, "enp189s0f0", "10.20.0.11"),
    # a set motor_nic: its address (kolla-ansible: the address is the interface's)
    ({"ansible_host": "npu-a2-01", "motor_nic": "bond1"}, "bond1", "192.168.7.11"),
    # a set motor_nic without an IPv4 address (or absent): the default route's address; the precheck judges the NIC
    ({"motor_nic": "ib0"}, "ib0", "10.20.0.11"),
    ({"motor_nic": "eth0"}, "eth0", "10.20.0.11"),
    # a set motor_host_ip always wins, and so does an IP address in ansible_host
    ({"ansible_host": "npu-a2-01", "motor_host_ip": "10.20.0.99"}, "enp189s0f0", "10.20.0.99"),
    ({"ansible_host": "10.20.0.99"}, "enp189s0f0", "10.20.0.99"),
    ({"motor_host_ip": None, "motor_nic": "bond1"}, "bond1", None),
    # the probe wins over the cached fact
    ({"ansible_default_ipv4": {"address": "10.9.9.9", "interface": "eth9"}}, "enp189s0f0", "10.20.0.11"),
])
def test_host_view_takes_nic_and_address_from_the_probe_unless_set(hostvars, nic, ip):
    view = host_view(hostvars, PROBE)
    assert (view["motor_nic"], view["motor_host_ip"]) == (nic, ip)
    assert "ansible_host" not in view


def test_host_view_of_a_probe_without_interfaces_falls_back():
    view = host_view({"ansible_host": "npu-a2-01.dc1.example.com"}, {"can_talk_to_docker": True})
    assert view["motor_nic"] == "eth0" and view["motor_host_ip"] is None
    assert view["ansible_host"] == "npu-a2-01.dc1.example.com"
    cached = {"ansible_default_ipv4": {"address": "10.9.9.9", "interface": "eth9"}}
    assert host_view(cached, {"interfaces": {}, "default_interface": ""})["motor_host_ip"] == "10.9.9.9"


def test_decision_of_an_image_upgrade_waits_for_the_control_plane_before_the_roll(plan):
    first = decide(plan, ["h1", "ctl"], {h: healthy(plan, h) for h in ("h1", "ctl")}, SETTINGS, {}, OPTIONS)
    specs = {s["name"]: s for step in ("ctl", "h1") for run in first["work"][step]["steps"] if run
             for s in run["containers"]}
    running = {h: [{"Names": ["/" + n], "State": "running", "Labels": s["labels"], "Image": "local/pymotor:1"}
                   for n, s in specs.items() if s["labels"]["io.pymotor.container"]
                   in [c["name"] for c in plan["containers"] if c["host"] == h]] for h in ("h1", "ctl")}
    probes = {h: dict(healthy(plan, h, running[h]), images=[{"Id": "sha256:new"}]) for h in ("h1", "ctl")}
    settings = dict(SETTINGS, motor_service_image="local/pymotor:2")
    # one prefill and one decode instance: each roll leaves its role with nothing serving, stopped before any change
    stopped = decide(plan, ["h1", "ctl"], probes, settings, {}, OPTIONS)
    assert [p.split(": ", 1)[0] for p in stopped["problems"]] == ["motor_roll_allow_outage"] * 2
    assert "the only running prefill instance" in stopped["problems"][0] and "work" not in stopped
    assert "scale the role to 2 instances first" in stopped["problems"][0]
    upgrade = decide(plan, ["h1", "ctl"], probes, settings, {}, dict(OPTIONS, allow_outage=True))
    assert upgrade["problems"] == []
    assert upgrade["reconcile"]["first"] == {} and len(upgrade["rolling"]) == 2
    wait = upgrade["upgrade"]["wait"]
    # every engine serves again first; the conductor's ranks wait for the routes check (a lost prefill add)
    assert [c["name"] for c in wait] == [c["name"] for c in upgrade["readiness"] if c["until"] != "endpoints"]
    assert upgrade["upgrade"]["previous_image"] == "local/pymotor:1"
    assert "-e motor_image=local/pymotor:1" in upgrade["upgrade"]["rollback"]
    # then the coordinator must route every running instance, else the controller restarts (a lost add)
    repair = upgrade["upgrade"]["repair"]
    assert [c["until"] for c in repair["routes"]] == ["routes"] and repair["routes"][0]["timeout"] == ROUTES_SETTLE_S
    engines = {c["job_name"] for c in plan["containers"] if c["role"] in ("prefill", "decode")}
    assert {e["name"] for e in repair["routes"][0]["endpoints"]} == engines
    assert [[(s["name"], s.get("restart")) for s in run["containers"]] for run in repair["runs"]] == [
        [(c["name"], True) for c in plan["containers"] if c["role"] == "controller"]]
    assert repair["after"][0]["endpoints"] == repair["routes"][0]["endpoints"]
    assert repair["after"][1:] == [c for c in upgrade["readiness"] if c["until"] == "endpoints"]
    assert first["upgrade"]["repair"] == {}


def test_the_running_image_under_a_new_name_restarts_nothing(plan):
    """A retag (same image id, new name): the containers keep the name they were created from in their hash."""
    first = decide(plan, ["h1", "ctl"], {h: healthy(plan, h) for h in ("h1", "ctl")}, SETTINGS, {}, OPTIONS)
    specs = {s["name"]: s for step in ("ctl", "h1") for run in first["work"][step]["steps"] if run
             for s in run["containers"]}
    running = {h: [{"Names": ["/" + n], "State": "running", "Labels": s["labels"],
                    "Image": SETTINGS["motor_service_image"], "ImageID": "sha256:img"}
                   for n, s in specs.items() if s["labels"]["io.pymotor.container"]
                   in [c["name"] for c in plan["containers"] if c["host"] == h]] for h in ("h1", "ctl")}
    probes = {h: healthy(plan, h, running[h]) for h in ("h1", "ctl")}
    retag = decide(plan, ["h1", "ctl"], probes, dict(SETTINGS, motor_service_image="registry.example/pymotor:rel"),
                   {}, OPTIONS)
    assert retag["problems"] == [] and retag["reconcile"]["changes"] == [] and retag["rolling"] == []
