"""The control plane's etcd (issue 49, the foundation of master/standby) on three simulated control hosts.

playbooks/etcd.yml builds the etcd image from the base image (Debian's etcd-server, pymotor.ascend.etcd_image), ships
it and runs a 3-member cluster (pymotor.ascend.motor_etcd); a second run changes nothing. A key written is read
back; with one member stopped the other two still write and read, and the member catches up when it is back.
etcd_backup.yml's snapshot, restored by etcd_restore.yml onto a fresh cluster (every member's data removed and the
cluster created again, empty), brings the key back while the fresh cluster's data is kept aside.
Then the member set changes on the live cluster, one member at a time: 3 -> 1 (two removals; the removed members'
containers stopped, their data kept aside) and 1 -> 3 (two additions; the member that stayed is not restarted), and a
rerun changes nothing.
Members and clients speak mutual TLS only (each member's own certificate of one CA): a client without a certificate,
with one of another CA or over plain http reads nothing; an encrypted member key is refused before anything changes.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
from pathlib import Path

import pytest
import simctl
from etcd_tls import pem_ca, pem_leaf, place
from support import REPO, VENV_BIN, ansible_env, recap_changed, wait_for

pytestmark = pytest.mark.docker

PREFIX = "pymotor-etcd" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts per concurrent run
BASE_IMAGE = "local/debian:bookworm"
ETCD_IMAGE = "local/pymotor-etcd:test"  # kept between runs: its labels make the next build a no-op
CONTAINER = "pymotor-etcd"
ETCD_DIR = "/var/lib/pymotor/etcd"
CTL = "etcdctl --endpoints=https://127.0.0.1:2379 --command-timeout=5s"  # the container's env names its cert
TLS_DIR = "/etc/pymotor-test-etcd"  # on every host: its own member certificate, root's files, mode 0600
TLS_VARS = ("-e", f"motor_etcd_tls_ca_file={TLS_DIR}/ca.crt", "-e", f"motor_etcd_tls_cert_file={TLS_DIR}/member.crt",
            "-e", f"motor_etcd_tls_key_file={TLS_DIR}/member.key")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    simctl.down(PREFIX)  # leftovers of an interrupted run
    try:
        hosts = simctl.up(0, prefix=PREFIX, control=3)
        inventory = tmp_path_factory.mktemp("etcd") / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        certs = tmp_path_factory.mktemp("etcd-certs")
        ca, other_ca = pem_ca("pymotor etcd test CA"), pem_ca("another CA")
        ca_pem = ca[2]
        for host in hosts:
            member = pem_leaf(ca, host["name"], [host["ip"], "127.0.0.1"])
            place(host["name"], f"{TLS_DIR}/ca.crt", ca_pem)
            place(host["name"], f"{TLS_DIR}/member.crt", member["crt"])
            place(host["name"], f"{TLS_DIR}/member.key", member["key"])
            place(host["name"], f"{TLS_DIR}/encrypted.key", pem_leaf(ca, host["name"], [host["ip"]], b"FAKE-pw")["key"])
        for name, issuer in (("client", ca), ("foreign", other_ca)):  # a client of the job's CA, one of another CA
            leaf = pem_leaf(issuer, name, ["127.0.0.1"])
            for part in ("crt", "key"):
                (certs / f"{name}.{part}").write_bytes(leaf[part])
        (certs / "ca.crt").write_bytes(ca_pem)
        yield {"hosts": [h["name"] for h in hosts], "ips": {h["name"]: h["ip"] for h in hosts},
               "inventory": inventory, "certs": certs}
    finally:
        simctl.down(PREFIX)


def playbook(name: str, inventory: Path, *extra: str, expect_success: bool = True) -> str:
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), f"playbooks/{name}",
            "-e", f"etcd_image_base_image={BASE_IMAGE}", "-e", f"motor_etcd_image={ETCD_IMAGE}",
            "-e", "motor_build_host=localhost", *TLS_VARS, *extra]
    result = subprocess.run(argv, cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=900)
    assert (result.returncode == 0) == expect_success, (
        f"{name} exited {result.returncode}:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}")
    return result.stdout


def etcdctl(host: str, args: str) -> str:
    rc, out = simctl.host_exec(host, f"docker exec {CONTAINER} {CTL} {args}")
    assert rc == 0, f"etcdctl {args} on {host} exited {rc}:\n{out}"
    return out


def get(host: str, key: str) -> str | None:
    """The value of ``key`` as ``host``'s member reads it (a linearizable read: it needs the majority), None when absent."""
    out = etcdctl(host, f"get {key} --print-value-only").strip()
    return out or None


def gateway_get(ip: str, key: str, certs: Path, client: str | None, scheme: str = "https") -> str | None:
    """The value of ``key`` read from outside the host through etcd's JSON gateway (/v3/kv/range on the client port),
    with the client certificate ``client`` (None: none); raises when etcd refuses the connection."""
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()})
    if scheme == "https":
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        if client:
            context.load_cert_chain(str(certs / f"{client}.crt"), str(certs / f"{client}.key"))
        conn = http.client.HTTPSConnection(ip, 2379, timeout=10, context=context)
    else:
        conn = http.client.HTTPConnection(ip, 2379, timeout=10)
    try:
        conn.request("POST", "/v3/kv/range", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        if resp.status != 200:
            raise ConnectionRefusedError(f"HTTP {resp.status}: {text[:200]}")
        kvs = json.loads(text).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None
    finally:
        conn.close()


def refused(read) -> bool:
    try:
        read()
    except (OSError, ssl.SSLError, http.client.HTTPException):
        return True
    return False


def healthy(host: str) -> bool:
    return simctl.host_exec(host, f"docker exec {CONTAINER} {CTL} endpoint health")[0] == 0


def test_three_members_serve_survive_one_down_and_restore_from_a_backup(cluster, tmp_path):
    inventory, (first, second, third) = cluster["inventory"], cluster["hosts"]
    # an encrypted member key is refused by name before any container or directory exists
    out = playbook("etcd.yml", inventory, "-e", f"motor_etcd_tls_key_file={TLS_DIR}/encrypted.key", expect_success=False)
    assert "is encrypted: neither etcd nor" in out and "motor_etcd_tls_key_file" in out, out[-3000:]
    assert simctl.host_exec(first, f"test -e {ETCD_DIR}")[0] != 0

    playbook("etcd.yml", inventory)
    members = json.loads(etcdctl(first, "member list --write-out=json"))["members"]
    assert sorted(m["name"] for m in members) == sorted(cluster["hosts"])
    for member in members:  # peers and clients on TLS only
        assert all(u.startswith("https://") for u in member["peerURLs"] + member["clientURLs"]), member
    for host in cluster["hosts"]:  # the host's address and loopback, never every interface
        ports = simctl.host_exec(host, "ss -Htln")[1]
        assert "0.0.0.0:2379" not in ports and "*:2379" not in ports and "127.0.0.1:2379" in ports, ports
        user = simctl.host_exec(host, f"docker inspect -f '{{{{.Config.User}}}} {{{{.HostConfig.CapDrop}}}} "
                                      f"{{{{.HostConfig.ReadonlyRootfs}}}} {{{{.HostConfig.Privileged}}}}' {CONTAINER}")[1]
        assert user.split() == ["2379:2379", "[ALL]", "true", "false"], user

    assert recap_changed(playbook("etcd.yml", inventory)) == 0  # idempotent

    etcdctl(first, "put /pymotor/test/key before-failure")
    assert get(third, "/pymotor/test/key") == "before-failure"
    # from outside: a client certificate of the job's CA reads; none, another CA's or plain http read nothing
    certs, ip = cluster["certs"], cluster["ips"][second]
    assert gateway_get(ip, "/pymotor/test/key", certs, "client") == "before-failure"
    assert refused(lambda: gateway_get(ip, "/pymotor/test/key", certs, None))
    assert refused(lambda: gateway_get(ip, "/pymotor/test/key", certs, "foreign"))
    assert refused(lambda: gateway_get(ip, "/pymotor/test/key", certs, "client", scheme="http"))

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

    # members removed and added on the live cluster, one at a time: 3 -> 1 (the two others stay in the play), 1 -> 3
    inspect_start = f"docker inspect -f '{{{{.Id}}}} {{{{.State.StartedAt}}}}' {CONTAINER}"
    started = simctl.host_exec(first, inspect_start)[1]
    out = " ".join(playbook("etcd.yml", inventory, "-e", json.dumps({"motor_etcd_members": [first]})).split())
    assert f"remove {second}, {third}," in out or f"remove {third}, {second}," in out, out[-3000:]
    assert [m["name"] for m in json.loads(etcdctl(first, "member list --write-out=json"))["members"]] == [first]
    assert get(first, "/pymotor/test/key") == "during-failure"
    for host in (second, third):  # stopped, its data kept aside, not deleted
        running = simctl.host_exec(host, f"docker inspect -f '{{{{.State.Running}}}}' {CONTAINER}")[1].strip()
        assert running == "false", running
        rc, kept = simctl.host_exec(host, f"test ! -e {ETCD_DIR}/data && ls -d {ETCD_DIR}/data.removed-*/member")
        assert rc == 0, kept

    out = " ".join(playbook("etcd.yml", inventory).split())  # back to the three control hosts
    assert f"then add {second}, {third}." in out, out[-3000:]
    members = json.loads(etcdctl(third, "member list --write-out=json"))["members"]
    assert sorted(m["name"] for m in members) == sorted(cluster["hosts"])
    for host in cluster["hosts"]:
        assert healthy(host) and get(host, "/pymotor/test/key") == "during-failure"
    assert simctl.host_exec(first, inspect_start)[1] == started  # the member that stayed was never restarted
    assert recap_changed(playbook("etcd.yml", inventory)) == 0
