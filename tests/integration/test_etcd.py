"""The control plane's etcd (issue 49, the foundation of master/standby) on three simulated control hosts.

playbooks/etcd.yml builds the etcd image from the base image (Debian's etcd-server, pymotor.ascend.etcd_image), ships
it and runs a 3-member cluster (pymotor.ascend.motor_etcd); a second run changes nothing. A key written is read
back; with one member stopped the other two still write and read, and the member catches up when it is back.
etcd_backup.yml's snapshot, restored by etcd_restore.yml onto a fresh cluster (every member's data removed and the
cluster created again, empty), brings the key back while the fresh cluster's data is kept aside.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import simctl
from support import REPO, VENV_BIN, ansible_env, recap_changed, wait_for

pytestmark = pytest.mark.docker

PREFIX = "pymotor-etcd" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts per concurrent run
BASE_IMAGE = "local/debian:bookworm"
ETCD_IMAGE = "local/pymotor-etcd:test"  # kept between runs: its labels make the next build a no-op
CONTAINER = "pymotor-etcd"
ETCD_DIR = "/var/lib/pymotor/etcd"
CTL = "etcdctl --endpoints=http://127.0.0.1:2379 --command-timeout=5s"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    simctl.down(PREFIX)  # leftovers of an interrupted run
    try:
        hosts = simctl.up(0, prefix=PREFIX, control=3)
        inventory = tmp_path_factory.mktemp("etcd") / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        yield {"hosts": [h["name"] for h in hosts], "inventory": inventory}
    finally:
        simctl.down(PREFIX)


def playbook(name: str, inventory: Path, *extra: str) -> str:
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), f"playbooks/{name}",
            "-e", f"etcd_image_base_image={BASE_IMAGE}", "-e", f"motor_etcd_image={ETCD_IMAGE}",
            "-e", "motor_build_host=localhost", *extra]
    result = subprocess.run(argv, cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    return result.stdout


def etcdctl(host: str, args: str) -> str:
    rc, out = simctl.host_exec(host, f"docker exec {CONTAINER} {CTL} {args}")
    assert rc == 0, f"etcdctl {args} on {host} exited {rc}:\n{out}"
    return out


def get(host: str, key: str) -> str | None:
    """The value of ``key`` as ``host``'s member reads it (a linearizable read: it needs the majority), None when absent."""
    out = etcdctl(host, f"get {key} --print-value-only").strip()
    return out or None


def healthy(host: str) -> bool:
    return simctl.host_exec(host, f"docker exec {CONTAINER} {CTL} endpoint health")[0] == 0


def test_three_members_serve_survive_one_down_and_restore_from_a_backup(cluster, tmp_path):
    inventory, (first, second, third) = cluster["inventory"], cluster["hosts"]
    playbook("etcd.yml", inventory)
    members = json.loads(etcdctl(first, "member list --write-out=json"))["members"]
    assert sorted(m["name"] for m in members) == sorted(cluster["hosts"])
    for host in cluster["hosts"]:  # the host's address and loopback, never every interface
        ports = simctl.host_exec(host, "ss -Htln")[1]
        assert "0.0.0.0:2379" not in ports and "*:2379" not in ports and "127.0.0.1:2379" in ports, ports
        user = simctl.host_exec(host, f"docker inspect -f '{{{{.Config.User}}}} {{{{.HostConfig.CapDrop}}}} "
                                      f"{{{{.HostConfig.ReadonlyRootfs}}}} {{{{.HostConfig.Privileged}}}}' {CONTAINER}")[1]
        assert user.split() == ["2379:2379", "[ALL]", "true", "false"], user

    assert recap_changed(playbook("etcd.yml", inventory)) == 0  # idempotent

    etcdctl(first, "put /pymotor/test/key before-failure")
    assert get(third, "/pymotor/test/key") == "before-failure"

    # one member down: the other two are a majority and keep serving writes and linearizable reads
    simctl.host_exec(third, f"docker stop -t 5 {CONTAINER}")
    etcdctl(first, "put /pymotor/test/key during-failure")
    assert get(second, "/pymotor/test/key") == "during-failure"
    simctl.host_exec(third, f"docker start {CONTAINER}")
    wait_for(lambda: healthy(third), timeout=60, what=f"{third} healthy again")
    assert get(third, "/pymotor/test/key") == "during-failure"  # caught up

    playbook("etcd_backup.yml", inventory, "-e", f"motor_etcd_backup_local_dir={tmp_path}")
    snapshots = list(tmp_path.glob("etcd-*.db"))
    assert len(snapshots) == 1 and snapshots[0].stat().st_size > 0, snapshots

    # a fresh, empty cluster on the same hosts
    for host in cluster["hosts"]:
        simctl.host_exec(host, f"docker rm -f {CONTAINER} && rm -rf {ETCD_DIR}")
    playbook("etcd.yml", inventory)
    assert get(first, "/pymotor/test/key") is None

    playbook("etcd_restore.yml", inventory, "-e", f"motor_etcd_snapshot={snapshots[0]}")
    for host in cluster["hosts"]:
        assert get(host, "/pymotor/test/key") == "during-failure"
        rc, kept = simctl.host_exec(host, f"ls -d {ETCD_DIR}/data.before-restore-*/member")
        assert rc == 0, kept  # the fresh cluster's data was kept, not deleted
    members = json.loads(etcdctl(second, "member list --write-out=json"))["members"]
    assert sorted(m["name"] for m in members) == sorted(cluster["hosts"])
