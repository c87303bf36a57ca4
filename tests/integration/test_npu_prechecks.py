"""What a real Atlas host trips over first, on simulated hosts (one A2 engine host with 1 P x 4 NPUs + 1 D x 4 NPUs,
and a control host; prefix pymotor-npu37): a device without IP, a link down, a driver older than the image's CANN
needs and a missing management device each fail the deploy's prechecks with host, device and fix, before any
container or config directory appears; an NPU in Warning health deploys with a warning.

The faults are the sim host's own files (/etc/hccn.conf without address_<id>, /etc/pymotor-sim/link_down, the
driver's version.info, a removed /dev node) read by the stand-in hccn_tool / npu-smi in their real formats."""

from __future__ import annotations

import json
import os

import pytest

import simctl
from fault_support import build_image, job_containers, playbook, write_config
from support import deployed_containers, recap_changed

PREFIX = "pymotor-npu37" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "npu-job"
FAST = ("-e", "motor_service_ready_timeout=240", "-e", "motor_service_ready_delay=1",
        "-e", "motor_service_min_driver_version=24.1.0")
DRIVER_INFO = "/usr/local/Ascend/driver/version.info"

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("npu")
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
        yield {"hosts": hosts, "inventory": inventory, "config": config, "engine": engine}
    finally:
        simctl.down(PREFIX)


def sh(host: str, command: str) -> str:
    rc, out = simctl.host_exec(host, command)
    assert rc == 0, f"{command!r} on {host}: {out}"
    return out


def test_each_fault_fails_the_precheck_with_host_device_and_fix_before_anything_changes(cluster):
    engine = cluster["engine"]["name"]
    sh(engine, f"cp /etc/hccn.conf /etc/hccn.conf.bak && cp {DRIVER_INFO} /tmp/version.info.bak")
    sh(engine, "sed -i '/^address_1=/d' /etc/hccn.conf")                    # NPU 1: no device IP
    sh(engine, "echo 2 > /etc/pymotor-sim/link_down")                       # NPU 2: link down
    sh(engine, f"sed -i 's/^Version=.*/Version=23.0.3/' {DRIVER_INFO}")     # driver older than 24.1.0
    sh(engine, "mv /dev/devmm_svm /dev/devmm_svm.away")                     # a management device missing
    try:
        assert sh(engine, "/usr/local/Ascend/driver/tools/hccn_tool -i 0 -ip -g").startswith("ipaddr:29.")
        rc, out = simctl.host_exec(engine, "/usr/local/Ascend/driver/tools/hccn_tool -i 1 -ip -g 2>/dev/null")
        assert rc != 0 and out == "", out  # what upstream's hccl_tools.py retries 10 x 3 s and then gives up on
        assert "npu-smi 23.0.3" in sh(engine, "npu-smi info")
        failed = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, check=False)
    finally:
        sh(engine, f"mv /etc/hccn.conf.bak /etc/hccn.conf && mv /tmp/version.info.bak {DRIVER_INFO} && "
                   "rm -f /etc/pymotor-sim/link_down && mv /dev/devmm_svm.away /dev/devmm_svm")
    assert failed.returncode != 0
    out = failed.stdout
    assert "Fail with every precheck problem of every host" in out, out[-3000:]
    for line in (f"{engine}: NPU 1 address: hccn_tool -i 1 -ip -g has no device IP (Error: device 1 has no ip "
                 "address configured.) (fix: configure the device in /etc/hccn.conf",
                 f"{engine}: NPU 2 link: hccn_tool -i 2 -link -g says DOWN (fix: check the NPU port's cabling",
                 f"{engine}: driver version: driver 23.0.3 is older than 24.1.0, the oldest the image's CANN "
                 "supports (fix: upgrade the Ascend driver and firmware to 24.1.0 or newer",
                 f"{engine}: device /dev/devmm_svm: /dev/devmm_svm is missing (fix: install (or reload) the Ascend "
                 "NPU driver"):
        assert line in out, f"missing precheck line {line!r} in:\n{out[-5000:]}"
    assert "Render the config" not in out and "Start tier" not in out, "deploy went on after the precheck"
    assert job_containers(cluster["hosts"], JOB) == []
    for host in cluster["hosts"]:
        assert simctl.host_exec(host["name"], f"test -e /etc/pymotor/{JOB}")[0] != 0, f"config written on {host['name']}"


def test_an_npu_in_warning_deploys_with_a_warning(cluster):
    engine = cluster["engine"]["name"]
    sh(engine, "printf '5 Warning\\n' > /etc/pymotor-sim/unhealthy")
    try:
        assert "Warning" in sh(engine, "npu-smi info")
        done = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, check=False)
    finally:
        sh(engine, "rm -f /etc/pymotor-sim/unhealthy")
    assert done.returncode == 0, done.stdout[-5000:]
    assert "all deploy end." in done.stdout
    assert f"{engine}: NPU 5 health: npu-smi info reports Warning; deploying anyway" in done.stdout, done.stdout[-5000:]
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    assert sorted(name for _, name, _ in job_containers(cluster["hosts"], JOB)) == sorted(deployed_containers(plan))
    # the engines got their planned HCCL port ranges (plan/hccl.py) in their env
    env = sh(engine, f"docker inspect --format '{{{{range .Config.Env}}}}{{{{println .}}}}{{{{end}}}}' {JOB}-p0-0 {JOB}-d0-0")
    bases = sorted(line.split("=", 1)[1] for line in env.split("\n") if line.startswith("HCCL_IF_BASE_PORT="))
    assert bases == ["60000", "60032"], env
    # upstream's runtime settings (reconcile/runtime.py): device logs, core dumps, SYS_NICE for NUMA binding
    host_config = sh(engine, f"docker inspect --format '{{{{json .HostConfig.CapAdd}}}} {{{{json .HostConfig.Binds}}}}' "
                             f"{JOB}-p0-0")
    assert '["SYS_NICE"]' in host_config and "/var/log/npu:/usr/slog:rw" in host_config, host_config
    assert "/var/coredump:/var/coredump:rw" in host_config, host_config
    again = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST)
    assert recap_changed(again.stdout) == 0, again.stdout[-3000:]  # the new settings are stable between runs
