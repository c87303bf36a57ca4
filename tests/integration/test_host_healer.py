"""The per-host healer and the Docker health checks on the stand-in cluster (seed_pd_separation on a simulated A2
engine host and a control host, prefix pymotor-hhealer + MOTOR_SIM_PREFIX_SUFFIX): ``docker ps`` shows the health of
the controller and the coordinator; a frozen coordinator (``docker pause`` in the control host's Docker) is restarted
by the control host's ``<job>-healer-<host>`` with no command run (its Docker calls through its host's
``<job>-sockproxy-<host>``), and the job serves again; a deploy re-run then changes nothing; an engine pod's planned
NPU that npu-smi reports Alarm is reported by its host's healer (log line, metric, status.yml's NPU HEALTH) with no
container restarted, and that status.yml run shows the healer's action too; from inside the healer a Docker call
outside its allow-list is answered 403.

The tests run in file order on one cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import simctl
from fault_support import REPO
from support import playbook, recap_changed, wait_for

PREFIX = "pymotor-hhealer" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "hheal-job"
IMAGE = "local/pymotor-hhealer:test"
FAST = ("-e", "motor_service_ready_timeout=240", "-e", "motor_service_ready_delay=1")
HEAL_WITHIN = 120

pytestmark = pytest.mark.docker


def get_json(url: str, body: dict | None = None, timeout: float = 5):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hhealer")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)
    config = tmp / "config"
    config.mkdir()
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    user["motor_deploy_config"].update(job_id=JOB, image_name=IMAGE)
    (config / "user_config.json").write_text(json.dumps(user, indent=2))
    (config / "env.json").write_text((REPO / "examples/seed_pd_separation/env.json").read_text())
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, IMAGE)
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        playbook("deploy.yml", inventory, config, *FAST, image=IMAGE)
        plan = json.loads((config / "motor_plan.json").read_text())
        coordinator = plan["coordinator"]
        ctl = next(c["host"] for c in plan["containers"] if c["role"] == "coordinator")
        yield {"hosts": hosts, "inventory": inventory, "config": config, "ctl": ctl,
               "readiness": f"http://{coordinator['ip']}:{coordinator['mgmt_port']}/readiness",
               "chat": f"http://{coordinator['ip']}:{coordinator['infer_port']}/v1/chat/completions",
               "model": user["motor_engine_prefill_config"]["engine_config"].get("served_model_name", "")}
    finally:
        simctl.down(PREFIX)


def serving(cluster) -> bool:
    status, body = get_json(cluster["readiness"])
    if not (status == 200 and body and body.get("ready")):
        return False
    status, _ = get_json(cluster["chat"], {"model": cluster["model"], "max_tokens": 4,
                                           "messages": [{"role": "user", "content": "still there?"}]}, timeout=30)
    return status == 200


def ps(cluster) -> dict:
    _, out = simctl.host_exec(cluster["ctl"], "docker ps -a --format '{{.Names}}\t{{.Status}}'")
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def test_docker_ps_shows_the_health_of_the_controller_and_the_coordinator(cluster):
    def both_healthy():
        rows = ps(cluster)
        return all("(healthy)" in rows.get(f"{JOB}-{role}", "") for role in ("controller", "coordinator")) and rows
    rows = wait_for(both_healthy, timeout=60, interval=2, what="controller and coordinator (healthy) in docker ps")
    assert f"{JOB}-healer-{cluster['ctl']}" in rows and "Up" in rows[f"{JOB}-healer-{cluster['ctl']}"]
    assert "health" not in rows[f"{JOB}-healer-{cluster['ctl']}"]  # upstream probes neither it nor the engines


def test_frozen_coordinator_is_restarted_by_the_hosts_healer_without_a_command(cluster):
    assert serving(cluster), "the deployed job does not serve"
    healer = f"{JOB}-healer-{cluster['ctl']}"
    started = f"docker inspect -f '{{{{.State.StartedAt}}}}' {JOB}-coordinator"
    before = simctl.host_exec(cluster["ctl"], started)[1].strip()
    rc, out = simctl.host_exec(cluster["ctl"], f"docker pause {JOB}-coordinator")
    assert rc == 0, out
    start = time.monotonic()

    def healed():
        restarted = simctl.host_exec(cluster["ctl"], started)[1].strip() != before
        return restarted and serving(cluster)
    wait_for(healed, timeout=HEAL_WITHIN, interval=2,
             what=f"the frozen coordinator restarted, ready and answering chat within {HEAL_WITHIN} s")
    took = time.monotonic() - start
    _, logs = simctl.host_exec(cluster["ctl"], f"docker logs {healer} 2>&1")
    actions = [line for line in logs.splitlines() if f"motor-host-healer: restart {JOB}-coordinator" in line]
    assert len(actions) == 1 and "unhealthy" in actions[0], logs[-3000:]  # the healer restarted it, once
    print(f"frozen coordinator healed in {took:.0f} s (pause to restarted, ready and answering): {actions[0]}")


def test_deploy_rerun_after_the_heal_changes_nothing(cluster):
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, image=IMAGE)
    assert recap_changed(result.stdout) == 0, result.stdout[-4000:]


def job_containers_started(cluster) -> dict:
    """``{container: (restart count, started at)}`` of every container of the job on every host."""
    out = {}
    for host in (h["name"] for h in cluster["hosts"]):
        _, text = simctl.host_exec(host, "docker ps -aq --filter label=io.pymotor.job=%s | xargs -r docker inspect -f "
                                         "'{{.Name}} {{.RestartCount}} {{.State.StartedAt}}'" % JOB)
        out.update({f[0].lstrip("/"): (f[1], f[2]) for f in (line.split() for line in text.splitlines()) if len(f) == 3})
    return out


def test_an_unhealthy_npu_is_reported_without_a_restart_and_status_shows_it_and_the_heal(cluster):
    """The simulated host's npu-smi reports one planned NPU of an engine pod Alarm (its fault knob, which the pod sees
    through the driver mount as a real NPU's health): the host's healer reports it from the pod's own reading (rule
    npu_unhealthy), in its log, in motor_npu_unhealthy and in status.yml's NPU HEALTH column, and restarts nothing.
    The same status.yml run shows the healer's restart of the frozen coordinator (above)."""
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    pod = next(c for c in plan["containers"] if c["role"] == "prefill")
    host, npu, healer = pod["host"], pod["npu_ids"][0], f"{JOB}-healer-{pod['host']}"
    before = job_containers_started(cluster)
    assert pod["name"] in before and healer in before, before
    rc, out = simctl.host_exec(host, f"printf '{npu} Alarm\\n' > /etc/pymotor-sim/unhealthy")
    assert rc == 0, out
    start = time.monotonic()
    try:
        report = f"motor-host-healer: report NPU {npu} of {pod['name']} (npu-smi reports Alarm; rule npu_unhealthy"

        def reported():
            return report in simctl.host_exec(host, f"docker logs {healer} 2>&1")[1]
        wait_for(reported, timeout=90, interval=3, what=f"the healer's report of NPU {npu} of {pod['name']}")
        took = time.monotonic() - start
        _, metrics = simctl.host_exec(host, f"cat /var/log/pymotor/{JOB}/{healer}/motor_host_healer.prom")
        assert (f'motor_npu_unhealthy{{container="{pod["name"]}",health="Alarm",host="{host}",job="{JOB}",'
                f'npu="{npu}"}} 1') in metrics, metrics
        assert metrics.count("} 1") == 1, metrics  # that NPU alone
        status = playbook("status.yml", cluster["inventory"], cluster["config"], image=IMAGE)
        shown = " ".join(status.stdout.split())  # the YAML callback folds long lines
        assert f"motor-host-healer: restart {JOB}-coordinator (Docker reports it unhealthy while paused" in shown, \
            status.stdout[-4000:]
        rows = {f[2]: f for f in (line.split() for line in status.stdout.splitlines())
                if len(f) > 3 and f[0] in {h["name"] for h in cluster["hosts"]} and f[2].startswith(JOB + "-")}  # the table's rows
        assert rows[pod["name"]][-1] == f"{npu}:Alarm", status.stdout[-4000:]
        engines = [f for f in rows.values() if f[1] in ("prefill", "decode") and f[2] != pod["name"]]
        assert engines and all(f[-1] == "OK" for f in engines), status.stdout[-4000:]  # the other NPUs read OK
        assert job_containers_started(cluster) == before  # report only: no container restarted
        print(f"unhealthy NPU {npu} of {pod['name']} reported {took:.0f} s after the fault")
    finally:
        simctl.host_exec(host, "rm -f /etc/pymotor-sim/unhealthy")


# From inside the healer, straight at the socket it is given: one of its calls, then two outside its allow-list.
PROBE = r'''
import json, socket
def call(method, target):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect("/run/motor-docker/docker.sock")
    s.sendall(("%s %s HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n" % (method, target)).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")[-300:]
print(json.dumps([call("GET", "/version"), call("GET", "/v1.41/images/json"),
                  call("POST", "/v1.41/containers/create?name=hheal-job-intruder")]))
'''


def test_the_healer_reaches_docker_only_through_its_allow_list(cluster):
    """The healer has no Docker socket of the host; its proxy's socket passes its own calls and answers anything
    else 403 (nothing reaches Docker: no container is created)."""
    healer = f"{JOB}-healer-{cluster['ctl']}"
    rc, out = simctl.host_exec(cluster["ctl"], f"docker exec {healer} test -e /var/run/docker.sock")
    assert rc != 0, "the healer sees the host's Docker socket"
    code = PROBE.encode().hex()
    rc, out = simctl.host_exec(cluster["ctl"], f"docker exec {healer} python3 -c "
                                               f"'exec(bytes.fromhex(\"{code}\").decode())'")
    assert rc == 0, out
    (version, _), (images, images_body), (create, create_body) = json.loads(out.strip().splitlines()[-1])
    assert version == 200, out  # one of its calls: passed
    assert images == 403 and "GET /v1.41/images/json is not one of the per-host healer's calls" in images_body, out
    assert create == 403 and "POST /v1.41/containers/create is not one of" in create_body, out
    rc, names = simctl.host_exec(cluster["ctl"], "docker ps -a --format '{{.Names}}'")
    assert "intruder" not in names
    _, logs = simctl.host_exec(cluster["ctl"], f"docker logs {JOB}-sockproxy-{cluster['ctl']} 2>&1")
    assert "motor-docker-proxy: refused POST /v1.41/containers/create" in logs, logs[-2000:]
