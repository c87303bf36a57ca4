"""deploy.yml with the seed configs on the simulated cluster (tests/sim/simctl.py) and the conformance image with the
real conductor: the REAL controller, coordinator, node managers (fake engines) and Mooncake conductor must come up
through upstream's own startup scripts. No xfail: the deploy-side gaps this suite found (flat role scripts, the
conductor's lib.utils import, the MultiConnector patch on restart; ../shared/reference/fidelity-review.md) are fixed
and any regression fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance_cluster import containers_text, http, install_tokenizer, logs_text

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/sim", "tests/integration"):
    sys.path.insert(0, str(REPO / sub))
import simctl  # noqa: E402
import support  # noqa: E402

SEEDS = {"pd_separation": "examples/seed_pd_separation", "pd_hybrid": "examples/seed_pd_hybrid"}
READY_TIMEOUT = 150  # the real control plane is ready ~20 s after its containers start
# a pod the controller dropped at start (upstream race) restarts after this, well within READY_TIMEOUT
STALL_TIMEOUT = 45


class Cluster:
    engine_hosts = 2

    def __init__(self, seed: str, tmp: Path, image: str):
        self.seed, self.tmp, self.image = seed, tmp, image
        self.prefix = f"pymotor-conf-{seed.replace('_', '')[:8]}" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
        self.job = f"conf-{seed.replace('_', '-')}"
        self.config = tmp / "config"
        self.inventory = tmp / "hosts.yml"
        self.deploys: list[subprocess.CompletedProcess] = []

    def write_config(self, p_instances: int | None = None) -> None:
        self.config.mkdir(exist_ok=True)
        user = json.loads((REPO / SEEDS[self.seed] / "user_config.json").read_text())
        user["motor_deploy_config"].update(job_id=self.job, image_name=self.image)
        if p_instances is not None:
            key = "p_instances_num" if "p_instances_num" in user["motor_deploy_config"] else "hybrid_instances_num"
            user["motor_deploy_config"][key] = p_instances
        (self.config / "user_config.json").write_text(json.dumps(user, indent=2))
        (self.config / "env.json").write_text((REPO / SEEDS[self.seed] / "env.json").read_text())

    def up(self) -> None:
        simctl.down(self.prefix)
        user = json.loads((REPO / SEEDS[self.seed] / "user_config.json").read_text())
        hosts = simctl.up(self.engine_hosts, user["motor_deploy_config"]["hardware_type"], self.prefix, control=True)
        simctl.load_image(self.prefix, self.image)
        simctl.write_inventory(hosts, self.inventory)
        self.hosts = hosts
        install_tokenizer(hosts, self.tmp)  # the real coordinator's KV-cache affinity tokenizes

    def deploy(self) -> subprocess.CompletedProcess:
        result = support.playbook("deploy.yml", self.inventory, self.config,
                                  "-e", f"motor_service_ready_timeout={READY_TIMEOUT}",
                                  "-e", f"motor_service_stall_timeout={STALL_TIMEOUT}", image=self.image, check=False,
                                  timeout=1200)
        self.deploys.append(result)
        return result

    def control(self) -> dict:
        return next(h for h in self.hosts if h["hardware"] == simctl.CONTROL_HARDWARE)

    def containers(self) -> str:
        return containers_text(self.hosts)

    def logs(self, name_part: str, tail: int = 60) -> str:
        return logs_text(self.hosts, name_part, tail)

    def down(self) -> None:
        simctl.down(self.prefix)


@pytest.fixture(scope="module", params=sorted(SEEDS))
def cluster(request, conformance_conductor_image, tmp_path_factory):
    c = Cluster(request.param, tmp_path_factory.mktemp(request.param), conformance_conductor_image)
    c.write_config()
    try:
        c.up()
        started = time.monotonic()
        c.deploy()
        c.first_deploy_s = time.monotonic() - started
        evidence = REPO / "tests" / "output" / f"conformance-{c.seed}.log"
        evidence.parent.mkdir(parents=True, exist_ok=True)
        evidence.write_text(f"first deploy rc={c.deploys[0].returncode} in {c.first_deploy_s:.0f} s\n"
                            f"{_explain(c)}\n{c.logs('coordinator', 40)}\n{c.logs('-p', 40)}\n{c.logs('-d', 40)}")
        yield c
    finally:
        c.down()


def _needs_first_deploy(c: Cluster) -> None:
    """Day-2 steps on a cluster whose first deploy failed cannot pass: fail at once instead of timing out again."""
    if c.deploys[0].returncode != 0:
        pytest.fail(f"the first deploy of {c.seed} failed (rc {c.deploys[0].returncode})")


def _explain(c: Cluster) -> str:
    return (f"{c.deploys[-1].stdout[-3000:]}\n{c.containers()}\n{c.logs('controller', 20)}\n"
            f"{c.logs('kv-conductor', 20)}")


def test_deploy_succeeds(cluster):
    assert cluster.deploys[0].returncode == 0, _explain(cluster)


def test_coordinator_ready(cluster):
    status, body = http(f"http://{cluster.control()['ip']}:1026/readiness")
    assert status == 200 and isinstance(body, dict) and body.get("ready") is True, f"{status} {body}"


def test_conductor_lists_every_prefill_rank(cluster):
    user = json.loads((cluster.config / "user_config.json").read_text())
    section = "motor_engine_prefill_config" if cluster.seed == "pd_separation" else "motor_engine_union_config"
    dp = int(user.get(section, {}).get("engine_config", {}).get("data_parallel_size", 1))
    status, body = http(f"http://{cluster.control()['ip']}:13333/services")
    assert status == 200, f"{status} {body}"
    ranks = {(s.get("InstanceID") or s.get("instance_id"), s.get("DPRank", s.get("dp_rank")))
             for s in (body if isinstance(body, list) else body.get("services", []))}
    assert len(ranks) >= dp, f"{ranks} (dp {dp})"


def test_chat_through_real_pd_path_with_affinity(cluster):
    base = f"http://{cluster.control()['ip']}:1025/v1/chat/completions"
    prefix = "You are a careful assistant. " * 40  # several KV blocks of shared prefix
    answers = [http(base, {"model": "qwen3-8B", "max_tokens": 4,
                           "messages": [{"role": "system", "content": prefix},
                                        {"role": "user", "content": f"question {i}"}]}, timeout=60)
               for i in range(4)]
    assert all(answer[0] == 200 for answer in answers), answers
    assert "matched:" in cluster.logs("coordinator", 400), "no select_endpoint ... matched:N in the coordinator log"


def test_rerun_changes_nothing(cluster):
    _needs_first_deploy(cluster)
    result = cluster.deploy()
    assert result.returncode == 0 and support.recap_changed(result.stdout) == 0, result.stdout[-3000:]


CHAT = {"model": "qwen3-8B", "max_tokens": 4, "messages": [{"role": "user", "content": "still there?"}]}
COORDINATOR_HEAL_TIMEOUT = 120  # issue 33: a restarted coordinator ready and answering chat, with no command run


def _serving(c: Cluster) -> bool:
    status, body = http(f"http://{c.control()['ip']}:1026/readiness")
    if not (status == 200 and isinstance(body, dict) and body.get("ready") is True):
        return False
    return http(f"http://{c.control()['ip']}:1025/v1/chat/completions", CHAT, timeout=30)[0] == 200


def test_restarted_coordinator_heals_without_a_command_then_a_rerun_passes(cluster):
    """``docker restart <job>-coordinator``: upstream's controller re-sends its instances with a SET only when some
    instance has role prefill (event_pusher.py _event_consumer), so in PD hybrid the controller's healer restarts the
    controller (docs/design.md); in PD separation upstream's SET does it. Ready and answering chat within 120 s,
    then deploy.yml passes with nothing changed."""
    _needs_first_deploy(cluster)
    control = cluster.control()["name"]
    assert _serving(cluster), "the job does not serve before the restart"
    started = time.monotonic()
    rc, out = simctl.host_exec(control, ["docker", "restart", f"{cluster.job}-coordinator"])
    assert rc == 0, out
    healed = None
    while time.monotonic() - started < COORDINATOR_HEAL_TIMEOUT:
        if _serving(cluster):
            healed = time.monotonic() - started
            break
        time.sleep(2)
    healer = [line for line in simctl.host_exec(control, ["docker", "logs", f"{cluster.job}-controller"])[1].splitlines()
              if "motor-healer:" in line]
    evidence = REPO / "tests" / "output" / f"conformance-{cluster.seed}-coordinator-restart.log"
    evidence.write_text(f"coordinator restart: serving again after "
                        f"{'%.0f s' % healed if healed is not None else 'NOT within %d s' % COORDINATOR_HEAL_TIMEOUT}\n"
                        + "\n".join(healer) + "\n")
    assert healed is not None, (f"not ready and answering within {COORDINATOR_HEAL_TIMEOUT} s\n{cluster.containers()}\n"
                                f"{cluster.logs('controller', 40)}\n{cluster.logs('coordinator', 30)}")
    result = cluster.deploy()
    assert result.returncode == 0 and support.recap_changed(result.stdout) == 0, result.stdout[-3000:]


FAULT_HEAL_TIMEOUT = 300  # issue 33: an engine crash may need the pod's own restart and the controller's


def _engine_pods(c: Cluster) -> dict:
    """``{engine pod: (host, its healer's config: node manager and engine targets)}``."""
    out = {}
    for host in c.hosts:
        names = simctl.host_exec(host["name"], "docker ps -a --format '{{.Names}}'")[1].split()
        for name in names:
            rc, text = simctl.host_exec(host["name"], f"cat /etc/pymotor/{c.job}/{name}/healer.json")
            if rc == 0 and '"pod"' in text:
                out[name] = (host["name"], json.loads(text))
    assert out, c.containers()
    return out


def _started(c: Cluster, host: str, container: str) -> str:
    return simctl.host_exec(host, ["docker", "inspect", "-f", "{{.State.StartedAt}}", container])[1].strip()


def _pods_serve(c: Cluster, pods: dict) -> bool:
    """Every engine pod's node manager and engines answer normal (a stranded pod's engines do not answer)."""
    for dummy, config in pods.values():
        status, body = http(config["node_manager"]["url"])
        if not (status == 200 and isinstance(body, dict) and body.get("status") is True):
            return False
        for engine in config["engines"]:
            status, body = http(engine["url"])
            if not (status == 200 and isinstance(body, dict) and body.get("status") == "normal"):
                return False
    return True


def _fault(c: Cluster, kind: str, pods: dict) -> tuple[str, dict]:
    """Inflict the fault: what it was, and ``{container: host}`` of the containers it restarts."""
    prefill = sorted(name for name in pods if name.startswith((f"{c.job}-p0", f"{c.job}-u0")))[0]
    host = pods[prefill][0]
    if kind == "engine_kill":  # what a crash does (``docker kill`` would count as a manual stop: no restart)
        target, restarts = prefill, {prefill: host}
    elif kind == "controller_kill":
        host, target = c.control()["name"], f"{c.job}-controller"
        restarts = {target: host}
    elif kind == "coordinator_pause":  # a hung coordinator: its health check fails, the per-host healer restarts it
        host, target = c.control()["name"], f"{c.job}-coordinator"
        rc, out = simctl.host_exec(host, f"docker pause {target}")
        assert rc == 0, out
        return f"{target} frozen (docker pause)", {target: host}
    else:
        simctl.restart_dockerd(host)
        return f"Docker engine of {host} restarted", {name: h for name, (h, dummy) in pods.items() if h == host}
    rc, out = simctl.host_exec(host, f"kill -9 $(docker inspect -f '{{{{.State.Pid}}}}' {target})")
    assert rc == 0, out
    return f"main process of {target} SIGKILLed", restarts


# Each fault end to end on the seed where it differs, not on both (the healers' rules are unit-tested on their own
# table, tests/unit/plugins/module_utils/test_motor_heal_rules.py): an engine crash on both, since a hybrid pod and a
# prefill pod are separate instance roles in the controller; a Docker engine restart (every pod of a host at once)
# on PD separation; a killed controller and a hung coordinator on PD hybrid, where upstream's controller re-sends its
# instances to a new coordinator only through the controller's healer (see the coordinator restart above).
FAULTS = {"pd_separation": ("engine_kill", "engine_dockerd"),
          "pd_hybrid": ("engine_kill", "controller_kill", "coordinator_pause")}


@pytest.mark.parametrize("kind", ["engine_kill", "controller_kill", "coordinator_pause", "engine_dockerd"])
def test_fault_heals_without_a_command_then_rerun_and_verify_pass(cluster, kind):
    """Issue 33: each fault, then (once the containers it hit started again) every engine pod serves and the job is
    ready and answers chat through the coordinator, with no command run (time recorded); then deploy.yml changes
    nothing and verify.yml passes."""
    if kind not in FAULTS[cluster.seed]:
        pytest.skip(f"{kind} is proven on the other seed (FAULTS)")
    _needs_first_deploy(cluster)
    pods = _engine_pods(cluster)
    assert _serving(cluster) and _pods_serve(cluster, pods), "the job does not serve before the fault"
    hosts = {name: host for name, (host, dummy) in pods.items()}
    hosts[f"{cluster.job}-controller"] = hosts[f"{cluster.job}-coordinator"] = cluster.control()["name"]
    before = {name: _started(cluster, host, name) for name, host in hosts.items()}
    started = time.monotonic()
    what, restarts = _fault(cluster, kind, pods)
    healed = None
    while time.monotonic() - started < FAULT_HEAL_TIMEOUT:
        time.sleep(2)
        if all(_started(cluster, host, name) not in ("", before[name]) for name, host in restarts.items()) \
                and _pods_serve(cluster, pods) and _serving(cluster):
            healed = time.monotonic() - started
            break
    healer = [line for line in cluster.logs(cluster.job, 300).splitlines() if "motor-healer:" in line]
    took = f"{healed:.0f} s" if healed is not None else f"NOT within {FAULT_HEAL_TIMEOUT} s"
    line = f"{cluster.seed} {kind} ({what}): serving again after {took}"
    print(line)
    evidence = REPO / "tests" / "output" / f"conformance-{cluster.seed}-{kind}.log"
    evidence.write_text(line + "\n" + "\n".join(healer) + "\n")
    assert healed is not None, (f"{line}\n{cluster.containers()}\n{cluster.logs('controller', 40)}\n"
                                f"{cluster.logs('-p', 30)}\n{cluster.logs('-u', 30)}\n{cluster.logs('coordinator', 20)}")
    result = cluster.deploy()
    assert result.returncode == 0 and support.recap_changed(result.stdout) == 0, f"{line}\n{result.stdout[-3000:]}"
    verify = support.playbook("verify.yml", cluster.inventory, cluster.config,
                              "-e", f"motor_verify_report={cluster.tmp / f'verify-{kind}.json'}", image=cluster.image,
                              check=False)
    assert verify.returncode == 0, f"{line}\n{verify.stdout[-3000:]}"


def test_scale_prefill_out_and_in(cluster):
    """Scaling adds or removes only those instances, and leaves the user_config.json of the running control plane
    untouched: upstream's common.sh would cp -f a rewritten one into the running coordinator every 10 s, and its
    config watchers can read the truncated copy, load the defaults (deploy_mode pd_separate, no worker metaserver
    port) and drop the rest of the write; requests then fail with HTTP 500."""
    _needs_first_deploy(cluster)
    control = cluster.control()["name"]
    files = " ".join(f"/etc/pymotor/{cluster.job}/{cluster.job}-{role}/user_config.json"
                     for role in ("controller", "coordinator"))

    def control_files() -> str:
        rc, out = simctl.host_exec(control, f"stat -c '%n %i %Y' {files} && sha256sum {files}")
        assert rc == 0, out
        return out

    before = control_files()
    for count in (2, 1):
        cluster.write_config(p_instances=count)
        result = cluster.deploy()
        assert result.returncode == 0, result.stdout[-3000:]
        assert control_files() == before
    cluster.write_config()


@pytest.mark.parametrize("verb", [
    "verify.yml",
    # status, stop and destroy report or act on whatever is there: they pass on a broken cluster too
    "status.yml", "stop.yml", "destroy.yml"])
def test_day2_verbs(cluster, verb):
    if verb == "verify.yml":
        _needs_first_deploy(cluster)
    extra = ["-e", f"motor_destroy_confirm={cluster.job}"] if verb == "destroy.yml" else []
    if verb == "verify.yml":  # the report goes to the test's directory, never into the source tree
        extra = ["-e", f"motor_verify_report={cluster.tmp / 'verify.json'}"]
    result = support.playbook(verb, cluster.inventory, cluster.config, *extra, image=cluster.image, check=False)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{cluster.logs('coordinator', 40)}\n" \
                                   f"{cluster.logs('controller', 20)}"
