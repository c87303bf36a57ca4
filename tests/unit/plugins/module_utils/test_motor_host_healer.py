"""module_utils/motor_host_healer.py (the per-host healer's decision, backoff and one round against a fake Docker
client), plan/healer.py and reconcile/host_healer.py (its and its socket proxy's plan entries, files and Docker
options)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_host_healer as mh
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_start import create_body
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import (
    HOST_HEALER_CONFIG,
    HOST_HEALER_SCRIPT,
    SOCKPROXY_CONFIG,
    SOCKPROXY_SCRIPT,
    with_host_healers,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import container_spec, own_files

NOW = 1_800_000_000.0
EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def box(name="job-coordinator", status="running", health="unhealthy", started=NOW - 2000, start_period=1000,
        was_healthy=False, error="", devices=()):
    return {"name": name, "status": status, "health": health, "started_at": started, "start_period": start_period,
            "was_healthy": was_healthy, "probe_output": "not alive: http://10.0.0.9:1026/liveness", "error": error,
            "devices": list(devices)}


def test_an_unhealthy_container_past_its_start_period_or_once_healthy_restarts():
    assert [a[:2] for a in mh.decide([box()], {}, set(), NOW)] == [("restart", "job-coordinator")]
    assert "unhealthy: not alive" in mh.decide([box()], {}, set(), NOW)[0][2]
    assert mh.decide([box(status="paused")], {}, set(), NOW)[0][0] == "restart"  # docker pause: frozen
    # upstream's startup grace: 1000 s after the start, never healthy since -> a model still loading is left alone
    assert mh.decide([box(started=NOW - 300)], {}, set(), NOW) == []
    # ...but a container that was healthy and then hangs is not in its grace any more
    assert mh.decide([box(started=NOW - 300, was_healthy=True)], {}, set(), NOW)[0][0] == "restart"


@pytest.mark.parametrize("health, status", [("healthy", "running"), ("starting", "running"), (None, "running"),
                                            ("unhealthy", "exited"), ("unhealthy", "restarting")])
def test_healthy_starting_unchecked_or_stopped_containers_are_left_alone(health, status):
    assert mh.decide([box(health=health, status=status)], {}, set(), NOW) == []


def test_backoff_30_60_120_300_within_the_hour_and_reset_after_a_quiet_hour():
    waits = [mh.next_allowed([NOW - 10 * i for i in range(n)], NOW) - NOW for n in (1, 2, 3, 4, 6)]
    assert waits == [30, 60, 120, 300, 300]
    assert mh.next_allowed([NOW - 3601, NOW - 4000], NOW) == 0.0  # none in the last hour: act at once
    assert mh.decide([box()], {"job-coordinator": [NOW - 20]}, set(), NOW) == []  # 30 s not over
    assert mh.decide([box()], {"job-coordinator": [NOW - 31]}, set(), NOW) != []
    assert mh.decide([box()], {"job-coordinator": [NOW - 50, NOW - 100]}, set(), NOW) == []  # 60 s after the 2nd


def test_a_start_that_failed_for_a_missing_device_is_retried_once_the_devices_exist():
    failed = box(name="job-p0-0", status="exited", health=None, devices=["/dev/davinci0", "/dev/davinci_manager"],
                 error='error gathering device information while adding custom device "/dev/davinci0": no such '
                       'file or directory')
    assert mh.decide([failed], {}, {"/dev/davinci_manager"}, NOW) == []  # the driver has not made davinci0 yet
    action = mh.decide([failed], {}, {"/dev/davinci0", "/dev/davinci_manager"}, NOW)
    assert [a[:2] for a in action] == [("start", "job-p0-0")] and "devices exist now" in action[0][2]
    # stopped on purpose (docker stop, stop.yml): no start error -> left stopped; another error: not the healer's
    assert mh.decide([dict(failed, error="")], {}, {"/dev/davinci0", "/dev/davinci_manager"}, NOW) == []
    assert mh.decide([dict(failed, error="OCI runtime create failed: oom")], {}, {"/dev/davinci0"}, NOW) == []


def test_view_reads_dockers_inspection():
    inspection = {"Name": "/job-coordinator", "State": {
        "Status": "running", "Paused": True, "StartedAt": "2027-01-15T08:00:00.123456789Z", "Error": "",
        "Health": {"Status": "unhealthy", "Log": [{"ExitCode": 1, "Output": "not alive: x\n"}]}},
        "Config": {"Healthcheck": {"StartPeriod": 1000 * 10 ** 9}},
        "HostConfig": {"Devices": [{"PathOnHost": "/dev/davinci3"}]}}
    seen = {"job-coordinator": "2027-01-15T08:00:00.123456789Z"}
    got = mh.view(inspection, seen)
    assert got["status"] == "paused" and got["health"] == "unhealthy" and got["start_period"] == 1000
    assert got["was_healthy"] is True and got["probe_output"] == "not alive: x" and got["devices"] == ["/dev/davinci3"]
    assert mh.decide([dict(got, started_at=NOW - 2000)], {}, set(), NOW)[0][2] == (
        "Docker reports it unhealthy while paused: not alive: x")
    assert abs(got["started_at"] - 1800000000.123456) < 1e-3
    assert mh.view(inspection, {})["was_healthy"] is False
    # a success in Docker's log since this start counts too (the healer may not have looked in between)
    inspection["State"]["Health"]["Log"].insert(0, {"ExitCode": 0, "Start": "2027-01-15T08:00:10.5Z"})
    assert mh.view(inspection, {})["was_healthy"] is True
    inspection["State"]["Health"]["Log"][0]["Start"] = "2027-01-15T07:59:00Z"  # before this start: not
    assert mh.view(inspection, {})["was_healthy"] is False


class FakeDocker:
    def __init__(self, inspections):
        self.inspections = inspections
        self.calls = []

    def job_containers(self, job_id):
        return [{"Names": ["/" + name]} for name in self.inspections]

    def inspect_container(self, name):
        return self.inspections[name]

    def post(self, path, *args, **kwargs):
        self.calls.append(path.format(*args))


def test_a_round_restarts_a_frozen_container_once_logs_one_line_and_skips_itself(tmp_path, capsys):
    frozen = {"Name": "/job-coordinator", "State": {"Status": "paused", "Paused": True,
                                                    "StartedAt": "2027-01-15T08:00:00Z", "Health": {"Status": "unhealthy"}},
              "Config": {"Healthcheck": {"StartPeriod": 10 ** 12}}}
    me = {"Name": "/job-healer-h1", "State": {"Status": "running", "Health": {"Status": "unhealthy"}}}
    docker = FakeDocker({"job-coordinator": frozen, "job-healer-h1": me})
    config = dict(mh.DEFAULTS, job_id="job", self="job-healer-h1", host_dev=str(tmp_path))
    state = {"seen_healthy": {"job-coordinator": "2027-01-15T08:00:00Z"}}
    lines = mh.round_once(docker, config, state, 1800000000.0)
    assert docker.calls == ["/containers/job-coordinator/restart"]  # Docker's restart kills and thaws a paused one
    assert len(lines) == 1 and "motor-host-healer: restart job-coordinator (Docker reports it unhealthy" in lines[0]
    assert "action 1 in the last hour" in lines[0] and capsys.readouterr().out.strip() == lines[0]
    assert state["actions"] == lines and state["history"]["job-coordinator"] == [1800000000.0]
    assert mh.round_once(docker, config, state, 1800000010.0) == []  # backoff: 30 s
    assert len(docker.calls) == 1


def test_present_devices_looks_under_the_hosts_dev(tmp_path):
    (tmp_path / "davinci0").write_text("")
    views = [box(devices=["/dev/davinci0", "/dev/davinci1"])]
    assert mh.present_devices(views, str(tmp_path)) == {"/dev/davinci0"}


def seed_plan():
    user = json.loads((EXAMPLES / "seed_pd_separation" / "user_config.json").read_text())
    user["motor_deploy_config"]["hardware_type"] = "800I_A2"
    hosts = {"h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
             "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]}}
    return build_plan(normalize(user, json.loads((EXAMPLES / "seed_pd_separation" / "env.json").read_text())), hosts)


SETTINGS = {"image": "img", "log_root": "/var/log/pymotor", "job_id": "mindie-motor", "restart_policy": "unless-stopped",
            "log_max_size": "100m", "log_max_file": 5, "seccomp_profile": "unconfined", "weight_dir": "/models"}


def host_config(container):
    spec = container_spec(container, {"hashes": {container["name"]: "h"}, "parts": {container["name"]: "p"}}, SETTINGS)
    return spec, create_body(spec)["HostConfig"]


def test_one_healer_and_one_socket_proxy_per_host_no_capability_and_their_files():
    plan = with_host_healers(seed_plan())
    agents = [(c["role"], c["name"], c["host"]) for c in plan["containers"] if c["role"] in ("healer", "sockproxy")]
    assert agents == [("sockproxy", "mindie-motor-sockproxy-ctl", "ctl"), ("healer", "mindie-motor-healer-ctl", "ctl"),
                      ("sockproxy", "mindie-motor-sockproxy-h1", "h1"), ("healer", "mindie-motor-healer-h1", "h1")]
    assert with_host_healers(plan) == plan  # idempotent
    by_name = {c["name"]: c for c in plan["containers"]}
    files = own_files(plan, "")
    for name in ("mindie-motor-healer-h1", "mindie-motor-sockproxy-h1"):
        spec, host = host_config(by_name[name])
        assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True and "CapAdd" not in host
        assert host["SecurityOpt"] == ["seccomp=unconfined", "no-new-privileges:true"] and host["Devices"] == []
        assert "PortBindings" not in host and spec["healthcheck"] is None
    shared = "/var/log/pymotor/mindie-motor/mindie-motor-sockproxy-h1-socket"
    # the healer: the proxy's directory read-only (it can connect, not replace the socket), never Docker's socket
    spec, host = host_config(by_name["mindie-motor-healer-h1"])
    assert shared + ":/run/motor-docker:ro" in host["Binds"] and "/dev:/host/dev:ro" in host["Binds"]
    # the job's log directory, read-only: the engine pods' NPU health readings (rule npu_unhealthy); no device
    assert "/var/log/pymotor/mindie-motor:/host/job-logs:ro" in host["Binds"]
    assert not any("docker.sock" in bind for bind in host["Binds"])
    assert spec["command"][-1].endswith("/" + HOST_HEALER_CONFIG)
    healer_files = files["mindie-motor-healer-h1"]
    assert set(healer_files) == {HOST_HEALER_SCRIPT, "motor_docker.py", "motor_heal_rules.py", HOST_HEALER_CONFIG}
    config = json.loads(healer_files[HOST_HEALER_CONFIG])
    assert config["self"] == "mindie-motor-healer-h1" and config["docker_host"] == "unix:///run/motor-docker/docker.sock"
    assert config["host"] == "h1" and config["job_logs"] == "/host/job-logs"
    assert config["metrics"].endswith("/motor_host_healer.prom")
    # the proxy: Docker's socket and the shared directory, its script and config
    spec, host = host_config(by_name["mindie-motor-sockproxy-h1"])
    assert "/var/run/docker.sock:/var/run/docker.sock:rw" in host["Binds"]
    assert shared + ":/run/motor-docker:rw" in host["Binds"]
    assert spec["command"][-1].endswith("/" + SOCKPROXY_CONFIG)
    proxy_files = files["mindie-motor-sockproxy-h1"]
    assert set(proxy_files) == {SOCKPROXY_SCRIPT, SOCKPROXY_CONFIG}
    assert json.loads(proxy_files[SOCKPROXY_CONFIG]) == {
        "job_id": "mindie-motor", "upstream": "/var/run/docker.sock", "listen": "/run/motor-docker/docker.sock"}
    # no other container of the job gets either socket
    for c in plan["containers"]:
        if c["role"] not in ("healer", "sockproxy"):
            assert not any("docker.sock" in b or "motor-docker" in b for b in host_config(c)[1]["Binds"]), c["name"]


def test_the_healer_script_runs_alone_with_its_docker_client(tmp_path):
    files = own_files(with_host_healers(seed_plan()), "")["mindie-motor-healer-h1"]
    for name in (HOST_HEALER_SCRIPT, "motor_docker.py", "motor_heal_rules.py"):
        (tmp_path / name).write_text(files[name])
    out = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r); sys.argv = ['x']; "
                          "import motor_host_healer as h; sys.exit(h.main(sys.argv))" % str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "usage: motor_host_healer.py" in out.stderr


def test_the_host_healer_runs_the_host_rules_of_the_table():
    from ansible_collections.pymotor.ascend.plugins.module_utils import motor_heal_rules as rules  # noqa: PLC0415

    assert set(mh.CHECKS) | set(mh.REPORTS) == {r["name"] for r in rules.rules_of("host")}
    assert not set(mh.CHECKS) & set(mh.REPORTS)
    assert all(r.get("report") for r in rules.rules_of("host") if r["name"] in mh.REPORTS)
    assert mh.BACKOFF == rules.rule("unhealthy")["budget"]["backoff"]


# Rule npu_unhealthy: report only. An engine pod (its NPUs in its devices) and what its healer wrote in its log dir.
def engine_pod(name="job-p0-0", npus=(2, 3)):
    return {"Name": "/" + name, "State": {"Status": "running", "StartedAt": "2027-01-15T08:00:00Z"},
            "HostConfig": {"Devices": [{"PathOnHost": "/dev/davinci%d" % n} for n in npus]
                           + [{"PathOnHost": "/dev/davinci_manager"}]}}


def write_reading(job_logs, pod, npus, when=NOW):
    (job_logs / pod).mkdir(parents=True, exist_ok=True)
    (job_logs / pod / mh.NPU_HEALTH_FILE).write_text(json.dumps({"time": when, "npus": npus, "error": ""}))


def test_npu_readings_take_the_planned_npus_and_one_word_of_health_only(tmp_path):
    views = [mh.view(engine_pod(), {}), mh.view(engine_pod("job-coordinator", ()), {}), mh.view(engine_pod("job-p1-0"), {})]
    write_reading(tmp_path, "job-p0-0", {"2": "Alarm", "3": "OK", "7": "Critical"})
    write_reading(tmp_path, "job-coordinator", {"0": "Critical"})  # no NPU planned: never read
    write_reading(tmp_path, "job-p1-0", {"2": 'OK"} 1\nfake{a="', "3": "Warning"})  # a pod's file is not trusted
    readings = mh.npu_readings(views, str(tmp_path))
    assert readings == {"job-p0-0": {"time": NOW, "npus": {"2": "Alarm", "3": "OK"}},
                        "job-p1-0": {"time": NOW, "npus": {"2": "unreadable", "3": "Warning"}}}
    assert mh.npu_unhealthy(readings) == [("job-p0-0", "2", "Alarm"), ("job-p1-0", "2", "unreadable"),
                                          ("job-p1-0", "3", "Warning")]
    assert mh.npu_readings(views, "") == {}  # no job log directory: nothing read


def test_an_unhealthy_npu_is_reported_once_with_its_metric_and_nothing_restarts(tmp_path, capsys):
    job_logs, own = tmp_path / "job", tmp_path / "own"
    own.mkdir()
    docker = FakeDocker({"job-p0-0": engine_pod()})
    config = dict(mh.DEFAULTS, job_id="job", self="job-healer-h1", host="h1", host_dev=str(tmp_path),
                  job_logs=str(job_logs), metrics=str(own / "motor_host_healer.prom"))
    state = {}
    write_reading(job_logs, "job-p0-0", {"2": "OK", "3": "OK"})
    assert mh.round_once(docker, config, state, NOW) == [] and state.pop("dirty") is True  # first reading: saved
    assert state["npu_health"]["job-p0-0"]["npus"] == {"2": "OK", "3": "OK"}
    assert 'motor_npu_unhealthy{container="job-p0-0",health="OK",host="h1",job="job",npu="2"} 0' in (
        own / "motor_host_healer.prom").read_text()
    write_reading(job_logs, "job-p0-0", {"2": "Alarm", "3": "OK"})
    lines = mh.round_once(docker, config, state, NOW + 5)
    assert len(lines) == 1 and "motor-host-healer: report NPU 2 of job-p0-0 (npu-smi reports Alarm; " in lines[0]
    assert "rule npu_unhealthy: nothing is restarted" in lines[0] and "action" not in lines[0]
    assert capsys.readouterr().out.strip() == lines[0] and state["actions"] == lines and state.pop("dirty")
    metrics = (own / "motor_host_healer.prom").read_text()
    assert 'motor_npu_unhealthy{container="job-p0-0",health="Alarm",host="h1",job="job",npu="2"} 1' in metrics
    assert 'npu="3"} 0' in metrics
    assert mh.round_once(docker, config, state, NOW + 10) == [] and "dirty" not in state  # no change: no line
    write_reading(job_logs, "job-p0-0", {"2": "OK", "3": "OK"})
    lines = mh.round_once(docker, config, state, NOW + 15)
    assert len(lines) == 1 and "report NPU 2 of job-p0-0 (healthy again: npu-smi no longer reports Alarm)" in lines[0]
    assert docker.calls == []  # report only: no restart, no start
    assert "} 1" not in (own / "motor_host_healer.prom").read_text()
