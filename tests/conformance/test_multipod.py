"""Multi-pod instances against the REAL control plane: deploy.yml of examples/seed_pd_separation (KV-cache affinity and
the Mooncake conductor on) changed to 2-pod instances (1 DP rank per pod: dp 2, tp 2, 2 NPUs per pod) on two simulated
800I_A2 hosts plus the control host, so the two pods of each instance are on different hosts.

The real controller gives DP ranks, and the master role (``--master-dp-ip``, node_rank 0), to the pods of an instance
in the order they REGISTER (upstream ``motor/controller/core/instance_assembler.py``: endpoint id = endpoints already
registered; master = first registered node manager), not in pod-index order. ``test_shuffled_start`` forces the
reverse order: every engine container stopped until the controller marked the instances INACTIVE, then pod 1 of each
instance started and registered before pod 0. The test checks that pod 1 really got DP rank 0 and the master role
(the fake engine's argv and the conductor's ``/services``), then that the collection's readiness, a chat request, a
deploy.yml re-run and verify.yml all accept that assignment.

``test_late_peer`` stops both pods of the prefill instance, starts pod 0 alone and pod 1 only LATE_PEER_S (3 min)
later: the waiting pod is never frozen, stopped or killed (its healer's peer guard: a peer not started = wait; the
controller's healer: a pod of the instance unreachable = wait), then the instance assembles and serves.

The last two tests are self-healing checks with no command run: the conductor restarted (``docker restart``) and the
control host's Docker engine restarted (its dockerd SIGTERMed; the simulated host's entrypoint starts it again and the
``unless-stopped`` containers come back): every prefill DP rank must be back in the conductor's ``/services`` within
60 s. Evidence in ``tests/output/conformance-multipod.log``."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conformance_cluster import containers_text, http, install_tokenizer, logs_text

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/sim", "tests/integration"):
    sys.path.insert(0, str(REPO / sub))
import simctl  # noqa: E402
import support  # noqa: E402

SEED = "examples/seed_pd_separation"
PREFIX = "pymotor-conf-multipod" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts, e.g. "-i33"
JOB = "conf-multipod"
HARDWARE = "800I_A2"
READY_TIMEOUT = 150  # the real control plane is ready ~20 s after its containers start
# a pod the controller dropped at start (upstream race) restarts after this, well within READY_TIMEOUT
STALL_TIMEOUT = 45
HEAL_TIMEOUT = 60  # a lost DP rank must be back in the conductor within this, with no command run
# after the control host's Docker engine restarted: dockerd back (~15 s), then, when upstream's controller did not
# hand the restarted coordinator its instances (a lost add, or a set it skipped), the controller's healer acts after
# its 40 s settle and the node managers re-register with the restarted controller (docs/design.md)
RESTART_HEAL_TIMEOUT = 150
DROP_TIMEOUT = 90  # the controller marks an instance INACTIVE a heartbeat timeout (10 s) after its pods stopped
REGISTER_TIMEOUT = 90  # a started node manager registers within seconds (boot.sh, then its API, then POST)
REGISTER_ATTEMPTS = 3  # starts of a pod whose registration the controller dropped at once (upstream race)
ENGINE = re.compile(rf"^{re.escape(JOB)}-([pd])(\d+)-(\d+)$")  # <job>-p<instance>-<pod>, <job>-d<instance>-<pod>
EVIDENCE = REPO / "tests" / "output" / "conformance-multipod.log"
LATE_PEER_S = float(os.environ.get("MOTOR_CONF_LATE_PEER_S") or 180)  # the second pod of an instance starts this late


def _utc() -> str:
    """A ``docker logs --since`` timestamp (the hosts' clocks are this machine's)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Cluster:
    job = JOB

    def __init__(self, tmp: Path, image: str):
        self.tmp, self.image = tmp, image
        self.config = tmp / "config"
        self.inventory = tmp / "hosts.yml"
        self.deploys: list[subprocess.CompletedProcess] = []
        self.hosts: list[dict] = []

    def write_config(self) -> None:
        self.config.mkdir(exist_ok=True)
        user = json.loads((REPO / SEED / "user_config.json").read_text())
        user["motor_deploy_config"].update(job_id=self.job, image_name=self.image, hardware_type=HARDWARE,
                                           single_p_instance_pod_num=2, single_d_instance_pod_num=2,
                                           p_pod_npu_num=2, d_pod_npu_num=2)
        (self.config / "user_config.json").write_text(json.dumps(user, indent=2))
        (self.config / "env.json").write_text((REPO / SEED / "env.json").read_text())

    def up(self) -> None:
        simctl.down(PREFIX)
        self.hosts = simctl.up(2, HARDWARE, PREFIX, control=True)
        simctl.load_image(PREFIX, self.image)
        simctl.write_inventory(self.hosts, self.inventory)
        install_tokenizer(self.hosts, self.tmp)

    def playbook(self, name: str, *extra: str, timeout: float = 1200) -> subprocess.CompletedProcess:
        return support.playbook(name, self.inventory, self.config, *extra, image=self.image, check=False,
                                timeout=timeout)

    def deploy(self) -> subprocess.CompletedProcess:
        result = self.playbook("deploy.yml", "-e", f"motor_service_ready_timeout={READY_TIMEOUT}",
                               "-e", f"motor_service_stall_timeout={STALL_TIMEOUT}")
        self.deploys.append(result)
        repaired = re.findall(r"restarting every pod of ([^\"\n]+)", result.stdout)
        self.note(f"deploy.yml #{len(self.deploys)}: rc {result.returncode}, changed "
                  f"{support.recap_changed(result.stdout)}"
                  + (f", restarted instances the controller dropped at start: {repaired}" if repaired else ""))
        return result

    def control(self) -> dict:
        return next(h for h in self.hosts if h["hardware"] == simctl.CONTROL_HARDWARE)

    def url(self, port: int, path: str) -> str:
        return f"http://{self.control()['ip']}:{port}{path}"

    def engines(self) -> dict[str, dict]:
        """{engine container: its simulated host} for the job's engine containers, running or not."""
        found = {}
        for host in self.hosts:
            if host["hardware"] == simctl.CONTROL_HARDWARE:
                continue
            # a docker ps that fails (a simulated host's dockerd slow on a loaded machine) is asked again
            rc, names = _wait(lambda h=host: _ok(simctl.host_exec(h["name"], "docker ps -a --format '{{.Names}}'")),
                              30, "docker ps") or (1, "")
            assert rc == 0, f"docker ps on {host['name']} failed: {names}"
            found.update({name: host for name in names.split() if ENGINE.match(name)})
        return found

    def host_of(self, container: str) -> dict:
        for host in self.hosts:
            if simctl.host_exec(host["name"], ["docker", "inspect", "--format", "{{.Id}}", container])[0] == 0:
                return host
        raise AssertionError(f"no host runs {container}:\n{self.containers()}")

    def docker(self, container: str, *argv: str) -> tuple[int, str]:
        return simctl.host_exec(self.host_of(container)["name"], ["docker", *argv])

    def log_since(self, container: str, since: str) -> str:
        return self.docker(container, "logs", "--since", since, container)[1]

    def containers(self) -> str:
        return containers_text(self.hosts)

    def logs(self, name_part: str, tail: int = 60) -> str:
        return logs_text(self.hosts, name_part, tail)

    def services(self) -> list[dict]:
        """The conductor's registered KV-event services (Go field names), [] when it does not answer."""
        status, body = http(self.url(13333, "/services"))
        if status != 200 or not isinstance(body, dict):
            return []
        return list(body.get("services") or [])

    def prefill_ranks(self) -> dict[int, str]:
        """{DP rank: KV-event endpoint} of the newest prefill instance the conductor knows."""
        prefill = [s for s in self.services() if str(s.get("InstanceID", "")).startswith("vllm-prefill-")]
        if not prefill:
            return {}
        newest = max(prefill, key=lambda s: int(str(s["InstanceID"]).rsplit("-", 1)[-1]))["InstanceID"]
        return {int(s["DPRank"]): s["Endpoint"] for s in prefill if s["InstanceID"] == newest}

    def dp(self, role: str) -> int:
        user = json.loads((self.config / "user_config.json").read_text())
        return int(user[f"motor_engine_{role}_config"]["engine_config"]["data_parallel_size"])

    def ready(self) -> bool:
        status, body = http(self.url(1026, "/readiness"))
        return status == 200 and isinstance(body, dict) and body.get("ready") is True

    def note(self, text: str) -> None:
        with EVIDENCE.open("a") as out:
            out.write(f"[{_utc()}] {text}\n")

    def explain(self) -> str:
        last = self.deploys[-1].stdout[-3000:] if self.deploys else ""
        return (f"{last}\n{self.containers()}\n{self.logs('controller', 30)}\n{self.logs('kv-conductor', 20)}\n"
                f"services: {json.dumps(self.services())}")

    def down(self) -> None:
        simctl.down(PREFIX)


@pytest.fixture(scope="module")
def cluster(conformance_conductor_image, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("multipod"), conformance_conductor_image)
    EVIDENCE.parent.mkdir(parents=True, exist_ok=True)
    EVIDENCE.write_text(f"# conformance: 2-pod instances ({SEED}, 2 x {HARDWARE} + control), job {JOB}\n")
    c.write_config()
    started = time.monotonic()
    try:
        c.up()
        c.note(f"hosts: {json.dumps(c.hosts)}")
        c.deploy()
        c.note(f"first deploy in {time.monotonic() - started:.0f} s (with the hosts)\n{c.containers()}")
        yield c
    finally:
        with EVIDENCE.open("a") as out:
            out.write(f"\n# at the end\n{c.containers()}\n{c.logs('controller', 60)}\n{c.logs('kv-', 40)}\n"
                      f"{c.logs(f'{JOB}-p', 40)}\n{c.logs(f'{JOB}-d', 40)}\n")
        c.down()
        c.note(f"module done in {time.monotonic() - started:.0f} s")


def _needs_first_deploy(c: Cluster) -> None:
    if c.deploys[0].returncode != 0:
        pytest.fail(f"the first deploy failed (rc {c.deploys[0].returncode})")


def _wait(predicate, timeout: float, what: str, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result or time.monotonic() >= deadline:
            return result
        time.sleep(interval)


def _ok(result: tuple[int, str]) -> tuple[int, str] | None:
    """A host_exec result when it succeeded, else None (for _wait)."""
    return result if result[0] == 0 else None


def _ranks_back(c: Cluster) -> bool:
    return set(c.prefill_ranks()) == set(range(c.dp("prefill")))


def test_deploy_ready_and_conductor_lists_both_ranks(cluster):
    assert cluster.deploys[0].returncode == 0, cluster.explain()
    # The deploy ended with all of this holding (its readiness checks); asked again here on a loaded machine, where a
    # simulated host's dockerd or the real coordinator can answer late: each condition gets HEAL_TIMEOUT, and a
    # condition that needed it is written to the evidence with what was seen first.
    engines = cluster.engines()
    cluster.note(f"engine containers: { {name: host['name'] for name, host in engines.items()} }")

    def idle() -> list[str]:
        # coordinator ready:true needs only a prefill instance (upstream: only_prefill): every pod must run its engine
        return [name for name, host in engines.items() if "[conformance-engine] engine ready" not in
                simctl.host_exec(host["name"], ["docker", "logs", name])[1]]

    checks = {"coordinator ready": cluster.ready, "every pod's engine started": lambda: not idle(),
              "conductor lists every prefill DP rank": lambda: _ranks_back(cluster)}
    for what, holds in checks.items():
        started = time.monotonic()
        if not holds():
            first = (http(cluster.url(1026, "/readiness")), idle(), cluster.services())
            held = _wait(holds, HEAL_TIMEOUT, what)
            cluster.note(f"after the first deploy, {what} held only after {time.monotonic() - started:.0f} s "
                         f"(held: {bool(held)}); first seen (readiness, idle pods, services): {first}")
    assert cluster.ready(), http(cluster.url(1026, "/readiness"))
    assert not idle(), f"no engine started in {idle()}:\n{cluster.logs('controller', 40)}"
    for role in "pd":
        pods = {name: host["name"] for name, host in engines.items() if ENGINE.match(name).group(1) == role}
        assert len(pods) == 2 and len(set(pods.values())) == 2, f"the 2 pods of {role}0 on 2 hosts: {pods}"
    ranks = cluster.prefill_ranks()
    cluster.note(f"conductor after the first deploy: {json.dumps(cluster.services())}")
    assert set(ranks) == set(range(cluster.dp("prefill"))), cluster.services()
    assert len({endpoint.split("//")[-1].rsplit(":", 1)[0] for endpoint in ranks.values()}) == 2, ranks


def _job(container: str) -> str:
    """The instance's job name (JOB_NAME of its node managers): <job>-p0 for <job>-p0-1."""
    return container.rsplit("-", 1)[0]


def _registration(c: Cluster, since: str, ip: str, job: str) -> str | None:
    """``dropped`` when the controller's assembler dropped the node manager at ``ip`` from instance ``job`` (it could
    not reach it), ``registered`` when the controller logged its registration, else None."""
    log = c.log_since(f"{JOB}-controller", since)
    if re.search(rf"Node manager {re.escape(ip)}:\d+ is not alive for instance {re.escape(job)}\(", log):
        return "dropped"
    return "registered" if f"Endpoints added for instance {job} from pod {ip}." in log else None


def _start_registered(c: Cluster, names: list[str], engines: dict[str, dict]) -> None:
    """Start the containers and wait until the controller kept each one's registration.

    Upstream race (PyMotor 7d15c04): the node manager registers as soon as its API's lifespan startup ran
    (``NodeManagerAPI.wait_until_ready``), which uvicorn runs BEFORE it binds the port; the controller's assembler
    checks ``/node-manager/status`` on every registration and drops a node manager it cannot reach ("Node manager
    <ip>:<port> is not alive for instance ..."), and that node manager never registers again, so the instance waits
    for it until ``instance_assemble_timeout`` (600 s). Such a pod is restarted here (it then registers again), at
    most REGISTER_ATTEMPTS times, and the evidence log records it."""
    pending, verb = list(names), "start"
    for attempt in range(1, REGISTER_ATTEMPTS + 1):
        since = _utc()
        for name in pending:
            rc, out = simctl.host_exec(engines[name]["name"], ["docker", verb, name])
            assert rc == 0, out
        for name in pending:
            assert _wait(lambda n=name: _registration(c, since, engines[n]["ip"], _job(n)), REGISTER_TIMEOUT, name), \
                f"{name} did not register:\n{c.logs('controller', 40)}\n{c.logs(name, 40)}"
        time.sleep(3)  # the assembler's reachability check follows a registration at once
        dropped = [n for n in pending if _registration(c, since, engines[n]["ip"], _job(n)) == "dropped"]
        c.note(f"attempt {attempt}: registered {pending}" + (
            f"; dropped by the controller at once (node manager API not listening yet, upstream race): {dropped}, "
            "restarting them" if dropped else ""))
        if not dropped:
            return
        pending, verb = dropped, "restart"
    raise AssertionError(f"{pending} dropped by the controller {REGISTER_ATTEMPTS} times:\n{c.logs('controller', 60)}")


def _engine_args(c: Cluster, container: str, since: str) -> dict | None:
    """dp rank, master DP ip and node rank the node manager started the fake engine with (its logged argv)."""
    for line in c.log_since(container, since).splitlines():
        if "[conformance-engine] argv" in line:
            argv = json.loads(line.split("argv", 1)[1])["argv"]
            opts = dict(zip(argv[1::2], argv[2::2]))
            return {"dp_rank": int(opts["--dp-rank"]), "master": opts["--master-dp-ip"],
                    "node_rank": int(opts.get("--node-rank", 0))}
    return None


def test_shuffled_start(cluster):
    """Pod 1 of each instance registers first, so the real controller makes it DP rank 0 and the master. Then the
    coordinator is ready, the conductor lists the ranks of the new prefill instance (and none of the deleted one), a
    chat request is answered, and a deploy.yml re-run and verify.yml pass."""
    _needs_first_deploy(cluster)
    engines = cluster.engines()
    since = _utc()
    with ThreadPoolExecutor(max_workers=len(engines)) as pool:
        stopped = list(pool.map(lambda item: simctl.host_exec(item[1]["name"], ["docker", "stop", item[0]]),
                                sorted(engines.items())))
    assert all(result[0] == 0 for result in stopped), stopped
    # The controller refuses a new registration of a job name while its instance is ACTIVE ("Instance ... already
    # registered"): wait until the heartbeat timeout (10 s) made both instances INACTIVE. An INACTIVE one stays for
    # 300 s (CLEAR_INSTANCE_TIMEOUT), but a registration then assembles a new instance of that job name.
    inactive = re.compile(r"Instance (\S+)\(id:\d+\) status updated to InsStatus\.INACTIVE")
    jobs = {f"{JOB}-p0", f"{JOB}-d0"}
    dropped = _wait(lambda: jobs <= set(inactive.findall(cluster.log_since(f"{JOB}-controller", since))),
                    DROP_TIMEOUT, "instances inactive")
    assert dropped, cluster.logs("controller", 40)
    order = sorted(engines, key=lambda n: (-int(ENGINE.match(n).group(3)), n))  # higher pod index first
    since = _utc()
    first = [n for n in order if ENGINE.match(n).group(3) != "0"]
    _start_registered(cluster, first, engines)
    _start_registered(cluster, [n for n in order if n not in first], engines)
    # The assignment, from the fake engines' argv (what the node managers were told by the controller)
    assigned = {}
    for name in order:
        assigned[name] = _wait(lambda n=name: _engine_args(cluster, n, since), REGISTER_TIMEOUT + READY_TIMEOUT, name)
        assert assigned[name], f"{name} started no engine:\n{cluster.logs(name, 60)}"
    cluster.note(f"assignment after the shuffled start: {json.dumps(assigned)}")
    for name, args in assigned.items():
        pod = int(ENGINE.match(name).group(3))
        assert args["dp_rank"] == 1 - pod, f"registration order ignored? {assigned}"
        assert args["master"] == engines[f"{_job(name)}-1"]["ip"], assigned
    assert _wait(cluster.ready, READY_TIMEOUT, "ready"), http(cluster.url(1026, "/readiness"))
    ranks = _wait(lambda: cluster.prefill_ranks() if _ranks_back(cluster) else None, HEAL_TIMEOUT, "ranks")
    cluster.note(f"conductor after the shuffled start: {json.dumps(cluster.services())}")
    assert ranks, cluster.services()
    assert f"//{engines[f'{JOB}-p0-1']['ip']}:" in ranks[0], f"DP rank 0 is not pod p0-1: {ranks}"
    # Only the live instance's ranks: a deleted instance's registrations name endpoints its pods no longer publish on
    # (their ranks changed), or, when the ranks come back to them, events of another instance.
    stale = _stale(cluster)
    problems = [f"registrations of a deleted prefill instance in the conductor: {stale}"] if stale else []
    status, body = http(cluster.url(1025, "/v1/chat/completions"),
                        {"model": "qwen3-8B", "max_tokens": 4,
                         "messages": [{"role": "user", "content": "shuffled start"}]}, timeout=60)
    if status != 200:
        problems.append(f"chat: {status} {body}")
    result = cluster.deploy()
    if result.returncode != 0:
        problems.append(f"deploy.yml re-run rc {result.returncode}:\n{result.stdout[-3000:]}")
    report = cluster.tmp / "verify.json"
    result = cluster.playbook("verify.yml", "-e", f"motor_verify_report={report}")
    cluster.note(f"verify.yml after the shuffled start: rc {result.returncode}"
                 + (f"\n{report.read_text()}" if result.returncode and report.exists() else ""))
    if result.returncode != 0:
        problems.append(f"verify.yml rc {result.returncode}:\n{result.stdout[-3000:]}")
    assert not problems, "\n".join(problems)


def _events(c: Cluster, container: str, since: str) -> list[str]:
    """The Docker events of ``container`` since ``since`` until now (pause: a freeze; kill, die, stop: an end)."""
    rc, out = c.docker(container, "events", "--since", since, "--until", _utc(), "--filter",
                       f"container={container}", "--format", "{{.Action}}")
    assert rc == 0, out
    return out.split()


def test_late_peer(cluster):
    """Pod 0 of the prefill instance starts alone; its peer, pod 1, LATE_PEER_S later. Meanwhile pod 0 runs on: no
    pause, kill, die or stop event, the same container start; then the instance assembles, the conductor lists its
    ranks and a chat request is answered."""
    _needs_first_deploy(cluster)
    engines = cluster.engines()
    waiting, late = f"{JOB}-p0-0", f"{JOB}-p0-1"
    since = _utc()
    for name in (waiting, late):
        rc, out = simctl.host_exec(engines[name]["name"], ["docker", "stop", name])
        assert rc == 0, out
    inactive = re.compile(rf"Instance {re.escape(JOB)}-p0\(id:\d+\) status updated to InsStatus\.INACTIVE")
    assert _wait(lambda: inactive.search(cluster.log_since(f"{JOB}-controller", since)), DROP_TIMEOUT,
                 "p0 inactive"), cluster.logs("controller", 40)
    _start_registered(cluster, [waiting], engines)
    alone, started = _utc(), time.monotonic()
    first_start = cluster.docker(waiting, "inspect", "--format", "{{.State.StartedAt}}", waiting)[1].strip()
    states = set()
    while time.monotonic() - started < LATE_PEER_S:
        states.add(cluster.docker(waiting, "inspect", "--format", "{{.State.Status}}", waiting)[1].strip())
        time.sleep(5)
    events = _events(cluster, waiting, alone)
    healer = [line for line in cluster.log_since(waiting, alone).splitlines() if "motor-healer:" in line]
    controller_healer = [line for line in cluster.log_since(f"{JOB}-controller", alone).splitlines()
                         if "motor-healer:" in line]
    still = cluster.docker(waiting, "inspect", "--format", "{{.State.StartedAt}}", waiting)[1].strip()
    cluster.note(f"late peer: {waiting} alone for {time.monotonic() - started:.0f} s: states {sorted(states)}, "
                 f"events {events}, same start {still == first_start}; its healer: {healer}; the controller's: "
                 f"{controller_healer}")
    _start_registered(cluster, [late], engines)
    assert _wait(cluster.ready, READY_TIMEOUT, "ready"), http(cluster.url(1026, "/readiness"))
    seconds, services = _heal(cluster, "late peer started", timeout=READY_TIMEOUT)
    status, body = http(cluster.url(1025, "/v1/chat/completions"),
                        {"model": "qwen3-8B", "max_tokens": 4,
                         "messages": [{"role": "user", "content": "late peer"}]}, timeout=60)
    assert states == {"running"} and not {"pause", "kill", "die", "stop"} & set(events), (states, events, healer)
    assert still == first_start, (first_start, still)
    # the healers' action lines (plugins/plugin_utils/heal.py _what): none in the waiting time
    assert not any("restarting this engine pod" in line or "restarting the controller" in line
                   for line in healer + controller_healer), healer + controller_healer
    assert seconds is not None, f"the instance did not assemble after its late peer: {services}\n{cluster.explain()}"
    assert status == 200, f"{status} {body}"
    # the KV watcher learns registrations from the conductor's /services every 2 s: the next test restarts the conductor
    time.sleep(6)


def _stale(c: Cluster) -> list[str]:
    """Prefill registrations in the conductor of another instance than the newest one."""
    prefill = [s for s in c.services() if str(s.get("InstanceID", "")).startswith("vllm-prefill-")]
    newest = max((int(str(s["InstanceID"]).rsplit("-", 1)[-1]) for s in prefill), default=None)
    return sorted(f"{s['InstanceID']}/dp{s['DPRank']} at {s['Endpoint']}" for s in prefill
                  if int(str(s["InstanceID"]).rsplit("-", 1)[-1]) != newest)


def _heal(c: Cluster, what: str, started: float | None = None,
          timeout: float = HEAL_TIMEOUT) -> tuple[float | None, list]:
    """Seconds from ``started`` (default now) until every prefill DP rank is back in /services (None: not within
    ``timeout`` of it)."""
    started = time.monotonic() if started is None else started
    back = _wait(lambda: _ranks_back(c), max(0.0, started + timeout - time.monotonic()), "ranks back")
    seconds = time.monotonic() - started if back else None
    services = c.services()
    c.note(f"{what}: prefill ranks back {'after %.0f s' % seconds if back else f'NOT within {timeout} s'}; "
           f"services {json.dumps(services)}")
    return seconds, services


def _started_at(c: Cluster, container: str) -> str:
    return simctl.host_exec(c.control()["name"], ["docker", "inspect", "--format", "{{.State.StartedAt}}",
                                                  container])[1].strip()


def test_conductor_restart_self_heals(cluster):
    _needs_first_deploy(cluster)
    control = cluster.control()["name"]
    before = _started_at(cluster, f"{JOB}-kv-conductor")
    started = time.monotonic()  # the 60 s count from the restart command
    rc, out = simctl.host_exec(control, ["docker", "restart", f"{JOB}-kv-conductor"])
    assert rc == 0, out
    seconds, services = _heal(cluster, "conductor restarted (from the docker restart)", started)
    assert _started_at(cluster, f"{JOB}-kv-conductor") != before
    result = cluster.deploy()  # also when the ranks did not come back: it leaves the next test a known state
    assert seconds is not None, (f"prefill DP ranks not back in /services within {HEAL_TIMEOUT} s of the conductor "
                                 f"restart: {services}\n{cluster.logs('kv-', 30)}")
    assert result.returncode == 0, result.stdout[-3000:]


def test_control_docker_engine_restart_self_heals(cluster):
    _needs_first_deploy(cluster)
    control = cluster.control()["name"]
    before = _started_at(cluster, f"{JOB}-kv-conductor")
    started = time.monotonic()  # the 60 s count from the SIGTERM to dockerd
    simctl.restart_dockerd(control)
    cluster.note(f"dockerd of {control} answers again after {time.monotonic() - started:.0f} s\n{cluster.containers()}")
    seconds, services = _heal(cluster, "control host's Docker engine restarted (from the SIGTERM)", started,
                              RESTART_HEAL_TIMEOUT)
    healer = [line for line in cluster.docker(f"{JOB}-controller", "logs", f"{JOB}-controller")[1].splitlines()
              if "motor-healer:" in line]
    cluster.note("controller's healer: " + ("\n".join(healer) or "no line"))
    # the daemon shutdown stopped the conductor and its restart policy started it again (a new conductor process)
    assert _started_at(cluster, f"{JOB}-kv-conductor") != before, cluster.containers()
    diagnosis = (f"{cluster.containers()}\n{cluster.logs('kv-', 30)}\n{cluster.logs('controller', 60)}\n"
                 f"{cluster.logs('coordinator', 40)}")
    result = cluster.deploy()
    assert seconds is not None, (f"prefill DP ranks not back in /services within {RESTART_HEAL_TIMEOUT} s of the "
                                 f"Docker engine restart: {services}\n{diagnosis}")
    assert result.returncode == 0, result.stdout[-3000:]


def _failed_verify(c: Cluster, name: str) -> tuple[dict, dict]:
    """Run verify.yml expecting it to fail; the report and its failed checks as ``{"<check> @ <target>": check}``."""
    report = c.tmp / f"{name}.json"
    result = c.playbook("verify.yml", "-e", f"motor_verify_report={report}")
    assert result.returncode != 0, result.stdout[-3000:]
    data = json.loads(report.read_text())
    c.note(f"verify.yml ({name}): rc {result.returncode}, failed: "
           f"{[k['check'] + ' @ ' + k['target'] for k in data['checks'] if not k['ok']]}")
    return data, {k["check"] + " @ " + k["target"]: k for k in data["checks"] if not k["ok"]}


def test_verify_fails_precisely_when_the_kv_events_are_cut_then_the_watcher_restores(cluster):
    """The real conductor stops following the prefill ranks' events (unregistered, with the KV watcher stopped so
    that nothing repairs it): verify fails on the registrations, per pod, and on every prefix (the conductor matched
    nothing). The watcher started again restores them from what it remembered."""
    _needs_first_deploy(cluster)
    control = cluster.control()["name"]
    assert simctl.host_exec(control, ["docker", "stop", f"{JOB}-kv-watcher"])[0] == 0
    services = [s for s in cluster.services() if str(s.get("InstanceID", "")).startswith("vllm-prefill-")]
    assert len(services) == cluster.dp("prefill"), services
    for s in services:
        status, body = http(cluster.url(13333, "/unregister"), {"instance_id": s["InstanceID"], "dp_rank": s["DPRank"]})
        assert status == 200, body
    try:
        report, failed = _failed_verify(cluster, "events-cut")
        assert failed["conductor lists every prefill DP rank @ kv_conductor"]["detail"].startswith("0/2 registered")
        pods = [k for k in failed if k.startswith("conductor registrations of the pod's DP ranks @ ")]
        assert sorted(pods) == [f"conductor registrations of the pod's DP ranks @ {JOB}-p0-{i}" for i in (0, 1)]
        prefixes = report["affinity"]["prefixes"]
        assert prefixes and all(p["verdict"] == "fail" and p["holder"] is None for p in prefixes)
        assert all("the conductor matched no token of the prefix" in p["reasons"][0] for p in prefixes)
    finally:
        started = time.monotonic()
        assert simctl.host_exec(control, ["docker", "start", f"{JOB}-kv-watcher"])[0] == 0
    seconds, restored = _heal(cluster, "KV watcher started again after the ranks were cut", started)
    assert seconds is not None, f"not restored within {HEAL_TIMEOUT} s: {restored}\n{cluster.logs('kv-watcher', 30)}"
    assert {(s["InstanceID"], s["DPRank"], s["Endpoint"]) for s in restored} == {
        (s["InstanceID"], s["DPRank"], s["Endpoint"]) for s in services}


def test_verify_fails_precisely_when_the_conductor_is_stopped_then_heals(cluster):
    """verify names the unreadable conductor and the stopped container; started again (empty, as after a crash),
    the watcher registers every rank back with no command run, and verify passes."""
    _needs_first_deploy(cluster)
    control = cluster.control()["name"]
    assert simctl.host_exec(control, ["docker", "stop", f"{JOB}-kv-conductor"])[0] == 0
    try:
        report, failed = _failed_verify(cluster, "conductor-stopped")
        assert "conductor /services unreadable" in failed["conductor lists every prefill DP rank @ kv_conductor"][
            "detail"]
        assert f"container running with the planned image @ {control}/{JOB}-kv-conductor" in failed
        assert all(p["verdict"] == "unknown" for p in report["affinity"]["prefixes"])
    finally:
        started = time.monotonic()
        assert simctl.host_exec(control, ["docker", "start", f"{JOB}-kv-conductor"])[0] == 0
    seconds, services = _heal(cluster, "conductor started again after verify saw it stopped", started)
    assert seconds is not None, f"not back within {HEAL_TIMEOUT} s: {services}\n{cluster.logs('kv-', 30)}"
    report = cluster.tmp / "healed.json"
    result = cluster.playbook("verify.yml", "-e", f"motor_verify_report={report}")
    assert result.returncode == 0, result.stdout[-3000:]
