"""Simulated Ascend hosts (tests/sim): they come up with their own address and dockerd, show the
800I A2 / A3 host surface, run nested containers with exactly the devices given, share the host
network like a real node, are reachable by Ansible, and go away without leaving anything behind.

One cluster per module: two A2 hosts, one A3 host and a control host without NPUs.
"""

from __future__ import annotations

import glob
import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
import simctl
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_host_probe import parse_spod

pytestmark = pytest.mark.docker

PREFIX = "pymotor-simtest" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts, e.g. "-strict"
A2_1, A2_2, A3, CTL = (f"{PREFIX}-1", f"{PREFIX}-2", f"{PREFIX}-3", f"{PREFIX}-ctl")
NESTED_IMAGE = "local/debian:bookworm"
NESTED_PORT = 18181
# First line of each chip's two rows: NPU id, a name holding a letter (not A3's Phy-ID), health.
DEVICE_ROW = re.compile(r"^\| (\d+)\s+(\S*[A-Za-z]\S*)\s+\| (\S+)\s+\|", re.MULTILINE)


@pytest.fixture(scope="module")
def cluster():
    simctl.down(PREFIX)  # leftovers of an interrupted run
    try:
        hosts = simctl.up(3, ["800I_A2", "800I_A2", "800I_A3"], PREFIX, control=True)
        simctl.load_image(PREFIX, NESTED_IMAGE)
        yield {h["name"]: h for h in hosts}
    finally:
        simctl.down(PREFIX)


def run(name: str, cmd: str) -> str:
    rc, out = simctl.host_exec(name, cmd)
    assert rc == 0, f"{cmd!r} on {name} exited {rc}:\n{out}"
    return out


def device_rows(npu_smi_info: str) -> list[tuple[str, str, str]]:
    """(NPU id, name, health) of each chip row of ``npu-smi info``."""
    return DEVICE_ROW.findall(npu_smi_info)


def nested_run(host: str, args: str) -> str:
    return run(host, f"docker run --rm {args}")


# ------------------------------------------------------------------------------ hosts and dockerd

def test_hosts_have_own_addresses_and_hostnames(cluster):
    assert list(cluster) == [A2_1, A2_2, A3, CTL]
    ips = [ipaddress.ip_address(h["ip"]) for h in cluster.values()]
    assert len(set(ips)) == len(ips)
    for name in cluster:
        assert run(name, "hostname").strip() == name


@pytest.mark.parametrize("name", [A2_1, A2_2, A3, CTL])
def test_inner_dockerd_answers_with_overlay2(cluster, name):
    assert run(name, "docker info --format '{{.Driver}}'").strip() == "overlay2"


def test_up_reuses_running_hosts(cluster):
    started = {n: simctl.client().containers.get(n).attrs["State"]["StartedAt"] for n in cluster}
    again = simctl.up(3, ["800I_A2", "800I_A2", "800I_A3"], PREFIX, control=True)
    assert {h["name"]: h for h in again} == cluster
    assert {n: simctl.client().containers.get(n).attrs["State"]["StartedAt"]
            for n in cluster} == started


# ----------------------------------------------------------------------------- Ascend host surface

@pytest.mark.parametrize("name", [A2_1, A2_2])
def test_a2_npu_smi_info_shows_eight_910b4(cluster, name):
    rows = device_rows(run(name, "npu-smi info"))
    assert rows == [(str(i), "910B4", "OK") for i in range(8)]
    assert run(name, "cmp /usr/local/bin/npu-smi /usr/local/sbin/npu-smi && echo same") == "same\n"


def test_a2_npu_smi_list_and_board(cluster):
    listing = run(A2_1, "npu-smi info -l")
    assert re.search(r"^\s+Total Count\s+: 8$", listing, re.MULTILINE)
    assert len(re.findall(r"Chip Count\s+: 1$", listing, re.MULTILINE)) == 8
    board = run(A2_1, "npu-smi info -t board -i 0 -c 0")
    assert re.search(r"Chip Type\s+: Ascend\n\s+Chip Name\s+: 910B4", board)
    mapping = run(A2_1, "npu-smi info -m")
    assert mapping.count("Ascend 910B4") == 8 and mapping.count("Mcu") == 8


def test_a3_shows_sixteen_dies_in_eight_modules(cluster):
    assert run(A3, "ls /dev | grep -cE '^davinci[0-9]+$'").strip() == "16"
    rows = device_rows(run(A3, "npu-smi info"))
    assert rows == [(str(die // 2), "Ascend910", "OK") for die in range(16)]
    listing = run(A3, "npu-smi info -l")
    assert re.search(r"Total Count\s+: 8$", listing, re.MULTILINE)
    assert len(re.findall(r"Chip Count\s+: 2$", listing, re.MULTILINE)) == 8
    board = run(A3, "npu-smi info -t board -i 7 -c 1")
    assert re.search(r"NPU Name\s+: 9392", board) and re.search(r"Chip Name\s+: Ascend910", board)


def test_a3_spod_info_gives_each_die_its_sdid_as_hccl_tools_reads_it(cluster):
    """Upstream's hccl_tools.py asks ``npu-smi info -t spod-info -i <id // 2> -c <id % 2>`` per die on A3 and takes
    the value of the first line; the host probe's parser reads the same; an A2 has no spod-info."""
    for die in (0, 15):
        out = run(A3, f"npu-smi info -t spod-info -i {die // 2} -c {die % 2}")
        assert out.splitlines()[0].split(":")[1].strip() == str(die) == parse_spod(out), out
    rc, out = simctl.host_exec(A2_1, "npu-smi info -t spod-info -i 0 -c 0")
    assert rc != 0 and parse_spod(out) == "", out


def test_npu_smi_rejects_absent_device(cluster):
    rc, out = simctl.host_exec(A2_1, "npu-smi info -t board -i 8 -c 0")
    assert rc != 0 and "does not exist" in out


def test_unhealthy_knob_marks_device(cluster):
    try:
        run(A2_2, "printf '3 Warning\\n5\\n' > /etc/pymotor-sim/unhealthy")
        health = {npu: h for npu, _, h in device_rows(run(A2_2, "npu-smi info"))}
        assert health == {**{str(i): "OK" for i in range(8)}, "3": "Warning", "5": "Alarm"}
        assert "Alarm" in run(A2_2, "npu-smi info -t health -i 5")
    finally:
        run(A2_2, "rm -f /etc/pymotor-sim/unhealthy")


def test_hccn_tool_and_hccn_conf(cluster):
    tool = "/usr/local/Ascend/driver/tools/hccn_tool"
    for i in (0, 7):
        assert run(A2_1, f"{tool} -i {i} -link -g") == "link status: UP\n"
        assert run(A2_1, f"{tool} -i {i} -net_health -g") == "net health status: Success\n"
    rc, out = simctl.host_exec(A2_1, f"{tool} -i 8 -link -g")
    assert rc != 0, out
    conf = {host: dict(line.split("=", 1) for line in run(host, "cat /etc/hccn.conf").split())
            for host in (A2_1, A2_2, A3)}
    assert len([k for k in conf[A2_1] if k.startswith("address_")]) == 8
    assert len([k for k in conf[A3] if k.startswith("address_")]) == 16
    assert conf[A2_1]["address_0"] != conf[A2_2]["address_0"]
    assert run(A2_1, f"{tool} -i 7 -ip -g").startswith(f"ipaddr:{conf[A2_1]['address_7']}\n")


def test_driver_files_and_weights(cluster):
    run(A2_1, "grep -q '^Version=' /usr/local/Ascend/driver/version.info"
              " && grep -q '^Version=' /usr/local/Ascend/firmware/version.info"
              " && test -f /etc/ascend_install.info"
              " && test -d /usr/local/Ascend/driver/lib64 && test -d /usr/local/dcmi")
    for model in ("qwen3_8B", "Qwen3-0.6B"):
        config = json.loads(run(A2_1, f"cat /mnt/weight/{model}/config.json"))
        assert config["model_type"] == "qwen3"
        run(A2_1, f"test -s /mnt/weight/{model}/tokenizer_config.json"
                  f" && test -s /mnt/weight/{model}/tokenizer.json")


def test_control_host_has_no_npus(cluster):
    assert cluster[CTL]["hardware"] == "none"
    out = run(CTL, "ls /dev; command -v npu-smi || echo no-npu-smi; ls /usr/local/Ascend || true")
    assert "davinci" not in out and "no-npu-smi" in out


# ------------------------------------------------------------------------------ nested containers

def test_load_image_skips_hosts_that_have_it(cluster):
    assert simctl.load_image(PREFIX, NESTED_IMAGE) == []


def test_nested_container_sees_exactly_its_devices(cluster):
    out = nested_run(A2_1, "--net=host"
                     " --device /dev/davinci0:/dev/davinci0:rwm"
                     " --device /dev/davinci1:/dev/davinci1:rwm"
                     " --device /dev/davinci_manager:/dev/davinci_manager:rwm"
                     " -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi"
                     f" {NESTED_IMAGE} sh -c 'ls /dev/davinci*;"
                     " echo probe > /dev/davinci0 && echo probe > /dev/davinci1 && echo written;"
                     " npu-smi info -l'")
    lines = out.splitlines()
    assert lines[:4] == ["/dev/davinci0", "/dev/davinci1", "/dev/davinci_manager", "written"]
    assert re.search(r"Total Count\s+: 2$", out, re.MULTILINE)


def _connect(host: str, ip: str, port: int, timeout: float = 15) -> str:
    """Read the banner of ip:port from a simulated host, retrying until the server is up."""
    probe = ("import socket,sys; s=socket.create_connection((sys.argv[1], int(sys.argv[2])), 2);"
             " print(s.recv(100).decode().strip())")
    deadline = time.monotonic() + timeout
    while True:
        rc, out = simctl.host_exec(host, ["python3", "-c", probe, ip, str(port)])
        if rc == 0 or time.monotonic() > deadline:
            return out.strip()
        time.sleep(0.3)


def test_nested_host_network_port_reachable_from_other_host(cluster):
    server = ("perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => "
              f"{NESTED_PORT}, Listen => 5, ReuseAddr => 1) or die;"
              " while ($c = $s->accept) { print $c \"hello from nested\\n\"; close $c }'")
    run(A2_1, f"docker run -d --name port-probe --net=host {NESTED_IMAGE} {_quote(server)}")
    assert _connect(A2_2, cluster[A2_1]["ip"], NESTED_PORT) == "hello from nested"


def _quote(script: str) -> str:
    return "sh -c " + "'" + script.replace("'", "'\\''") + "'"


# --------------------------------------------------------------------------------------- Ansible

def test_inventory_reaches_hosts_through_docker_connection(cluster, tmp_path):
    inventory = tmp_path / "inventory.yml"
    simctl.write_inventory(list(cluster.values()), inventory)
    groups = yaml.safe_load(inventory.read_text())["all"]["children"]
    assert list(groups["motor_engine_hosts"]["hosts"]) == [A2_1, A2_2, A3]
    assert groups["motor_control_hosts"]["hosts"] == {
        CTL: {"ansible_host": CTL, "motor_host_ip": cluster[CTL]["ip"]}}
    # docker_host_info runs on the target through its python3-docker and inner dockerd.
    ansible = Path(sys.executable).parent / "ansible"
    result = subprocess.run(
        [str(ansible), "all", "-i", str(inventory), "-m", "community.docker.docker_host_info"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "0"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert result.stdout.count("| SUCCESS") == 4


# ------------------------------------------------------------------------------------ tear-down

def _labelled(prefix: str) -> list:
    client, label = simctl.client(), {"label": f"{simctl.LABEL}={prefix}"}
    return (client.containers.list(all=True, filters=label) + client.volumes.list(filters=label)
            + client.networks.list(filters=label))


def test_down_leaves_nothing_behind(cluster):
    """Last test of the module: the fixture's own down then checks that down is idempotent."""
    nested_ids = [run(h, "docker ps -q --no-trunc").split() for h in cluster]
    cgroups = [path for ids in nested_ids for nested in ids
               for path in glob.glob(f"/sys/fs/cgroup/*/docker/{nested}")]
    started = time.monotonic()
    simctl.down(PREFIX)
    assert time.monotonic() - started < 45  # hosts stopped at once, not one STOP_TIMEOUT after another (shared cores)
    assert _labelled(PREFIX) == []
    assert [p for p in cgroups if os.path.exists(p)] == []
    simctl.down(PREFIX)
