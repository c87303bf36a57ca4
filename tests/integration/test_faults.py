"""Faults on a small simulated cluster (one A2 engine host with 1 P x 4 NPUs + 1 D x 4 NPUs, and a control host;
prefix pymotor-fault): an interrupted deploy, an unreachable engine host, a crashing engine, a coordinator that
never becomes ready, a pod the controller drops at start (upstream race, repaired by the deploy), and (on this
machine's Docker, no cluster) an image build that fails half-way.

The tests run in file order on one cluster; each starts from the state the previous one left and says so."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

import simctl
from fault_support import (
    REPO,
    build_image,
    conductor_image_run,
    container_exists,
    image_id,
    inspect,
    job_containers,
    make_build_inputs,
    playbook,
    playbook_argv,
    write_config,
)
from support import ansible_env, deployed_containers, recap_changed, wait_for

PREFIX = "pymotor-fault" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts, e.g. "-strict"
JOB = "fault-job"
# Fast readiness polling: the stand-in is ready within seconds.
# In the name of both readiness waits of deploy.yml (one pymotor.ascend.motor_wait run each): after the tiers and
# after each instance of a rolling restart.
READINESS_TASK = "the coordinator reports ready"
FAST = ("-e", "motor_service_ready_timeout=240", "-e", "motor_service_ready_delay=1")

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    build_image()
    config = tmp / "config"
    write_config(config, JOB)
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, "local/pymotor-fault:test")
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        engine = [h for h in hosts if not h["name"].endswith("-ctl")][0]
        yield {"hosts": hosts, "inventory": inventory, "config": config, "tmp": tmp, "engine": engine,
               "ctl": [h for h in hosts if h["name"].endswith("-ctl")][0]}
    finally:
        subprocess.run(["docker", "unpause", f"{PREFIX}-1"], capture_output=True)
        simctl.down(PREFIX)


def assert_converged(cluster) -> dict[str, str]:
    """Every planned container exists exactly once, on its planned host, running; no other container of the job
    (labelled or merely named like one) exists. Returns {name: container id}."""
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    where = deployed_containers(plan)  # with the per-host healers
    found = job_containers(cluster["hosts"], JOB)
    names = [name for _, name, _ in found]
    assert sorted(names) == sorted(where), f"containers {sorted(names)} != plan {sorted(where)}"
    assert all(where[name] == host for host, name, _ in found), found
    for host in cluster["hosts"]:
        _, out = simctl.host_exec(host["name"], f"docker ps -a --filter name=^{JOB}- --format '{{{{.Names}}}} "
                                                "{{.State}}'")
        for line in out.split("\n"):
            if line.strip():
                name, state = line.split()
                assert name in where, f"orphan container {name} on {host['name']}"
                assert state == "running", f"{name} is {state}"
    return {name: cid for _, name, cid in found}


def started_at(cluster) -> dict[str, str]:
    """{name: container id + start time} of the job's containers on every host (changes on recreate or restart)."""
    state = {}
    for host in cluster["hosts"]:
        names = [name for h, name, _ in job_containers([host], JOB)]
        for info in inspect(host["name"], names) if names else []:
            state[info["Name"].lstrip("/")] = f'{info["Id"]} {info["State"]["StartedAt"]}'
    return state


def test_precheck_reports_every_host_problem_and_starts_nothing(cluster):
    """Fresh hosts with problems on both: an unhealthy planned NPU, planned ports held by other processes, a
    missing model. The deploy stops at the precheck (judged on the controller from the one read-only probe per
    host), listing every problem with its host and fix, before anything is written or started."""
    engine, ctl = cluster["engine"]["name"], cluster["ctl"]["name"]
    listen = "nohup python3 -c 'import socket,time; s=socket.socket(); s.bind((\"0.0.0.0\", {port})); s.listen(); " \
             "time.sleep(600)' >/dev/null 2>&1 &"
    simctl.host_exec(engine, "printf '2 Alarm\\n' > /etc/pymotor-sim/unhealthy")
    simctl.host_exec(engine, "mv /mnt/weight/qwen3_8B /mnt/weight/qwen3_8B.away")
    simctl.host_exec(engine, listen.format(port=3026))
    simctl.host_exec(ctl, listen.format(port=2026))
    try:
        wait_for(lambda: all(simctl.host_exec(h, f"grep -qi ':{p:04X} .* 0A ' /proc/net/tcp")[0] == 0
                             for h, p in ((engine, 3026), (ctl, 2026))), timeout=20, interval=0.2,
                 what="the stray listeners")
        failed = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, check=False)
    finally:
        simctl.host_exec(engine, "rm -f /etc/pymotor-sim/unhealthy; mv /mnt/weight/qwen3_8B.away /mnt/weight/qwen3_8B")
        for host in (engine, ctl):
            simctl.host_exec(host, "pkill -f '[t]ime.sleep.600' || true")
    assert failed.returncode != 0
    out = failed.stdout
    assert "Fail with every precheck problem of every host" in out, out[-3000:]
    for line in (f"{engine}: NPU 2 health: npu-smi info reports Alarm (fix: repair the NPU",
                 f"{engine}: port 3026: already in use by another process, but planned for {JOB}-p0-0",
                 f"{engine}: model: /mnt/weight/qwen3_8B missing (fix:",
                 f"{ctl}: port 2026: already in use by another process, but planned for {JOB}-controller"):
        assert line in out, f"missing precheck line {line!r} in:\n{out[-4000:]}"
    assert "Render the config" not in out and "Start tier" not in out, "deploy went on after the precheck"
    assert job_containers(cluster["hosts"], JOB) == []
    for host in cluster["hosts"]:
        assert simctl.host_exec(host["name"], f"test -e /etc/pymotor/{JOB}")[0] != 0, f"config written on {host['name']}"


def test_check_mode_on_fresh_hosts_reports_and_changes_nothing(cluster):
    """`deploy.yml --check` on the fresh hosts: reports what it would create and ends without waiting for a service
    it did not start; no container, config directory or startup-script cache appears."""
    started = time.monotonic()
    dry = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, "--check")
    assert time.monotonic() - started < 120, "the dry run waited for readiness"
    assert "all deploy end." in dry.stdout, dry.stdout[-3000:]  # rc 0: the readiness wait did not run (it would fail)
    assert re.search(rf"{JOB}-p0-0\s+create\s+parallel\s+new", dry.stdout), dry.stdout[-3000:]
    assert recap_changed(dry.stdout) > 0
    assert job_containers(cluster["hosts"], JOB) == []
    for host in cluster["hosts"]:
        assert simctl.host_exec(host["name"], f"test -e /etc/pymotor/{JOB} || test -e /var/cache/pymotor")[0] != 0, \
            f"the dry run wrote on {host['name']}"


def test_interrupted_deploy_converges_on_rerun(cluster):
    """Kill the whole ansible-playbook process group while the containers start, then deploy again."""
    argv = playbook_argv("deploy.yml", cluster["inventory"], cluster["config"], *FAST)
    log = (cluster["tmp"] / "interrupted.log").open("w")
    proc = subprocess.Popen(argv, cwd=REPO, env=ansible_env(), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        # 6 planned containers in 3 tiers; stop as soon as some but not all exist.
        def partly_started():
            found = job_containers(cluster["hosts"], JOB) if proc.poll() is None else []
            return 0 < len(found) < 6 and found

        partial = wait_for(partly_started, timeout=240, interval=0.1, what="a partly started deploy")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
        # Ansible's workers run in sessions of their own (the group kill misses them): end what is left of this run
        subprocess.run(["pkill", "-KILL", "-f", f"ansible-playbook -i {cluster['inventory']}"], check=False)
    assert proc.returncode == -signal.SIGKILL, f"deploy ended by itself (rc {proc.returncode}) before the kill"
    assert 0 < len(partial) < 6

    rerun = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST)
    assert "all deploy end." in rerun.stdout
    assert_converged(cluster)
    third = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST)
    assert recap_changed(third.stdout) == 0, third.stdout[-3000:]


def test_unreachable_engine_host_stops_everything_and_rerun_converges(cluster):
    """With the deployed job from the previous test: change the controller's env (a rollout that would recreate the
    whole control plane and the engines), freeze the engine host (`docker pause`: every Ansible command there
    fails, like a host that hangs), deploy. Nothing may be touched anywhere; the host is named; after it
    returns, the same deploy converges."""
    before = started_at(cluster)
    write_config(cluster["config"], JOB, env_extra={"motor_controller_env": {"MOTOR_FAULT_ROLLOUT": "1"}})
    engine = cluster["engine"]["name"]
    subprocess.run(["docker", "pause", engine], check=True, capture_output=True)
    try:
        # Bounded port wait: if the readiness play runs at all (it should not), it must not wait 300 s.
        failed = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST,
                          "-e", "motor_service_port_timeout=10", check=False)
    finally:
        subprocess.run(["docker", "unpause", engine], check=True, capture_output=True)
    assert failed.returncode != 0
    # The read-only discovery right after validation finds the host gone (UNREACHABLE without pipelining; with
    # pipelining the module's docker exec is refused) and the plan step stops, naming it and the reason.
    stopped = re.search(rf"deploy stopped: {engine} did not finish \"reading the containers of the job\".*", failed.stdout)
    assert stopped and ("paused" in stopped.group(0) or "unreachable" in stopped.group(0)), failed.stdout[-4000:]
    assert not re.search(r"pymotor-fault-ctl\s+: .*changed=[1-9]", failed.stdout), failed.stdout[-2000:]
    assert "Start tier" not in failed.stdout and "Render the config" not in failed.stdout, "deploy went on"
    assert started_at(cluster) == before, "a container was recreated or restarted while a host was unreachable"
    assert READINESS_TASK not in failed.stdout, "the readiness play ran after the failure"
    assert f"deploy stopped: {engine} did not finish" in failed.stdout, failed.stdout[-3000:]

    playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST)
    ids = assert_converged(cluster)
    assert ids[f"{JOB}-controller"] != before[f"{JOB}-controller"].split()[0], "the rollout was not applied"


def test_engine_crash_is_restarted_and_reported(cluster):
    """The decode engine container crashes once 8 s after start (stand-in knob): the restart policy brings it
    back, verify.yml reports its restart count, and the instance serves again so the checks pass. Its node manager
    registers while the instance is still assembled, and is answered "already registered" as upstream's is: the
    healers repair it (the pod's own restart after 30 s, the controller's after 75 s; docs/design.md), hence 240 s."""
    crasher = f"{JOB}-d0-0"
    write_config(cluster["config"], JOB, env_extra={
        "motor_controller_env": {"MOTOR_FAULT_ROLLOUT": "1"},
        "motor_engine_decode_env": {"MOTOR_SIM_CRASH_AFTER": "8", "MOTOR_SIM_CRASH_ONCE": "1"}})
    playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST)
    engine = cluster["engine"]["name"]

    def restarted():
        info = inspect(engine, [crasher])[0]
        return info["RestartCount"] > 0 and info["State"]["Running"] and info

    info = wait_for(restarted, timeout=90, interval=1, what=f"{crasher} restarted by the restart policy")
    _, logs = simctl.host_exec(engine, f"docker logs {crasher} 2>&1")
    assert "MOTOR_SIM_CRASH_AFTER=8: crashing now" in logs

    report_path = cluster["tmp"] / "verify-crash.json"
    deadline = time.monotonic() + 240
    while True:
        result = playbook("verify.yml", cluster["inventory"], cluster["config"],
                          "-e", f"motor_verify_report={report_path}", check=False)
        report = json.loads(report_path.read_text())
        rows = {c["container"]: c for c in report["containers"]}
        assert rows[crasher]["restarts"] >= info["RestartCount"] >= 1, rows[crasher]
        # the controller's healer may restart the controller (one line in its log); nothing else restarts
        healed_by_controller = "motor-healer: restarting the controller" in simctl.host_exec(
            cluster["ctl"]["name"], f"docker logs {JOB}-controller 2>&1")[1]
        allowed = {crasher, f"{JOB}-controller"} if healed_by_controller else {crasher}
        assert all(c["restarts"] == 0 for name, c in rows.items() if name not in allowed), rows
        if report["passed"] or time.monotonic() > deadline:
            break
        time.sleep(5)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert report["passed"] and result.returncode == 0, f"no recovery after the restart: {failed}"


def test_coordinator_never_ready_fails_within_timeout_with_its_logs(cluster):
    """The coordinator never reports ready (stand-in knob): the deploy fails within the configured readiness timeout
    and shows the last log lines of the containers it waited for, the coordinator's among them."""
    write_config(cluster["config"], JOB, env_extra={
        "motor_controller_env": {"MOTOR_FAULT_ROLLOUT": "1"},
        "motor_coordinator_env": {"MOTOR_SIM_NEVER_READY": "1"}})
    timeout = 20
    argv = playbook_argv("deploy.yml", cluster["inventory"], cluster["config"],
                         "-e", f"motor_service_ready_timeout={timeout}", "-e", "motor_service_ready_delay=2")
    proc = subprocess.Popen(argv, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines, wait_started = [], None
    for line in proc.stdout:  # time the readiness wait itself, not the container starts before it
        lines.append(line)
        if wait_started is None and line.startswith("TASK [") and READINESS_TASK in line:
            wait_started = time.monotonic()
    proc.wait(timeout=600)
    waited = time.monotonic() - (wait_started or 0)
    out = "".join(lines)
    assert proc.returncode != 0
    assert wait_started is not None, out[-4000:]
    assert timeout - 2 <= waited < timeout + 30, f"failed {waited:.0f} s after the wait began (timeout {timeout} s)"
    assert 'readiness: "the coordinator reports ready' in out and "did not succeed within its timeout" in out
    assert "MOTOR_SIM_NEVER_READY=1" in out  # the coordinator's last /readiness answer
    ctl = cluster["ctl"]["name"]
    section = out.split(f"----- {ctl}/{JOB}-coordinator", 1)
    assert len(section) == 2, out[-4000:]
    coordinator_lines = section[1].split("-----", 1)[0]
    _, tail = simctl.host_exec(ctl, f"docker logs --tail 5 {JOB}-coordinator 2>&1")
    assert tail.strip() and all(line.strip()[:60] in coordinator_lines for line in tail.splitlines() if line.strip())
    assert "[coordinator]" in coordinator_lines
    # Readable for an operator: condition, cause and fix first, then a short distinct tail per container.
    assert "likely cause: an engine is still loading the model" in out and "fix: if the engine logs" in out
    assert out.count(f"----- {ctl}/{JOB}-coordinator") == 1  # the dump is not repeated
    assert len(section[1].split("-----", 1)[0].splitlines()) <= 60  # a short tail (yaml may wrap a cut line)


def test_a_pod_dropped_while_its_instance_assembled_is_restarted_by_the_deploy(cluster):
    """Upstream's registration race, made certain by a stand-in knob: the decode node manager registers 10 s before
    its port is bound (first container life only), so the controller drops it when the instance assembles and it
    never registers again. The readiness wait sees its node manager report normal with no engine answering, restarts
    every pod of that instance after motor_service_stall_timeout, and the deploy ends ready; a re-run changes
    nothing."""
    write_config(cluster["config"], JOB, env_extra={
        "motor_controller_env": {"MOTOR_FAULT_ROLLOUT": "1"},
        "motor_engine_decode_env": {"MOTOR_SIM_NM_BIND_DELAY": "10"}})
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())  # the plan of the previous run
    decode = next(c for c in plan["containers"] if c["role"] == "decode")
    stall = ("-e", "motor_service_stall_timeout=15")
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, *stall)
    out = result.stdout
    assert "all deploy end." in out
    assert f"the node managers of {decode['name']} report normal while none of their engines answers, for 15 s" in out
    assert re.search(r"TASK \[.*Restart every pod of the stalled engine instances", out), out[-3000:]
    assert f"restarting every pod of {decode['job_name']}" in out
    ctl, engine = cluster["ctl"]["name"], cluster["engine"]["name"]
    _, controller_log = simctl.host_exec(ctl, f"docker logs {JOB}-controller 2>&1")
    assert re.search(r"Node manager \S+ is not alive for instance " + re.escape(decode["job_name"]), controller_log)
    _, decode_log = simctl.host_exec(engine, f"docker logs {decode['name']} 2>&1")
    assert "MOTOR_SIM_NM_BIND_DELAY=10: registering before the port is bound" in decode_log
    assert "para check fail for reregister" in decode_log  # it did not register again by itself
    assert_converged(cluster)

    again = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, *stall)
    assert recap_changed(again.stdout) == 0 and "Restart every pod" not in again.stdout, again.stdout[-3000:]


def test_failed_image_build_keeps_previous_tag_and_leaves_no_container(tmp_path):
    """A build that fails inside its temporary container (after packages and Go, in go build) leaves the previous
    image tag as it was and removes the build container and the candidate tag."""
    base, tarball, sha = make_build_inputs(tmp_path)
    target = "local/pymotor-fault-ib:prev"
    subprocess.run(["docker", "tag", "local/debian:bookworm", target], check=True)
    previous = image_id(target)
    build_container = "pymotor-fault-ib-build"
    result = conductor_image_run(tmp_path, base, target, tarball, sha, build_container)
    out = result.stdout
    assert result.returncode != 0
    assert "build failed" in out and "simulated compile error" in out, out[-4000:]
    assert "==> " in out and "installing Go" in out  # it failed half-way, not before the container ran
    assert image_id(target) == previous
    assert not container_exists(build_container)
    assert image_id(f"{target}-candidate") == ""
