"""Master/standby on the REAL control plane (docs/ha.md): one simulated cluster of three control hosts (the two replica
hosts and an etcd witness: a 3-member etcd survives the loss of one) and one engine host (the PD separation seed:
1 prefill + 1 decode instance), upstream's controller and coordinator electing through the collection's etcd (mutual
TLS) behind keepalived + HAProxy on ``motor_vip``.

deploy.yml builds and ships the etcd and VIP images, runs etcd, keepalived and HAProxy and both replicas of each role:
``all deploy end.``, verify.yml passes through the VIP and a second run changes nothing. Then the whole control host of
both masters (the simulated host's container) is stopped while a client sends chat back to back through the VIP: chat
answers again within 30 s with no command run, the failed requests are counted, the coordinator routes every instance
again, and the host started again rejoins with its replicas as standby (readiness 503) while the VIP stays. Under
chat too: a control-plane image upgrade (a new image id on the two replica hosts) moves each pair standby first with
the engines running, and the witness host's etcd member stopped for 25 s fails nothing."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.vip import haproxy_name

from conformance_cluster import containers_text, http, install_tokenizer, logs_text

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/sim", "tests/integration"):
    sys.path.insert(0, str(REPO / sub))
import simctl  # noqa: E402
import support  # noqa: E402
from etcd_tls import pem_ca, pem_leaf, place  # noqa: E402


PREFIX = "pymotor-conf-ha" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "conf-ha"
SEED = REPO / "examples" / "seed_pd_separation"
BASE_IMAGE = "local/debian:bookworm"
ETCD_IMAGE = "local/pymotor-etcd:test"  # test_etcd's tag: its labels make the build a no-op when it exists
VIP_IMAGE = "local/pymotor-vip:test"
MEMBER_TLS = "/etc/pymotor-test-etcd"  # every control host: its member certificate
CLIENT_TLS = "/etc/pymotor-test-etcd-client"  # the replica hosts: the controller's and coordinator's client cert
READY_TIMEOUT = 240
FAILOVER_LIMIT = 30.0  # the bound: chat answers again within 30 s of the host's stop
HA_RELEASE = "local/pymotor-conformance:ha-release-2"  # the control plane's second release (a new image id)
ETCD_DOWN_S = 25  # one etcd member down this long: more than the lock's TTL (10 s) and two renewal rounds
CHAT = {"model": "qwen3-8B", "max_tokens": 4, "messages": [{"role": "user", "content": "still there?"}]}
# a client that waits 30 s: on a loaded 2-core machine an answer can come late (the coordinator gets a small share of
# the CPU while other suites run); a late answer is not a failed one, an error status or a connection cut is
REQUEST_TIMEOUT = 30


def ha_vars() -> list[str]:
    return ["-e", f"etcd_image_base_image={BASE_IMAGE}", "-e", f"vip_image_base_image={BASE_IMAGE}",
            "-e", f"motor_etcd_image={ETCD_IMAGE}", "-e", f"motor_vip_image={VIP_IMAGE}",
            "-e", "motor_build_host=localhost",
            "-e", f"motor_etcd_tls_ca_file={MEMBER_TLS}/ca.crt", "-e", f"motor_etcd_tls_cert_file={MEMBER_TLS}/member.crt",
            "-e", f"motor_etcd_tls_key_file={MEMBER_TLS}/member.key",
            "-e", f"motor_service_etcd_tls_dir={CLIENT_TLS}",
            "-e", f"motor_service_ready_timeout={READY_TIMEOUT}", "-e", "motor_service_stall_timeout=45"]


def free_vip(hosts: list[dict]) -> str:
    """An address of the simulated network no host uses (Docker allocates from the bottom of the subnet)."""
    net = simctl.client().networks.get(f"{PREFIX}-net")
    subnet = ipaddress.ip_network(net.attrs["IPAM"]["Config"][0]["Subnet"])
    vip = str(subnet.network_address + 200)
    assert vip not in {h["ip"] for h in hosts}
    return vip


def write_config(config: Path, image: str) -> None:
    config.mkdir(exist_ok=True)
    user = json.loads((SEED / "user_config.json").read_text())
    user["motor_deploy_config"].update(job_id=JOB, image_name=image)
    for section in ("motor_controller_config", "motor_coordinator_config"):
        user.setdefault(section, {})["standby_config"] = {"enable_master_standby": True}
    (config / "user_config.json").write_text(json.dumps(user, indent=2))
    (config / "env.json").write_text((SEED / "env.json").read_text())


class Cluster:
    def __init__(self, tmp: Path, image: str):
        self.tmp, self.image = tmp, image
        self.config, self.inventory = tmp / "config", tmp / "hosts.yml"
        self.runs: list[subprocess.CompletedProcess] = []

    def up(self) -> None:
        simctl.down(PREFIX)
        self.hosts = simctl.up(1, "800I_A2", PREFIX, control=3)
        simctl.load_image(PREFIX, self.image)
        install_tokenizer(self.hosts, self.tmp)
        simctl.write_inventory(self.hosts, self.inventory)
        self.vip = free_vip(self.hosts)
        inventory = yaml.safe_load(self.inventory.read_text())
        inventory["all"]["children"]["motor_control_hosts"]["vars"] = {"motor_vip": self.vip}
        self.inventory.write_text(yaml.safe_dump(inventory, sort_keys=False))
        self.controls = [h for h in self.hosts if h["hardware"] == simctl.CONTROL_HARDWARE]
        ca = pem_ca("pymotor conformance etcd CA")
        for host in self.controls:
            member = pem_leaf(ca, host["name"], [host["ip"], "127.0.0.1"])
            place(host["name"], f"{MEMBER_TLS}/ca.crt", ca[2])
            place(host["name"], f"{MEMBER_TLS}/member.crt", member["crt"])
            place(host["name"], f"{MEMBER_TLS}/member.key", member["key"])
            client = pem_leaf(ca, f"pymotor {host['name']}", ["127.0.0.1"])  # upstream dials 127.0.0.1:2379
            place(host["name"], f"{CLIENT_TLS}/ca.crt", ca[2])
            place(host["name"], f"{CLIENT_TLS}/client.crt", client["crt"])
            place(host["name"], f"{CLIENT_TLS}/client.key", client["key"])

    def playbook(self, name: str, *extra: str) -> subprocess.CompletedProcess:
        result = support.playbook(name, self.inventory, self.config, *ha_vars(), *extra, image=self.image,
                                  check=False, timeout=1500)
        self.runs.append(result)
        return result

    def plan(self) -> dict:
        return json.loads((self.config / "motor_plan.json").read_text())

    def explain(self) -> str:
        last = self.runs[-1].stdout[-4000:] if self.runs else ""
        return (f"{last}\n{containers_text(self.hosts)}\n{logs_text(self.hosts, 'controller', 25)}\n"
                f"{logs_text(self.hosts, 'coordinator', 25)}\n{logs_text(self.hosts, 'keepalived', 15)}")


@pytest.fixture(scope="module")
def cluster(conformance_conductor_image, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("standby"), conformance_conductor_image)
    write_config(c.config, c.image)
    try:
        c.up()
        started = time.monotonic()
        c.first = c.playbook("deploy.yml")
        c.first_deploy_s = time.monotonic() - started
        yield c
    finally:
        evidence = REPO / "tests" / "output" / "conformance-standby.log"
        evidence.parent.mkdir(parents=True, exist_ok=True)
        with evidence.open("a") as out:
            out.write(f"first deploy {getattr(c, 'first_deploy_s', 0):.0f} s\n{c.explain()}\n")
        simctl.down(PREFIX)


def replica_readiness(c: Cluster, role: str) -> dict:
    """{host name: (status, body)} of each replica's own /readiness (the controller API, the coordinator's mgmt port)."""
    plan = c.plan()
    port = plan["controller"]["api_port"] if role == "controller" else plan["coordinator"]["mgmt_port"]
    return {r["host"]: http(f"http://{r['ip']}:{port}/readiness", timeout=5)
            for r in plan["standby"]["replicas"][role]}


def master_host(c: Cluster, role: str) -> str | None:
    masters = [host for host, answer in replica_readiness(c, role).items() if answer[0] == 200]
    return masters[0] if len(masters) == 1 else None


def chat_url(c: Cluster) -> str:
    return f"http://{c.vip}:{c.plan()['coordinator']['infer_port']}/v1/chat/completions"


def chat(c: Cluster, timeout: float = 30) -> int:
    return http(chat_url(c), CHAT, timeout=timeout)[0]


def test_deploy_runs_etcd_the_vip_and_both_replicas(cluster):
    assert cluster.first.returncode == 0 and "all deploy end." in cluster.first.stdout, cluster.explain()
    plan = cluster.plan()
    assert plan["controller"]["ip"] == plan["coordinator"]["ip"] == cluster.vip
    for role in ("controller", "coordinator"):
        answers = replica_readiness(cluster, role)
        statuses = sorted(answer[0] for answer in answers.values())
        # one master (200) and one standby whose readiness says why it is not ready
        assert statuses == [200, 503], answers
        assert any("master" in str(body).lower() for status, body in answers.values() if status == 503), answers
    assert chat(cluster) == 200


def test_verify_passes_and_a_rerun_changes_nothing(cluster):
    assert cluster.first.returncode == 0, "the first deploy failed"
    verify = cluster.playbook("verify.yml", "-e", f"motor_verify_report={cluster.tmp / 'verify.json'}")
    assert verify.returncode == 0, verify.stdout[-4000:]
    again = cluster.playbook("deploy.yml")
    assert again.returncode == 0 and support.recap_changed(again.stdout) == 0, again.stdout[-4000:]


def replica_starts(c: Cluster) -> dict:
    """{replica container: "<id> <StartedAt> <RestartCount>"} of every controller/coordinator replica."""
    out = {}
    for role, replicas in c.plan()["standby"]["replicas"].items():
        for r in replicas:
            rc, text = simctl.host_exec(r["host"], ["docker", "inspect", "--format",
                                                    "{{.Id}} {{.State.StartedAt}} {{.RestartCount}}", r["container"]])
            out[r["container"]] = text.strip() if rc == 0 else f"not inspected: {text.strip()}"
    return out


# one round of each healer, run in its own container with its own config (the copies the deploy placed)
CONTROLLER_HEALER_ONCE = ("cd \"$CONFIGMAP_PATH\" && python3 -c 'import json, motor_healer as m; "
                          "h = m.Healer(json.load(open(\"healer.json\"))); s = h.standby(); "
                          "print(json.dumps({\"standby\": s, \"acted\": h.step()}))'")
HOST_HEALER_ONCE = ("cd \"$CONFIGMAP_PATH\" && python3 -c 'import json, time, motor_host_healer as m; "
                    "c = dict(m.DEFAULTS, **json.load(open(\"host_healer.json\"))); "
                    "print(json.dumps(m.round_once(m.DockerClient(c[\"docker_host\"]), c, {}, time.time())))'")


def last_json_line(text: str):
    return json.loads([line for line in text.splitlines() if line.startswith(("{", "["))][-1])


def test_healers_leave_the_standby_and_status_shows_the_pair_and_etcd(cluster):
    """One round of every healer of the replica hosts changes nothing: the controller's healer in each replica knows
    whether its replica is the master (its own /readiness, motor_health.replica_role), the host healers act on no
    container; the standby replicas keep their container, start time and restart count. status.yml shows one master
    and one standby per role, the VIP on one host and every etcd member healthy."""
    assert cluster.first.returncode == 0, "the first deploy failed"
    before = replica_starts(cluster)
    masters = {role: master_host(cluster, role) for role in ("controller", "coordinator")}
    assert all(masters.values()), masters
    for r in cluster.plan()["standby"]["replicas"]["controller"]:
        rc, out = simctl.host_exec(r["host"], ["docker", "exec", r["container"], "sh", "-c", CONTROLLER_HEALER_ONCE])
        assert rc == 0, out
        assert last_json_line(out) == {"standby": r["host"] != masters["controller"], "acted": False}, out
    for host in {r["host"] for replicas in cluster.plan()["standby"]["replicas"].values() for r in replicas}:
        healer = f"{JOB}-healer-{host}"
        rc, out = simctl.host_exec(host, ["docker", "exec", healer, "sh", "-c", HOST_HEALER_ONCE])
        assert rc == 0 and last_json_line(out) == [], out

    output = cluster.tmp / "status_ha.json"
    status = cluster.playbook("status.yml", "-e", f"motor_status_ha_output={output}")
    assert status.returncode == 0, status.stdout[-4000:]
    assert "master/standby (one master per role, the VIP on" in status.stdout, status.stdout[-4000:]
    shown = json.loads(output.read_text())
    for role in ("controller", "coordinator"):
        rows = [r for r in shown["replicas"] if r["role"] == role]
        assert sorted(r["replica"] for r in rows) == ["master", "standby"], rows
        assert [r["host"] for r in rows if r["replica"] == "master"] == [masters[role]], rows
    holds = [h["name"] for h in cluster.controls
             if simctl.host_exec(h["name"], f"ip -o addr show | grep -c ' {cluster.vip}/'")[1].strip() == "1"]
    assert shown["vip_hosts"] == holds and len(holds) == 1, (shown["vip_hosts"], holds)
    assert sorted(r["host"] for r in shown["etcd"]) == sorted(h["name"] for h in cluster.controls), shown["etcd"]
    assert all(r["health"] == "healthy" for r in shown["etcd"]), shown["etcd"]
    assert [r["leader"] for r in shown["etcd"]].count("yes") == 1, shown["etcd"]
    assert replica_starts(cluster) == before


def routes_every_instance(c: Cluster) -> bool:
    """The coordinator (through the VIP) routes as many prefill and decode instances as the plan has."""
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import routed_instances

    plan = c.plan()
    status, text = http(f"http://{c.vip}:{plan['coordinator']['obs_port']}/metrics?type=dp", timeout=5)
    if status != 200:
        return False
    routed = routed_instances(text)
    for role in ("prefill", "decode"):
        wanted = {x["job_name"] for x in plan["containers"] if x["role"] == role}
        if sum(1 for entry in routed.values() if entry["role"] == role) < len(wanted):
            return False
    return True


def test_the_masters_host_stopped_under_chat_fails_over_within_30s_and_rejoins_as_standby(cluster):
    assert cluster.first.returncode == 0, "the first deploy failed"
    first, second = (h["name"] for h in cluster.controls[:2])
    # both masters on the first host (the VIP's first choice), so that its stop takes both masters and the VIP: a
    # master on the second host is stopped until the first host's replica holds the lock (a restart could win the
    # lock back), then started again as standby
    for role in ("controller", "coordinator"):
        support.wait_for(lambda r=role: master_host(cluster, r), timeout=60, interval=1, what=f"one {role} master")
        if master_host(cluster, role) == second:
            container = f"{JOB}-{role}-2"
            assert simctl.host_exec(second, ["docker", "stop", container])[0] == 0
            support.wait_for(lambda r=role: replica_readiness(cluster, r)[first][0] == 200, timeout=90, interval=1,
                             what=f"the {role} master on {first}")
            assert simctl.host_exec(second, ["docker", "start", container])[0] == 0
        support.wait_for(lambda r=role: master_host(cluster, r) == first, timeout=120, interval=1,
                         what=f"the {role} master on {first} and its standby on {second}")
    support.wait_for(lambda: chat(cluster) == 200, timeout=60, interval=1, what="chat through the VIP")

    results: list[tuple[float, int]] = []  # (time since the stop returned, status)
    stop = threading.Event()
    stopped_at: list[float] = []

    def client():
        while not stop.is_set():
            status = chat(cluster, timeout=10)
            results.append((time.monotonic(), status))
            if status != 200:
                time.sleep(0.2)  # a refused connection returns at once: do not spin

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    time.sleep(3)
    subprocess.run(["docker", "stop", "-t", "0", first], check=True, capture_output=True)  # the whole host
    stopped_at.append(time.monotonic())
    deadline = stopped_at[0] + 90
    while time.monotonic() < deadline:
        after = [s for t, s in results if t > stopped_at[0]]
        if len(after) >= 3 and after[-3:] == [200, 200, 200]:
            break
        time.sleep(0.5)
    stop.set()
    thread.join(timeout=15)
    after = [(t - stopped_at[0], s) for t, s in results if t > stopped_at[0]]
    failed = [x for x in after if x[1] != 200]
    answered = [t for t, s in after if s == 200 and t > (failed[-1][0] if failed else 0)]
    recovered = answered[0] if answered else None
    before = Counter(s for t, s in results if t <= stopped_at[0])
    evidence = REPO / "tests" / "output" / "conformance-standby-failover.log"
    evidence.parent.mkdir(parents=True, exist_ok=True)
    evidence.write_text(f"stopped {first} (both masters and the VIP); chat answered again after "
                        f"{recovered if recovered is None else round(recovered, 1)} s; after the stop "
                        f"{len(after)} requests, {len(failed)} failed ({dict(Counter(x[1] for x in failed))}); "
                        f"before the stop {dict(before)}\n")
    assert recovered is not None and recovered <= FAILOVER_LIMIT, (
        f"chat not answered again within {FAILOVER_LIMIT} s: {after[-10:]}\n{cluster.explain()}")
    for role in ("controller", "coordinator"):
        assert master_host(cluster, role) == second, replica_readiness(cluster, role)
    support.wait_for(lambda: routes_every_instance(cluster), timeout=60, interval=2,
                     what="the new coordinator master routes every instance")

    # the host back: its replicas start again as standby, the VIP stays where it is (nopreempt)
    subprocess.run(["docker", "start", first], check=True, capture_output=True)
    for role in ("controller", "coordinator"):
        support.wait_for(lambda r=role: replica_readiness(cluster, r).get(first, (0,))[0] == 503, timeout=180,
                         interval=2, what=f"the {role} on {first} back as standby")
        assert master_host(cluster, role) == second
    holds = simctl.host_exec(second, f"ip -o addr show | grep -c ' {cluster.vip}/'")[1].strip()
    assert holds == "1", f"the VIP moved back: {holds}"
    assert chat(cluster) == 200
    with evidence.open("a") as out:
        out.write(f"{first} back: both replicas standby (503), VIP stays on {second}\n")


class ChatLoad:
    """A client sending chat through the VIP while the block runs, back to back or one request every ``pace`` s:
    (monotonic time, status) of each."""

    def __init__(self, c: Cluster, pace: float = 0.0):
        self.results, self.errors, self.stop, self.pace = [], [], threading.Event(), pace
        self.url = chat_url(c)  # once: it reads the plan file
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            begun = time.monotonic()
            status, body = http(self.url, CHAT, timeout=REQUEST_TIMEOUT)
            self.results.append((time.monotonic(), status, time.monotonic() - begun))
            if status != 200:  # what the client saw, for the evidence (status 0: no HTTP answer)
                self.errors.append((round(begun - self.results[0][0], 1), round(time.monotonic() - begun, 1),
                                    status, str(body)[:200]))
            # a refused connection returns at once: do not spin
            self.stop.wait(max(self.pace - (time.monotonic() - begun), 0.2 if status != 200 else 0.0))

    def __enter__(self):
        self.since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # for HAProxy's log (explain)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        time.sleep(2)  # a last few requests after the change
        self.stop.set()
        self.thread.join(timeout=REQUEST_TIMEOUT + 5)

    def explain(self, c: Cluster) -> str:
        """The failed requests (start s, took s, status, what the client got) and HAProxy's connection log of every
        replica host since the load began (tcplog: its termination state says which side ended a connection)."""
        if not self.errors:
            return ""
        text = [f"failed requests (start s, took s, status, detail): {self.errors}"]
        for host in (h["name"] for h in c.controls[:2]):
            log = simctl.host_exec(host, ["docker", "logs", "--since", self.since, haproxy_name(JOB)])[1]
            text.append(f"--- HAProxy on {host} since {self.since}:\n" + "\n".join(log.splitlines()[-400:]))
        return "\n".join(text) + "\n"

    def failed(self) -> list[tuple[float, int]]:
        start = self.results[0][0] if self.results else 0
        return [(round(t - start, 1), s) for t, s, _took in self.results if s != 200]

    def slowest(self) -> float:
        """The longest a request took (s): how near the client's timeout the roll came."""
        return round(max((took for _t, _s, took in self.results), default=0.0), 1)


def upgrade_inventory(c: Cluster, image: str) -> Path:
    """The cluster's inventory with ``image`` for the two replica hosts only: a control-plane image upgrade (the
    engine host and the etcd witness keep the job's image)."""
    inventory = yaml.safe_load(c.inventory.read_text())
    for name in (h["name"] for h in c.controls[:2]):
        for group in inventory["all"]["children"].values():
            if name in (group.get("hosts") or {}):
                group["hosts"][name] = dict(group["hosts"][name] or {}, motor_image=image, motor_service_image=image)
    path = c.tmp / "hosts-upgrade.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def upgrade_playbook(c: Cluster, inventory: Path, name: str = "deploy.yml") -> subprocess.CompletedProcess:
    """``name`` without the suite's ``-e motor_image`` (an extra variable would win over the hosts' own image)."""
    argv = support.playbook_argv(name, inventory, c.config, *ha_vars(), image=c.image)
    at = argv.index(f"motor_image={c.image}")
    del argv[at - 1:at + 1]
    result = subprocess.run(argv, cwd=REPO, env=support.ansible_env(), capture_output=True, text=True, timeout=1500,
                            check=False)
    c.runs.append(result)
    return result


def running_image(host: str, container: str) -> str:
    return simctl.host_exec(host, ["docker", "inspect", "-f", "{{.Config.Image}}", container])[1].strip()


def test_a_control_plane_image_upgrade_under_chat_moves_each_pair_standby_first(cluster):
    """The second release of the control plane (a new image id on the two replica hosts) under a client sending chat
    through the VIP (4 requests a second): each pair moves standby first (roll_pair.yml), the engines keep running, every
    instance is routed after, and a second run changes nothing."""
    assert cluster.first.returncode == 0, "the first deploy failed"
    hosts = [h["name"] for h in cluster.controls[:2]]
    for host in hosts:  # a new image id, no layer shipped
        rc, out = simctl.host_exec(host, (
            f"set -e; c=$(docker create {cluster.image}); docker commit --change 'LABEL io.pymotor.test-release=ha2' "
            f"$c {HA_RELEASE} >/dev/null; docker rm $c >/dev/null"))
        assert rc == 0, out
    engines = {c["name"]: c["host"] for c in cluster.plan()["containers"] if c["role"] in ("prefill", "decode")}
    started = {name: simctl.host_exec(host, ["docker", "inspect", "-f", "{{.State.StartedAt}}", name])[1].strip()
               for name, host in engines.items()}
    masters = {role: master_host(cluster, role) for role in ("controller", "coordinator")}
    assert all(masters.values()), masters
    support.wait_for(lambda: chat(cluster) == 200, timeout=60, interval=1, what="chat through the VIP")
    inventory = upgrade_inventory(cluster, HA_RELEASE)
    begun = time.monotonic()
    # 4 requests a second at most: the minutes of the upgrade's deploy are load, the move is sampled every 0.25 s, and
    # back to back (about 10 a second) only spent CPU seconds (the suite is bound by them)
    with ChatLoad(cluster, pace=0.25) as load:
        roll = upgrade_playbook(cluster, inventory)
    roll_s = time.monotonic() - begun
    failed = load.failed()
    evidence = REPO / "tests" / "output" / "conformance-standby-upgrade.log"
    evidence.parent.mkdir(parents=True, exist_ok=True)
    (evidence.parent / "conformance-standby-upgrade-deploy.log").write_text(roll.stdout)
    evidence.write_text(f"control-plane upgrade under chat: deploy {roll_s:.0f} s, {len(load.results)} requests "
                        f"(slowest {load.slowest()} s), {len(failed)} failed {failed}; masters before {masters}, after "
                        f"{ {role: master_host(cluster, role) for role in masters} }\n{load.explain(cluster)}")
    assert roll.returncode == 0 and "all deploy end." in roll.stdout, cluster.explain()
    assert "moves as a pair" in roll.stdout and "Stop the master cleanly" in roll.stdout, roll.stdout[-4000:]
    for role in ("controller", "coordinator"):
        replicas = {r["host"]: r["container"] for r in cluster.plan()["standby"]["replicas"][role]}
        assert {running_image(host, name) for host, name in replicas.items()} == {HA_RELEASE}, replicas
        # the master moved once: the other replica is master, the old master is back as standby
        assert master_host(cluster, role) not in (None, masters[role]), replica_readiness(cluster, role)
    for name, host in engines.items():  # the engines outlived the move
        assert simctl.host_exec(host, ["docker", "inspect", "-f", "{{.State.StartedAt}}", name])[1].strip() == \
            started[name], name
    support.wait_for(lambda: routes_every_instance(cluster), timeout=60, interval=2,
                     what="the coordinator routes every instance after the upgrade")
    # the coordinator's handover (handover_pair.yml): the old master serves until the new one is ready and HAProxy
    # drained it, so no request meets a gap
    assert "Hand the lock to the standby" in roll.stdout and "Drain the old master from inference" in roll.stdout
    assert not failed, f"{len(failed)} of {len(load.results)} requests failed during the upgrade: {load.errors}"
    again = upgrade_playbook(cluster, inventory)
    assert again.returncode == 0 and support.recap_changed(again.stdout) == 0, again.stdout[-4000:]


def etcd_healthy(host: str) -> bool:
    rc, out = simctl.host_exec(host, ["docker", "exec", "pymotor-etcd", "etcdctl",
                                      "--endpoints=https://127.0.0.1:2379", "endpoint", "health"])
    return rc == 0 and "is healthy" in out


def test_one_etcd_member_down_under_chat_fails_nothing(cluster):
    """The witness host's etcd member stopped for longer than the lock's TTL (10 s) while a client sends chat: the
    two members left keep the majority, the masters renew their locks and stay, nothing fails; the member started
    again is healthy."""
    assert cluster.first.returncode == 0, "the first deploy failed"
    witness = cluster.controls[2]["name"]
    masters = {role: master_host(cluster, role) for role in ("controller", "coordinator")}
    assert all(masters.values()), masters
    support.wait_for(lambda: chat(cluster) == 200, timeout=60, interval=1, what="chat through the VIP")
    with ChatLoad(cluster) as load:
        time.sleep(2)
        assert simctl.host_exec(witness, ["docker", "stop", "pymotor-etcd"])[0] == 0
        time.sleep(ETCD_DOWN_S)  # the TTL and two renewal rounds (standby_manager.py:157-199)
        during = {role: master_host(cluster, role) for role in masters}
        assert simctl.host_exec(witness, ["docker", "start", "pymotor-etcd"])[0] == 0
    failed = load.failed()
    (REPO / "tests" / "output").mkdir(parents=True, exist_ok=True)
    with (REPO / "tests" / "output" / "conformance-standby-upgrade.log").open("a") as out:
        out.write(f"etcd member of {witness} down {ETCD_DOWN_S} s under chat: {len(load.results)} requests "
                  f"(slowest {load.slowest()} s), {len(failed)} failed {failed}; masters {masters} -> {during}\n"
                  f"{load.explain(cluster)}")
    assert during == masters, (masters, during)
    assert not failed, f"{len(failed)} of {len(load.results)} requests failed: {load.errors}"
    support.wait_for(lambda: etcd_healthy(witness), timeout=60, interval=2, what=f"the etcd member of {witness}")
    assert {role: master_host(cluster, role) for role in masters} == masters


def test_stop_then_destroy_take_keepalived_and_haproxy_too(cluster):
    """stop.yml stops the job's keepalived and HAProxy (their own label) with its containers, so the VIP is released;
    destroy.yml removes them and their configuration; the etcd cluster, shared by jobs, keeps running."""
    assert cluster.first.returncode == 0, "the first deploy failed"
    replica_hosts = [h["name"] for h in cluster.controls[:2]]
    stop = cluster.playbook("stop.yml")
    assert stop.returncode == 0, stop.stdout[-3000:]
    for host in replica_hosts:
        rc, out = simctl.host_exec(host, "docker ps --format '{{.Names}}'")
        assert rc == 0 and not [n for n in out.split() if n.startswith(JOB)], out
        assert f"{JOB}-keepalived" in simctl.host_exec(host, "docker ps -a --format '{{.Names}}'")[1]
        assert simctl.host_exec(host, f"ip -o addr show | grep -c ' {cluster.vip}/'")[1].strip() == "0"
    destroy = cluster.playbook("destroy.yml", "-e", f"motor_destroy_confirm={JOB}")
    assert destroy.returncode == 0, destroy.stdout[-3000:]
    for host in replica_hosts:
        names = simctl.host_exec(host, "docker ps -a --format '{{.Names}}'")[1].split()
        assert not [n for n in names if n.startswith(JOB)], names
        assert "pymotor-etcd" in simctl.host_exec(host, "docker ps --format '{{.Names}}'")[1]
        assert simctl.host_exec(host, f"test -e /etc/pymotor/vip/{JOB}")[0] != 0
