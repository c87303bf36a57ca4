"""Rolling image upgrade and rollback under steady chat load against the REAL control plane (issue 33, build 3):
examples/seed_pd_separation with 2 prefill + 2 decode instances on two simulated 800I_A2 hosts plus the control host,
the conformance image with the real controller, coordinator and conductor. The fake engines take
MOTOR_SIM_LOAD_SECONDS=20 (env.json's engine sections) before they answer, as a model load does (long enough that a
roll which did not wait for the engines' readiness fails requests outside the window; a real model's minutes add
nothing the test would see but time).

The second release is the conformance image with one more label, committed on every simulated host
(``docker commit --change LABEL`` of a created container: a new image id, no layer shipped). A client sends chat
back to back through the real coordinator for the whole roll (``deploy.yml -e motor_image=<new>``, then back to the
old image); every failed request must overlap the control plane's unavailable window the deploy prints. Then every
engine runs the rolled image and logged its engine ready after the roll started, a deploy.yml re-run changes nothing
and verify.yml passes. The counts of each roll go to ``tests/output/conformance-upgrade.log``.

PD hybrid (seed_pd_hybrid) is left out: each roll of 4 instances waits 4 x (17 s separation + the load + the
registration and readiness) on the real control plane, minutes each; both seeds would not fit this suite's time
(``make conformance-rolls``, not part of ``make conformance``). The tests run in file order on one cluster."""

from __future__ import annotations

import datetime
import json
import os
import re
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
from roll_load import classify, post_chat, under_load, window  # noqa: E402

SEED = "examples/seed_pd_separation"
PREFIX = "pymotor-conf-upgrade" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "conf-upgrade"
HARDWARE = "800I_A2"
NEW = "local/pymotor-conformance:upgrade-release-2"
LOAD_SECONDS = 20
INSTANCES = 2  # per engine role
# the first deploy and each roll wait for engines that load for LOAD_SECONDS; the stall repair (a pod the controller
# dropped at start, upstream race) must not take a loading engine for a dropped one
TIMEOUTS = ("-e", "motor_service_ready_timeout=400", "-e", "motor_service_stall_timeout=120",
            "-e", "motor_service_ready_delay=1")
ENGINE = re.compile(rf"^{re.escape(JOB)}-[pd]\d+-\d+$")
EVIDENCE = REPO / "tests" / "output" / "conformance-upgrade.log"

pytestmark = pytest.mark.rolls


def _utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def note(text: str) -> None:
    with EVIDENCE.open("a") as out:
        out.write(f"[{_utc()}] {text}\n")


class Cluster:
    def __init__(self, tmp: Path, image: str):
        self.tmp, self.old = tmp, image
        self.config, self.inventory = tmp / "config", tmp / "hosts.yml"
        self.hosts: list[dict] = []
        self.rolls: list[dict] = []

    def write_config(self) -> None:
        self.config.mkdir(exist_ok=True)
        user = json.loads((REPO / SEED / "user_config.json").read_text())
        user["motor_deploy_config"].update(job_id=JOB, image_name=self.old, hardware_type=HARDWARE,
                                           p_instances_num=INSTANCES, d_instances_num=INSTANCES)
        env = json.loads((REPO / SEED / "env.json").read_text())
        for role in ("prefill", "decode"):
            env[f"motor_engine_{role}_env"]["MOTOR_SIM_LOAD_SECONDS"] = LOAD_SECONDS
        (self.config / "user_config.json").write_text(json.dumps(user, indent=2))
        (self.config / "env.json").write_text(json.dumps(env, indent=2))
        self.model = user["motor_engine_prefill_config"]["engine_config"]["served_model_name"]

    def up(self) -> None:
        simctl.down(PREFIX)
        self.hosts = simctl.up(2, HARDWARE, PREFIX, control=True)
        simctl.load_image(PREFIX, self.old)
        simctl.write_inventory(self.hosts, self.inventory)
        install_tokenizer(self.hosts, self.tmp)
        for host in self.hosts:  # the second release: a new image id on every host, no layer shipped
            rc, out = simctl.host_exec(host["name"], (
                f"set -e; c=$(docker create {self.old}); "
                f"docker commit --change 'LABEL io.pymotor.test-release=2' $c {NEW} >/dev/null; docker rm $c >/dev/null"))
            assert rc == 0, out

    def playbook(self, name: str, image: str, *extra: str) -> object:
        return support.playbook(name, self.inventory, self.config, *TIMEOUTS, *extra, image=image, check=False,
                                timeout=1500)

    def coordinator(self, port: str, path: str) -> str:
        coordinator = json.loads((self.config / "motor_plan.json").read_text())["coordinator"]
        return f"http://{coordinator['ip']}:{coordinator[port]}{path}"

    def engines(self) -> dict[str, tuple[dict, str]]:
        """{engine container: (its host, the image it runs)}."""
        found = {}
        for host in self.hosts:
            out = simctl.host_exec(host["name"], "docker ps --format '{{.Names}} {{.Image}}'")[1]
            rows = [line.split() for line in out.splitlines() if len(line.split()) == 2]
            found.update({name: (host, image) for name, image in rows if ENGINE.match(name)})
        return found

    def explain(self, result=None) -> str:
        return (f"{(result.stdout[-4000:] if result is not None else '')}\n{containers_text(self.hosts)}\n"
                f"{logs_text(self.hosts, 'controller', 40)}\n{logs_text(self.hosts, 'coordinator', 30)}")


@pytest.fixture(scope="module")
def cluster(conformance_conductor_image, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("conf-upgrade"), conformance_conductor_image)
    EVIDENCE.parent.mkdir(parents=True, exist_ok=True)
    EVIDENCE.write_text(f"# conformance: rolling upgrade and rollback under load ({SEED}, {INSTANCES} prefill + "
                        f"{INSTANCES} decode instances, MOTOR_SIM_LOAD_SECONDS={LOAD_SECONDS}, 2 x {HARDWARE} + "
                        f"control), job {JOB}, {c.old} -> {NEW} -> {c.old}\n")
    c.write_config()
    started = time.monotonic()
    try:
        c.up()
        c.first = c.playbook("deploy.yml", c.old)
        note(f"first deploy rc {c.first.returncode}, {time.monotonic() - started:.0f} s with the hosts")
        yield c
    finally:
        with EVIDENCE.open("a") as out:
            out.write(f"\n# at the end\n{containers_text(c.hosts)}\n{logs_text(c.hosts, 'controller', 80)}\n"
                      f"{logs_text(c.hosts, 'coordinator', 60)}\n")
        simctl.down(PREFIX)
        note(f"module done in {time.monotonic() - started:.0f} s")


def _roll(c: Cluster, image: str) -> None:
    """Deploy ``image`` under load; the counts to the evidence log; every failed request inside the window; every
    engine instance runs ``image`` and loaded again, and the job serves."""
    assert c.first.returncode == 0, c.explain(c.first)
    url = c.coordinator("infer_port", "/v1/chat/completions")
    assert post_chat(url, c.model, timeout=60) == 200, "the job does not serve before the roll"
    since, started = _utc(), time.monotonic()
    results, result = under_load(url, c.model, lambda: c.playbook("deploy.yml", image))
    took = time.monotonic() - started
    printed = window(result.stdout)
    counts, outside = classify(results, printed, image) if printed else (
        {"image": image, "requests": len(results), "failed": sum(r[2] != 200 for r in results)}, [])
    counts.update(deploy_rc=result.returncode, deploy_s=round(took))
    c.rolls.append(counts)
    note(f"roll to {image}: {json.dumps(counts)}")
    # the roll's evidence before the next roll recreates the control plane's containers
    stem = EVIDENCE.with_suffix("").name + f"-roll{len(c.rolls)}"
    (EVIDENCE.parent / f"{stem}-deploy.log").write_text(result.stdout)
    for part in ("coordinator", "controller"):
        (EVIDENCE.parent / f"{stem}-{part}.log").write_text(logs_text(c.hosts, f"{JOB}-{part}", 100000))
    print("roll to %s: %s" % (image, counts))
    assert result.returncode == 0, c.explain(result)
    assert printed, "no control plane window printed:\n" + result.stdout[-4000:]
    assert "image changed" in result.stdout and "rolling" in result.stdout, result.stdout[-4000:]
    engines = c.engines()
    assert len(engines) == 2 * INSTANCES and {run[1] for run in engines.values()} == {image}, engines
    loaded = {name: "[conformance-engine] engine ready" in simctl.host_exec(
        run[0]["name"], ["docker", "logs", "--since", since, name])[1] for name, run in engines.items()}
    assert all(loaded.values()), f"engines that did not load again in the roll: {loaded}"
    status, body = http(c.coordinator("mgmt_port", "/readiness"))
    assert status == 200 and isinstance(body, dict) and body.get("ready") is True, f"{status} {body}"
    assert not outside, (f"{len(outside)} request(s) failed outside the control plane's window {counts}: "
                         f"{outside[:10]}")
    assert len(results) > 100, counts  # the client really ran through the roll


def test_upgrade_under_load_fails_no_request_outside_the_control_plane_window(cluster):
    _roll(cluster, NEW)


def test_rollback_under_load_rolls_the_same_way(cluster):
    _roll(cluster, cluster.old)


def test_rerun_changes_nothing_and_verify_passes(cluster):
    assert cluster.first.returncode == 0, cluster.explain(cluster.first)
    result = cluster.playbook("deploy.yml", cluster.old)
    changed = support.recap_changed(result.stdout)
    report = cluster.tmp / "verify.json"
    verify = cluster.playbook("verify.yml", cluster.old, "-e", f"motor_verify_report={report}")
    note(f"deploy.yml re-run after the rollback: rc {result.returncode}, changed {changed}; verify.yml rc "
         f"{verify.returncode}" + (f"\n{report.read_text()}" if verify.returncode and report.exists() else ""))
    assert result.returncode == 0 and changed == 0, result.stdout[-4000:]
    assert verify.returncode == 0, verify.stdout[-4000:]
