"""Host addresses the way kolla-ansible derives them (issue 17): simulated hosts whose only NIC is ``enp189s0f0`` (Docker's
eth0 renamed by the host's entrypoint, SIM_NIC), an inventory that sets neither motor_host_ip nor motor_nic and whose
ansible_host is a DNS name (the container's name, which the community.docker connection resolves). One A2 engine host
(1 P x 4 + 1 D x 4 NPUs) and a control host, prefix pymotor-nic.

- plan.yml without discovery asks for motor_host_ip, one problem per host;
- with discovery (plan.yml -e motor_plan_discover=true, deploy.yml) the plan takes the default route's interface and
  its IPv4 address, and the deployed containers carry them (HOST_IP, POD_IP, HCCL_IF_IP, *_SOCKET_IFNAME);
- a second deploy changes nothing;
- a motor_nic and a motor_host_ip the host does not have stop the deploy in the precheck, naming what the host has.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time

import pytest
import yaml

import simctl
import support
from support import REPO, recap_changed

PREFIX = "pymotor-nic" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts per concurrent run
IMAGE = "local/pymotor-nic:test"
JOB = "nic-job"
NIC = "enp189s0f0"

pytestmark = pytest.mark.docker

playbook = functools.partial(support.playbook, image=IMAGE)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nic")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)
    config_dir = tmp / "config"
    config_dir.mkdir()
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    user["motor_deploy_config"].update(job_id=JOB, image_name=IMAGE)
    (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
    (config_dir / "env.json").write_text((REPO / "examples/seed_pd_separation/env.json").read_text())
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True, nic=NIC)
        simctl.load_image(PREFIX, IMAGE)
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory, addresses=False)
        yield {"hosts": hosts, "inventory": inventory, "config": config_dir, "tmp": tmp}
    finally:
        simctl.down(PREFIX)


def run(host: str, cmd: str) -> str:
    """A read on the host; an empty answer is asked again (twice, 1 s apart): on a loaded machine a clean-clone run
    once got rc 0 and no output from ``ip -4 -o addr show`` through docker exec, where every run before had it."""
    for attempt in range(3):
        if attempt:
            time.sleep(1)
        rc, out = simctl.host_exec(host, cmd)
        assert rc == 0, f"{host}: {cmd}\n{out}"
        if out.strip():
            break
    return out


def test_the_simulated_hosts_have_no_eth0(cluster):
    for host in cluster["hosts"]:
        assert host["nic"] == NIC
        links = run(host["name"], "ip -o link show")
        assert f": {NIC}" in links and "eth0" not in links, links
        assert f"dev {NIC}" in run(host["name"], "ip -4 route show default")
        assert host["ip"] in run(host["name"], f"ip -4 -o addr show {NIC}")
    engine = cluster["hosts"][0]["name"]
    # the NPU address scheme reads the default route's interface
    assert "address_0=29." in run(engine, "cat /etc/hccn.conf")


def test_plan_without_discovery_asks_for_motor_host_ip_per_host(cluster):
    result = playbook("plan.yml", cluster["inventory"], cluster["config"], check=False)
    assert result.returncode != 0
    out = " ".join(result.stdout.split())
    for host in cluster["hosts"]:
        assert (f"hosts.{host['name']}.motor_host_ip: missing, and ansible_host '{host['name']}' is a host name, not "
                "an IP address (set motor_host_ip") in out, result.stdout[-3000:]
        assert out.count(f"hosts.{host['name']}.motor_host_ip:") == 1  # listed once, above the task's failure
    assert "is not an IP address (" not in out


def test_plan_with_discovery_takes_the_default_routes_interface_and_address(cluster):
    playbook("plan.yml", cluster["inventory"], cluster["config"], "-e", "motor_plan_discover=true")
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    for host in cluster["hosts"]:
        assert plan["hosts"][host["name"]]["ip"] == host["ip"]
        assert plan["hosts"][host["name"]]["nic"] == NIC


def test_deploy_wires_the_containers_to_the_probed_nic_and_address(cluster):
    first = playbook("deploy.yml", cluster["inventory"], cluster["config"], "-e", "motor_service_ready_timeout=240")
    assert "all deploy end." in first.stdout
    ips = {h["name"]: h["ip"] for h in cluster["hosts"]}
    coordinator = None
    seen = 0
    for host in cluster["hosts"]:
        names = [name for name in run(host["name"], f"docker ps --filter label=io.pymotor.job={JOB} --format '{{{{.Names}}}}'").split()
                 if not support.is_host_agent(name, JOB)]  # the per-host healer and its proxy run no PyMotor process
        assert names, host
        for info in json.loads(run(host["name"], "docker inspect " + " ".join(names))):
            env = dict(item.split("=", 1) for item in info["Config"]["Env"])
            assert env["HOST_IP"] == env["POD_IP"] == env["HCCL_IF_IP"] == ips[host["name"]], info["Name"]
            assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == env["HCCL_SOCKET_IFNAME"] == NIC, info["Name"]
            coordinator = coordinator or env.get("COORDINATOR_SERVICE")
            seen += 1
    assert seen == 7 and coordinator == ips[f"{PREFIX}-ctl"]
    second = playbook("deploy.yml", cluster["inventory"], cluster["config"], "-e", "motor_service_ready_timeout=240")
    assert recap_changed(second.stdout) == 0, second.stdout[-3000:]


def test_a_nic_and_an_address_the_host_lacks_stop_the_deploy_in_the_precheck(cluster):
    engine, ctl = (h["name"] for h in cluster["hosts"])
    inventory = yaml.safe_load(cluster["inventory"].read_text())
    children = inventory["all"]["children"]
    children["motor_engine_hosts"]["hosts"][engine]["motor_nic"] = "eth0"
    children["motor_control_hosts"]["hosts"][ctl]["motor_host_ip"] = "10.255.255.7"
    broken = cluster["tmp"] / "broken.yml"
    broken.write_text(yaml.safe_dump(inventory, sort_keys=False))
    before = {h: run(h, "docker ps -a --format '{{.Names}} {{.ID}}' | sort") for h in (engine, ctl)}
    result = playbook("deploy.yml", broken, cluster["config"], check=False)
    assert result.returncode != 0
    out = " ".join(result.stdout.split())
    nic = re.search(rf"{engine}: nic: motor_nic eth0 is not an interface of this host \(it has ([^)]*)\)", out)
    assert nic and NIC in nic.group(1).split(", ") and "eth0" not in nic.group(1), result.stdout[-4000:]
    ctl_ip = next(h["ip"] for h in cluster["hosts"] if h["name"] == ctl)
    address = re.search(rf"{ctl}: host address: motor_host_ip 10\.255\.255\.7 is not an address of this host "
                        r"\(it has (.*?)\) \(fix: ", out)
    assert address and f"{ctl_ip} ({NIC})" in address.group(1), result.stdout[-4000:]
    assert {h: run(h, "docker ps -a --format '{{.Names}} {{.ID}}' | sort") for h in (engine, ctl)} == before
