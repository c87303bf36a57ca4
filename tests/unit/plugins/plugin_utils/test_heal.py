"""plugins/plugin_utils/heal.py (the controller's healer and its repair rule) and reconcile/healer.py (its files in the
controller's config directory)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_heal_rules as rules
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_npu_smi
from ansible_collections.pymotor.ascend.plugins.plugin_utils import heal
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.monitoring import HEALER_ALARM_METRIC
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import fold_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.healer import (
    HEALER_BLOCK,
    HEALER_CONFIG,
    HEALER_INSTANCES,
    HEALER_NPU_SMI,
    HEALER_RULE,
    NPU_HEALTH_FILE,
    HEALER_SCRIPT,
    healer_files,
    with_instances,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps, own_files
from ansible_collections.pymotor.ascend.tests.unit.local_http import local_server

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
HOSTS = {
    "h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "h2": {"motor_host_ip": "10.0.0.2", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]},
}
NOT_READY = {"status": "ok", "message": "Coordinator is ok", "ready": False}


def seed_plan(seed="seed_pd_separation", **deploy):
    user = json.loads((EXAMPLES / seed / "user_config.json").read_text())
    user["motor_deploy_config"].update(hardware_type="800I_A2", **deploy)
    return build_plan(normalize(user, json.loads((EXAMPLES / seed / "env.json").read_text())), HOSTS)


def test_rule_acts_only_on_a_coordinator_that_answers_not_ready_while_a_prefill_or_union_instance_serves():
    union = {"u0": {"role": "union", "live": True}}
    assert "u0 serve" in heal.stranded_coordinator(NOT_READY, union)
    assert heal.stranded_coordinator(dict(NOT_READY, ready=True), union) is None
    assert heal.stranded_coordinator(None, union) is None  # down or 503: liveness, not this rule
    assert heal.stranded_coordinator(NOT_READY, {"u0": {"role": "union", "live": False}}) is None  # still loading
    assert heal.stranded_coordinator(NOT_READY, {"d0": {"role": "decode", "live": True}}) is None  # only_decode
    assert "p0" in heal.stranded_coordinator(NOT_READY, {"p0": {"role": "prefill", "live": True}})


def test_backoff_doubles_per_action_in_the_last_hour_up_to_the_cap():
    budget = rules.rule("lost_add")["budget"]
    assert rules.backoff(budget, [], 1000.0) == 0.0
    assert rules.backoff(budget, [1000.0], 1010.0) == 1080.0
    assert rules.backoff(budget, [900.0, 1000.0], 1010.0) == 1160.0
    assert rules.backoff(budget, [1000.0 + i for i in range(10)], 1010.0) == 1009.0 + 600
    assert rules.backoff(budget, [0.0], 5000.0) == 0.0  # older than an hour: forgotten


class Cluster:
    """The coordinator's and the engines' answers, by URL."""

    def __init__(self, ready=False, engine="normal"):
        self.ready, self.engine = ready, engine

    def get(self, target):
        if target["url"].endswith("/readiness"):
            return dict(NOT_READY, ready=self.ready)
        return {"status": self.engine}


def healer(tmp_path, cluster, clock, acted):
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({"u0": {"role": "union", "engines": [{"url": "http://e/status", "tls": None}]}}))
    config = {"coordinator": {"url": "http://c/readiness", "tls": None}, "instances_file": str(instances),
              "state": str(tmp_path / "state.json"), "settle": 40}
    return heal.Healer(config, get=cluster.get, clock=lambda: clock[0], act=lambda: acted.append(clock[0]))


def test_healer_acts_after_settle_seconds_in_a_row_then_backs_off(tmp_path, capsys):
    cluster, clock, acted = Cluster(), [1000.0], []
    h = healer(tmp_path, cluster, clock, acted)
    for clock[0] in (1000.0, 1020.0, 1039.0):
        assert not h.step()
    clock[0] = 1040.0
    assert h.step() and acted == [1040.0]
    line = capsys.readouterr().out.strip()
    assert "motor-healer: restarting the controller container" in line and "u0 serve" in line and "for 40 s" in line
    # a new healer (the container restarted): settles again, and the backoff (kept in the state file) doubles
    h = healer(tmp_path, cluster, clock, acted)
    for clock[0] in (1045.0, 1085.0, 1110.0):
        assert not h.step()
    clock[0] = 1120.0
    assert h.step() and acted == [1040.0, 1120.0]


def test_healer_resets_when_the_coordinator_gets_ready_or_the_engines_stop_serving(tmp_path):
    cluster, clock, acted = Cluster(), [0.0], []
    h = healer(tmp_path, cluster, clock, acted)
    h.step()
    clock[0], cluster.ready = 30.0, True
    h.step()
    clock[0], cluster.ready = 50.0, False
    assert not h.step()  # held again only since 50
    clock[0], cluster.engine = 85.0, "abnormal"
    assert not h.step()
    clock[0], cluster.engine = 95.0, "normal"
    assert not h.step() and acted == []


def test_end_controller_spares_pid_1_and_itself(tmp_path):
    proc = tmp_path / "proc"
    for pid in ("1", "7", "8", "42", "self"):
        (proc / pid).mkdir(parents=True)
    sent, slept = [], []
    pids = heal.end_controller(3, own_pid=8, proc=str(proc), kill=lambda pid, sig: sent.append((pid, sig)),
                               sleep=slept.append)
    assert pids == [7, 42] and slept == [3]
    assert sent == [(7, signal.SIGTERM), (42, signal.SIGTERM), (7, signal.SIGKILL), (42, signal.SIGKILL)]


def test_an_engine_pod_repair_freezes_its_processes_for_the_hold_before_it_ends_them(tmp_path):
    """Its node manager then does not answer for ``hold`` s: the controller's check of a timed-out instance finds it
    down (a plain restart is down for about a second, which a loaded controller misses)."""
    proc = tmp_path / "proc"
    for pid in ("1", "7", "8", "42"):
        (proc / pid).mkdir(parents=True)
    sent, slept = [], []
    pids = heal.end_controller(3, own_pid=8, proc=str(proc), kill=lambda pid, sig: sent.append((pid, sig)),
                               sleep=slept.append, hold=heal.POD_HOLD)
    assert pids == [7, 42] and slept == [heal.POD_HOLD]
    assert sent == [(7, signal.SIGSTOP), (42, signal.SIGSTOP), (7, signal.SIGKILL), (42, signal.SIGKILL)]
    assert heal.POD_SETTLE + heal.POD_HOLD < heal.CONTROLLER_POD_SETTLE  # the pod's repair ends before the controller's


def test_the_healer_script_runs_alone_on_the_standard_library(tmp_path):
    script = tmp_path / HEALER_SCRIPT
    for name, text in healer_files(seed_plan())["mindie-motor-controller"].items():
        (tmp_path / name).write_text(text)
    out = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "usage: motor_healer.py <healer.json>" in out.stderr


def test_controller_config_directory_gets_the_healer_and_boot_starts_it():
    plan = seed_plan("seed_pd_separation", p_instances_num=2)
    files = own_files(plan, "")
    controller = "mindie-motor-controller"
    assert {HEALER_SCRIPT, HEALER_RULE, HEALER_CONFIG} <= set(files[controller])  # and the health check's probe (test_probes.py)
    config = json.loads(files[controller][HEALER_CONFIG])
    assert config["coordinator"]["url"].endswith("/readiness") and config["settle"] == heal.DEFAULTS["settle"]
    assert config["instances_file"].endswith("/" + HEALER_INSTANCES)
    written = with_instances(files, plan)
    instances = json.loads(written[controller][HEALER_INSTANCES])
    assert sorted(instances) == ["mindie-motor-d0", "mindie-motor-p0", "mindie-motor-p1"]
    assert all(t["url"].endswith("/status") for inst in instances.values() for t in inst["engines"])
    assert config["routes"]["url"].endswith("/metrics?type=dp")  # where the coordinator says what it routes
    assert all(inst["ips"] and inst["need"] == 1 for inst in instances.values())
    pods = {pod: target for inst in instances.values() for pod, target in inst["pods"].items()}
    engine_pods = sorted(c["name"] for c in plan["containers"] if c.get("tier") == 2)
    assert sorted(pods) == engine_pods and all(t["node_manager"]["url"].endswith("/node-manager/status")
                                               for t in pods.values())
    maps = {m["name"]: m for m in configmaps(plan["containers"], {}, written)}
    assert maps[controller]["prepend"] == {"boot.sh": HEALER_BLOCK}
    assert HEALER_INSTANCES in maps[controller]["files"]
    for pod in engine_pods:  # each engine pod watches itself: its own node manager and engines
        config = json.loads(files[pod][HEALER_CONFIG])
        assert config["pod"] == pod and config["settle"] == heal.POD_SETTLE and config["hold"] == heal.POD_HOLD
        assert config["node_manager"] == pods[pod]["node_manager"] and config["engines"] == pods[pod]["engines"]
        assert maps[pod]["prepend"]["boot.sh"].startswith(HEALER_BLOCK)
        # and reads its planned NPUs' npu-smi health into its log directory, for its host's healer (report only)
        planned = next(c for c in plan["containers"] if c["name"] == pod)
        assert config["npus"] == planned["npu_ids"] and config["npus"]
        assert config["npu_health_file"] == "/root/ascend/log/" + NPU_HEALTH_FILE
        assert files[pod][HEALER_NPU_SMI] == Path(motor_npu_smi.__file__).read_text()
    assert all(not m["prepend"] for name, m in maps.items() if name != controller and name not in engine_pods)


def test_scaling_changes_the_instance_list_but_not_the_controller_hash():
    one, two = seed_plan(p_instances_num=1), seed_plan(p_instances_num=2)
    parts = {"mindie-motor-controller": {"spec": "s"}}
    assert fold_files(parts, own_files(one, "")) == fold_files(parts, own_files(two, ""))
    assert with_instances({}, one) != with_instances({}, two)


def test_union_instances_of_a_hybrid_job_are_watched():
    user = json.loads((EXAMPLES / "seed_pd_hybrid" / "user_config.json").read_text())
    user["motor_deploy_config"]["hardware_type"] = "800I_A2"
    plan = build_plan(normalize(user, json.loads((EXAMPLES / "seed_pd_hybrid" / "env.json").read_text())), HOSTS)
    controller = next(c["name"] for c in plan["containers"] if c["role"] == "controller")
    instances = json.loads(with_instances({}, plan)[controller][HEALER_INSTANCES])
    assert {inst["role"] for inst in instances.values()} == {"union"}


def test_get_json_reads_a_200_answer_and_gives_none_otherwise():
    def answer(_method, path, _headers, _body):
        return 200 if path.startswith("/readiness") else 503, json.dumps({"ready": False, "path": path}).encode(), {}

    with local_server(answer) as base:
        assert heal.get_json({"url": base + "/readiness?status=normal", "tls": None}) == {
            "ready": False, "path": "/readiness?status=normal"}
        assert heal.get_json({"url": base + "/status", "tls": None}) is None  # 503
    assert heal.get_json({"url": base + "/status", "tls": None}, timeout=1) is None  # refused


class Pods:
    """Node manager and engine answers, by URL: ``nm`` the node manager's (status, body), ``engine`` -1 (refused) or
    an HTTP status."""

    def __init__(self, nm=(200, {"status": True}), engine=-1):
        self.nm, self.engine, self.coordinator_ready = nm, engine, True

    def answer(self, target):
        return self.nm if target["url"].endswith("/node-manager/status") else (self.engine, None)

    def get(self, target):
        return dict(NOT_READY, ready=self.coordinator_ready) if target["url"].endswith("/readiness") else None


POD = {"node_manager": {"url": "http://h:3026/node-manager/status"}, "engines": [{"url": "http://h:9000/status"}]}


def test_pod_verdict_is_the_readiness_waits_rule():
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import pod_verdict  # noqa: PLC0415

    asked = []
    assert pod_verdict(200, {"status": True}, lambda: asked.append(1) or False) == "stalled"
    assert pod_verdict(200, {"status": True}, lambda: True) == "started"  # an engine answers
    assert pod_verdict(200, {"status": False}, lambda: asked.append(2)) == "started"  # endpoints exist, not normal
    assert pod_verdict(-1, None, lambda: asked.append(3)) == "unknown"
    assert asked == [1]  # the engines are asked only when it matters


def test_an_engine_pod_whose_start_command_never_came_ends_itself_after_its_settle(tmp_path, capsys):
    pods, clock, acted = Pods(), [0.0], []
    config = dict(POD, pod="job-p0-0", settle=heal.POD_SETTLE, state=str(tmp_path / "state.json"))
    h = heal.Healer(config, clock=lambda: clock[0], act=lambda: acted.append(clock[0]), answer=pods.answer)
    assert not h.step()
    clock[0], pods.nm = 10.0, (-1, None)  # its node manager not up for a moment: neither resets nor acts
    assert not h.step()
    clock[0], pods.nm = float(heal.POD_SETTLE), (200, {"status": True})
    assert h.step() and acted == [heal.POD_SETTLE]
    line = capsys.readouterr().out
    assert "restarting this engine pod job-p0-0" in line and "already registered" in line and "for 30 s" in line
    h = heal.Healer(config, clock=lambda: clock[0], act=lambda: acted.append(clock[0]), answer=pods.answer)
    pods.engine = 200  # the start command came: the engine answers
    clock[0] = 200.0
    assert not h.step() and acted == [heal.POD_SETTLE]


def test_an_engine_pod_that_serves_again_forgets_its_backoff(tmp_path):
    """A later fault of the same pod is repaired after the settle again, not after the last fault's backoff."""
    pods, clock, acted = Pods(), [0.0], []
    config = dict(POD, pod="job-p0-0", settle=heal.POD_SETTLE, state=str(tmp_path / "state.json"))
    h = heal.Healer(config, clock=lambda: clock[0], act=lambda: acted.append(clock[0]), answer=pods.answer)
    pods.nm = (200, {"status": True})
    assert not h.step()
    clock[0] = float(heal.POD_SETTLE)
    assert h.step() and len(acted) == 1
    pods.engine = 200  # the start command came after the restart
    clock[0] = 100.0
    assert not h.step()
    assert json.loads((tmp_path / "state.json").read_text())["actions"] == []
    pods.engine = -1  # the next fault, soon after
    clock[0] = 110.0
    assert not h.step()
    clock[0] = 110.0 + heal.POD_SETTLE
    assert h.step() and acted == [heal.POD_SETTLE, 110.0 + heal.POD_SETTLE]


def test_the_controller_restarts_for_a_pod_stalled_longer_than_the_pods_own_repair(tmp_path, capsys):
    pods, clock, acted = Pods(), [0.0], []
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({"job-p0": {"role": "prefill", "engines": POD["engines"],
                                                "pods": {"job-p0-0": POD}}}))
    config = {"coordinator": {"url": "http://c/readiness"}, "instances_file": str(instances),
              "state": str(tmp_path / "state.json")}
    h = heal.Healer(config, get=pods.get, clock=lambda: clock[0], act=lambda: acted.append(clock[0]),
                    answer=pods.answer)
    for clock[0] in (0.0, float(heal.POD_SETTLE), heal.CONTROLLER_POD_SETTLE - 1.0):
        assert not h.step()
    clock[0] = float(heal.CONTROLLER_POD_SETTLE)
    assert h.step() and acted == [heal.CONTROLLER_POD_SETTLE]
    line = capsys.readouterr().out
    assert "restarting the controller container" in line and "pod job-p0-0" in line
    pods.nm = (200, {"status": False})  # started: forgotten
    clock[0] = 1000.0
    assert not h.step() and h.stalled == {}


def test_the_controller_leaves_a_pod_that_waits_for_a_peer_that_does_not_answer(tmp_path):
    """A pod of a two-pod instance whose other pod's host is down waits for its peer: no controller restart."""
    peer = dict(POD, node_manager={"url": "http://peer:1026/node-manager/status"})

    class TwoPods(Pods):
        def answer(self, target):
            return (-1, None) if target["url"].startswith("http://peer") else super().answer(target)

    pods, clock, acted = TwoPods(), [0.0], []
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({"job-p0": {"role": "prefill", "engines": POD["engines"],
                                                "pods": {"job-p0-0": POD, "job-p0-1": peer}}}))
    config = {"coordinator": {"url": "http://c/readiness"}, "instances_file": str(instances),
              "state": str(tmp_path / "state.json")}
    h = heal.Healer(config, get=pods.get, clock=lambda: clock[0], act=lambda: acted.append(clock[0]),
                    answer=pods.answer)
    for clock[0] in (0.0, float(heal.CONTROLLER_POD_SETTLE), 2.0 * heal.CONTROLLER_POD_SETTLE):
        assert not h.step()
    assert acted == [] and h.stalled == {}


def test_rule_acts_on_a_ready_coordinator_that_does_not_route_a_live_instance():
    live = {"d0": {"role": "decode", "live": True, "ips": ["10.0.0.2"], "need": 1},
            "p0": {"role": "prefill", "live": True, "ips": ["10.0.0.1"], "need": 1}}
    ready = dict(NOT_READY, ready=True)
    both = {3: {"role": "prefill", "ips": {"10.0.0.1"}}, 4: {"role": "decode", "ips": {"10.0.0.2"}}}
    assert heal.stranded_coordinator(ready, live, both) is None
    why = heal.stranded_coordinator(ready, live, {3: both[3]})
    assert "does not route live instance(s) (d0: 0/1 decode" in why
    assert heal.stranded_coordinator(ready, live, None) is None  # routes not read: no judgement
    assert heal.stranded_coordinator(ready, dict(live, d0=dict(live["d0"], live=False)), {3: both[3]}) is None


def lost_add_healer(tmp_path, routes, reached, clock, acted, **config):
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({"u0": {"role": "union", "engines": [{"url": "http://e/status", "tls": None}],
                                            "ips": ["10.0.0.1"], "need": 1}}))
    config = dict({"coordinator": {"url": "http://c/readiness", "tls": None}, "instances_file": str(instances),
                   "routes": {"url": "http://c:1027/metrics?type=dp", "tls": None},
                   "state": str(tmp_path / "state.json"), "settle": 40}, **config)
    return heal.Healer(config, get=Cluster(ready=True).get, clock=lambda: clock[0],
                       act=lambda: acted.append(clock[0]), text=lambda target: routes["text"],
                       reach=lambda target: reached.append(target["url"]) or reached[0])


def test_healer_reads_the_routes_of_a_ready_coordinator_and_restarts_the_controller_for_a_lost_add(tmp_path):
    routes, reached, clock, acted = {"text": ""}, [True], [0.0], []
    h = lost_add_healer(tmp_path, routes, reached, clock, acted)
    assert not h.step()
    clock[0] = 20.0
    routes["text"] = 'vllm:x{dp_rank="0",role="union",instance_id="2",pod_ip="10.0.0.1",model_name="m"} 1.0\n'
    assert not h.step()  # routed: the passes and the hold start anew
    clock[0], routes["text"] = 30.0, ""
    assert not h.step()  # one collector pass: not yet a lost add
    clock[0] = 35.0
    assert not h.step()  # the second pass: the hold starts
    assert "http://e/metrics" in reached  # the healer read the engine's own /metrics
    clock[0] = 74.0
    assert not h.step()
    clock[0] = 75.0
    assert h.step() and acted == [75.0]


def test_an_instance_whose_engine_answers_metrics_late_is_never_a_lost_add(tmp_path):
    """The coordinator leaves out an instance one of whose engines missed its 2 s /metrics timeout
    (metrics_collector.py:586-603) while it serves: the healer, reaching it no better, never restarts."""
    routes, reached, clock, acted = {"text": ""}, [False], [0.0], []
    h = lost_add_healer(tmp_path, routes, reached, clock, acted)
    for clock[0] in range(0, 600, 5):
        assert not h.step()
    assert acted == [] and h.unrouted == {}
    reached[0] = True  # one late answer in between resets the passes
    for clock[0] in (600.0, 605.0):
        h.step()
    reached[0] = False
    clock[0] = 610.0
    h.step()
    reached[0] = True
    for clock[0] in (615.0, 620.0, 659.0):
        assert not h.step()
    assert acted == []


def test_the_controller_healer_alarms_instead_of_restarting_once_its_budget_is_spent(tmp_path, capsys):
    routes, reached, clock, acted = {"text": ""}, [True], [0.0], []
    metrics = tmp_path / "motor_healer.prom"
    h = lost_add_healer(tmp_path, routes, reached, clock, acted, metrics_file=str(metrics),
                        labels={"job": "j", "container": "j-controller"})
    while clock[0] < 3000:
        h.step()
        clock[0] += 5.0
    budget = rules.rule("lost_add")["budget"]
    assert budget["per_hour"] == 3 and len(acted) == 3  # then alarms only
    out = capsys.readouterr().out
    assert out.count("motor-healer: alarm: not restarting (rule lost_add)") == 1  # one line when it starts
    assert "the budget of 3 restarts an hour is spent" in out
    text = metrics.read_text()
    assert 'motor_healer_alarm{container="j-controller",job="j",rule="lost_add"} 1' in text
    assert HEALER_ALARM_METRIC + "{" in text  # what the alert rule MotorHealerBudgetSpent reads
    assert 'motor_healer_actions_last_hour{container="j-controller",job="j"} 3' in text
    routes["text"] = 'vllm:x{dp_rank="0",role="union",instance_id="2",pod_ip="10.0.0.1",model_name="m"} 1.0\n'
    h.step()  # the rule no longer holds: the alarm clears
    assert 'rule="lost_add"} 0' in metrics.read_text() and "alarm cleared" in capsys.readouterr().out
    routes["text"] = ""
    clock[0] = acted[0] + 3600.0  # the first restart left the hour: one more is allowed
    while clock[0] < acted[0] + 3700.0 and len(acted) == 3:
        h.step()
        clock[0] += 5.0
    assert len(acted) == 4


def test_every_rule_of_the_healers_agents_has_its_check_and_every_check_its_rule():
    checks = heal.Healer({"coordinator": {"url": "http://c/readiness"}, "state": "/nonexistent"}).checks
    assert set(checks) == {r["name"] for r in rules.rules_of("controller") + rules.rules_of("pod")}
    assert heal.POD_SETTLE == rules.rule("stalled_pod")["budget"]["settle"]
    assert heal.DEFAULTS["settle"] == rules.rule("lost_add")["budget"]["settle"]
    for rule in rules.RULES:
        assert rule["agent"] in rules.AGENTS and rule["readme"] and rule["budget"]["backoff"]
        assert set(rule) >= {"name", "agent", "watches", "condition", "action", "budget", "readme"}


class PodWithPeer(Pods):
    """A two-pod instance: this pod stalled; the peer's node manager answers ``peer_nm``, its engine ``peer_engine``;
    the controller ``controller`` (HTTP status or -1)."""

    def __init__(self):
        super().__init__()
        self.peer_nm, self.peer_engine, self.controller = (-1, None), -1, 200

    def answer(self, target):
        if target["url"].startswith("http://ctl"):
            return self.controller, None
        if target["url"].startswith("http://peer"):
            return self.peer_nm if target["url"].endswith("/node-manager/status") else (self.peer_engine, None)
        return super().answer(target)


PEER = {"node_manager": {"url": "http://peer:3026/node-manager/status"}, "engines": [{"url": "http://peer:9000/status"}]}


def pod_healer(tmp_path, pods, clock, acted):
    config = dict(POD, pod="job-p0-0", settle=heal.POD_SETTLE, state=str(tmp_path / "state.json"),
                  peers={"job-p0-1": PEER}, controller={"url": "http://ctl:1026/readiness"})
    return heal.Healer(config, clock=lambda: clock[0], act=lambda: acted.append(clock[0]), answer=pods.answer)


def test_a_pod_of_a_multi_host_instance_waits_while_a_peer_is_unknown_or_not_started(tmp_path):
    pods, clock, acted = PodWithPeer(), [0.0], []
    h = pod_healer(tmp_path, pods, clock, acted)
    for clock[0] in range(0, 300, 5):  # the peer's host is down (late): never frozen nor killed
        assert not h.step()
    pods.peer_nm = (200, {"status": True})  # the peer's node manager is up, its start command not come
    for clock[0] in range(300, 600, 5):
        assert not h.step()
    assert acted == []
    pods.peer_engine = 200  # the peer started: this pod alone is stalled, its settle counts from now
    clock[0] = 600.0
    assert not h.step()
    clock[0] = 600.0 + heal.POD_SETTLE
    assert h.step() and acted == [clock[0]]


def test_a_pod_does_not_restart_in_the_id_window_after_a_controller_start(tmp_path, capsys):
    """Upstream's restarted controller counts ids from 1 until the re-registrations raise the counter
    (instance_assembler.py:83,306,377-378): a pod registering anew in that window may get a live instance's id."""
    pods, clock, acted = PodWithPeer(), [0.0], []
    pods.peer_nm, pods.peer_engine = (200, {"status": False}), 200  # the peer serves
    h = pod_healer(tmp_path, pods, clock, acted)
    pods.controller = -1  # the controller restarts
    assert not h.step()
    clock[0], pods.controller = 5.0, 200  # answers again: the window starts
    for clock[0] in range(5, 5 + rules.ID_WINDOW, 5):
        assert not h.step()
    clock[0] = 5.0 + rules.ID_WINDOW
    assert h.step() and acted == [clock[0]]  # stalled since 0, settled long ago: acts once the window closed
    assert "freeze" in capsys.readouterr().out


NOW = 1_800_000_000.0
STANDIN_NPU_SMI = Path(__file__).resolve().parents[3] / "sim/host/rootfs/usr/local/lib/pymotor-sim/npu-smi.in"


def standin_npu_smi(tmp_path, monkeypatch, devices=8):
    """The simulated hosts' npu-smi on PATH, over a /dev of ``devices`` NPUs and its fault knob under ``tmp_path``."""
    dev, tool = tmp_path / "dev", tmp_path / "bin" / "npu-smi"
    dev.mkdir()
    tool.parent.mkdir()
    for i in range(devices):
        (dev / ("davinci%d" % i)).touch()
    text = STANDIN_NPU_SMI.read_text().replace("@HARDWARE@", "800I_A2").replace("ls /dev 2>", "ls %s 2>" % dev)
    tool.write_text(text.replace("/usr/local/Ascend/driver/pymotor-sim/unhealthy", str(tmp_path / "unhealthy")))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % tool.parent)
    return tmp_path / "unhealthy"


def test_an_engine_pod_records_its_planned_npus_health_as_npu_smi_reports_it(tmp_path, monkeypatch):
    knob = standin_npu_smi(tmp_path, monkeypatch)
    knob.write_text("2 Alarm\n5 Warning\n")
    path, reader = tmp_path / NPU_HEALTH_FILE, motor_npu_smi.HealthReader()
    record = heal.record_npu_health(str(path), [2, 3], NOW, reader)
    assert record == {"time": NOW, "npus": {"2": "Alarm", "3": "OK"}, "error": ""}  # its own NPUs only
    assert json.loads(path.read_text()) == record and "Chip Logic ID" in reader.mapping  # the mapping, read once
    knob.write_text("")  # health is read again on every call
    again = heal.record_npu_health(str(path), [2, 3, 9], NOW + 30, reader)
    assert again["npus"] == {"2": "OK", "3": "OK", "9": "absent"}


def test_an_engine_pod_without_npu_smi_records_why():
    record = heal.record_npu_health("/nonexistent/dir/x.json", [0], NOW, read=lambda: ({}, "npu-smi not found"))
    assert record["npus"] == {"0": "unread"} and record["error"] == "npu-smi not found"
