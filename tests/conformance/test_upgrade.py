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

Before the rolls, in the same cluster: one prefill engine's /metrics answers 2.5 s late (the conformance engine's
knob, a busy engine) for SLOW_METRICS_FOR s while the job serves; inside that time the running image is deployed
under a new tag under chat and streaming load (0 failed requests, 0 broken streams, no container of the job
restarted), then chat goes on to the end of it: the controller restarted at most once (its healer does not take an
engine it cannot read itself for a lost ``add``), every chat request answered. Each roll runs under streaming chat
too (outputs of STREAM_TOKENS x DECODE_MS_PER_TOKEN, 30+ s): a stream broken outside the control plane's window must
end at a "del" of the coordinator (upstream closes the HTTP client of an instance it stops routing to, see
``_cut_by_del``: no drain keeps such a stream), and no instance stops with requests in flight (the drain waits for
the engines' running/waiting gauges).

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
from roll_load import classify, post_chat, under_streaming_load, window  # noqa: E402

SEED = "examples/seed_pd_separation"
PREFIX = "pymotor-conf-upgrade" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "conf-upgrade"
HARDWARE = "800I_A2"
NEW = "local/pymotor-conformance:upgrade-release-2"
RETAG = "local/pymotor-conformance:upgrade-retag"  # the first release's image id under another name
# streaming clients during each deploy under load; a decode step of DECODE_MS_PER_TOKEN ms makes each stream 32 s
STREAMS, STREAM_TOKENS, DECODE_MS_PER_TOKEN = 3, 3200, 10
# a busy engine: its /metrics answers this late (upstream's collector waits 2 s), for SLOW_METRICS_FOR s
SLOW_METRICS_S = 2.5
SLOW_METRICS_FOR = float(os.environ.get("MOTOR_CONF_SLOW_METRICS_FOR") or 600)
# after the retag, chat every 0.5 s for the rest of that time (about 1,100 requests): back to back it sent 4,355, whose
# CPU seconds (client, coordinator, engines) a suite bound by CPU pays without proving more
LATER_PACE = 0.5
METRICS_DELAY_FILE = "/tmp/motor_sim_metrics_seconds"  # tests/conformance/image/conformance_engine.py
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
        env["motor_engine_decode_env"]["MOTOR_SIM_DECODE_MS_PER_TOKEN"] = DECODE_MS_PER_TOKEN
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
            rc, out = simctl.host_exec(host["name"], ["docker", "tag", self.old, RETAG])
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

    def containers(self) -> dict[str, tuple]:
        """{container of the job: (its id, started at, restart count)} on every host."""
        found = {}
        for host in self.hosts:
            rc, out = simctl.host_exec(host["name"], (
                f"docker ps -aq --filter name={JOB}- | xargs -r docker inspect -f "
                "'{{.Name}} {{.Id}} {{.State.StartedAt}} {{.RestartCount}}'"))
            assert rc == 0, out
            found.update({row[0].lstrip("/"): tuple(row[1:]) for row in map(str.split, out.splitlines())
                          if len(row) == 4})
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
    results, streams, result = under_streaming_load(url, c.model, lambda: c.playbook("deploy.yml", image), STREAMS,
                                                    STREAM_TOKENS)
    took = time.monotonic() - started
    printed = window(result.stdout)
    counts, outside = classify(results, printed, image) if printed else (
        {"image": image, "requests": len(results), "failed": sum(r[2] != 200 for r in results)}, [])
    stream_counts, streams_outside = classify(streams, printed, image) if printed else ({}, [])
    coordinator_log = logs_text(c.hosts, f"{JOB}-coordinator", 100000)
    cut = _cut_by_del(streams_outside, coordinator_log)
    lasted = sorted(end - start for start, end, status in streams if status == 200)
    in_flight = result.stdout.count("stops with requests in flight")
    counts.update(deploy_rc=result.returncode, deploy_s=round(took), streams=len(streams),
                  streams_broken=sum(r[2] != 200 for r in streams),
                  streams_broken_outside_window=len(streams_outside),
                  streams_cut_at_a_del=len(cut),
                  streams_outside_utc=stream_counts.get("outside_utc", []),
                  stream_median_s=round(lasted[len(lasted) // 2], 1) if lasted else 0,
                  stopped_in_flight=in_flight,
                  not_drained=result.stdout.count("was not taken out of the coordinator's routing"))
    c.rolls.append(counts)
    note(f"roll to {image}: {json.dumps(counts)}")
    # the roll's evidence before the next roll recreates the control plane's containers
    stem = EVIDENCE.with_suffix("").name + f"-roll{len(c.rolls)}"
    (EVIDENCE.parent / f"{stem}-deploy.log").write_text(result.stdout)
    (EVIDENCE.parent / f"{stem}-coordinator.log").write_text(coordinator_log)
    (EVIDENCE.parent / f"{stem}-controller.log").write_text(logs_text(c.hosts, f"{JOB}-controller", 100000))
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
    # upstream's coordinator closes the HTTP client of an instance it no longer routes to at once, its streams with it
    # (see _cut_by_del): a stream broken outside the window must end at such a "del", nothing else may break one
    others = [r for r in streams_outside if r not in cut]
    assert not others, f"{len(others)} stream(s) broken outside the control plane's window, at no del {counts}"
    assert lasted and lasted[len(lasted) // 2] >= 30, f"streams shorter than 30 s: {counts}"
    # every instance drained: out of the routing, then stopped only once its engines held no request
    assert counts["not_drained"] == 0 and in_flight == 0, result.stdout[-4000:]


DEL_EVENT = re.compile(r"(\d\d)-(\d\d) (\d\d:\d\d:\d\d) \[domain\]\[instance_manager\.py:\d+\] Refresh instances: "
                       r"event_type=EventType\.DEL")


def _cut_by_del(broken: list, coordinator_log: str) -> list:
    """The broken streams that ended within 3 s of a "del" the coordinator logged (the roll's drain or the controller's
    own after it separated a stopped instance). On every refresh of its instances upstream's coordinator closes the
    HTTP client of each endpoint it no longer routes to (``motor/coordinator/api_server/inference_server.py:287-301``,
    ``motor/common/http/http_client.py:313-332`` ``cleanup_unused_clients``: ``aclose()``), so a stream in flight on
    that instance ends with ``httpx.ReadError`` (its log: "Error in streaming Decode"), whatever the roll waits for
    after the del."""
    year = datetime.datetime.now(datetime.timezone.utc).year
    dels = [datetime.datetime.strptime(f"{year}-{m[0]}-{m[1]} {m[2]}", "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp() for m in DEL_EVENT.findall(coordinator_log)]
    return [r for r in broken if any(-1 <= r[1] - t <= 3 for t in dels)]


def _metrics_seconds(name: str, host: dict) -> float:
    """How long engine ``name``'s management /metrics takes to answer (curl's total time, inside its container; the
    engine's log names its address and port)."""
    log = simctl.host_exec(host["name"], ["docker", "logs", name])[1]
    ready = json.loads(log.split("[conformance-engine] engine ready ", 1)[1].splitlines()[0])
    address = log.split('"--host", "', 1)[1].split('"', 1)[0]
    rc, out = simctl.host_exec(host["name"], ["docker", "exec", name, "curl", "-fsS", "-o", "/dev/null", "-w",
                                              "%{time_total}", f"http://{address}:{ready['mgmt_port']}/metrics"])
    assert rc == 0, out
    return float(out.strip())


def test_slow_metrics_and_a_retag_under_load_restart_nothing(cluster):
    """One prefill engine's /metrics 2.5 s late for SLOW_METRICS_FOR s while the job serves; inside it the running
    image under a new tag deployed under chat and streaming load."""
    c = cluster
    assert c.first.returncode == 0, c.explain(c.first)
    url = c.coordinator("infer_port", "/v1/chat/completions")
    assert post_chat(url, c.model, timeout=60) == 200, "the job does not serve before the slow engine"
    engines = c.engines()
    slow = sorted(name for name in engines if re.match(rf"{re.escape(JOB)}-p\d", name))[0]
    host = engines[slow][0]
    before = c.containers()
    controller = next(name for name in before if name.endswith("-controller"))
    since, started = _utc(), time.monotonic()
    rc, out = simctl.host_exec(host["name"], ["docker", "exec", slow, "sh", "-c",
                                              f"echo {SLOW_METRICS_S} > {METRICS_DELAY_FILE}"])
    assert rc == 0, out
    try:
        answer_s = _metrics_seconds(slow, host)
        assert answer_s >= SLOW_METRICS_S, f"{slow}'s /metrics answered in {answer_s:.1f} s"
        chat, streams, result = under_streaming_load(url, c.model, lambda: c.playbook("deploy.yml", RETAG), STREAMS,
                                                     STREAM_TOKENS)
        retag_s = time.monotonic() - started
        after_retag = c.containers()
        (EVIDENCE.parent / "conformance-upgrade-retag-deploy.log").write_text(result.stdout)
        # chat goes on until the slow engine has been slow for SLOW_METRICS_FOR s: one request every LATER_PACE s
        rest = max(0.0, SLOW_METRICS_FOR - (time.monotonic() - started))
        later, _no_streams, _slept = under_streaming_load(url, c.model, lambda: time.sleep(rest), 0, 0,
                                                          pace=LATER_PACE)
        answer_end_s = _metrics_seconds(slow, host)
    finally:
        simctl.host_exec(host["name"], ["docker", "exec", slow, "rm", "-f", METRICS_DELAY_FILE])
    after = c.containers()
    healer = [line for line in simctl.host_exec(
        next(h["name"] for h in c.hosts if controller in simctl.host_exec(h["name"], "docker ps -a")[1]),
        ["docker", "logs", "--since", since, controller])[1].splitlines() if "motor-healer:" in line]
    restarts = (int(after[controller][2]) - int(before[controller][2]) if after[controller][0] == before[controller][0]
                else 1 + int(after[controller][2]))  # a new container: the healer does not recreate, count it anyway
    counts = {"slow_engine": slow, "metrics_s": [round(answer_s, 1), round(answer_end_s, 1)],
              "slow_for_s": round(time.monotonic() - started), "retag_deploy_s": round(retag_s),
              "retag_rc": result.returncode, "retag_changed": support.recap_changed(result.stdout),
              "retag_requests": len(chat), "retag_failed": sum(r[2] != 200 for r in chat),
              "retag_streams": len(streams), "retag_streams_broken": sum(r[2] != 200 for r in streams),
              "retag_containers_restarted": sorted(n for n in before if after_retag.get(n) != before[n]),
              "later_requests": len(later), "later_failed": sum(r[2] != 200 for r in later),
              "controller_restarts": restarts,
              "healer_lines": healer[-10:]}
    note(f"slow /metrics and retag: {json.dumps(counts)}")
    print("slow /metrics and retag: %s" % counts)
    assert result.returncode == 0, c.explain(result)
    assert counts["retag_failed"] == 0 and counts["retag_streams_broken"] == 0, counts
    assert counts["retag_containers_restarted"] == [], counts  # retag: 0 engine (and control plane) restarts
    assert streams and len(chat) > 20, counts  # the clients really ran through the deploy
    assert restarts <= 1, counts
    assert counts["later_failed"] == 0 and len(later) > 100, counts
    assert {n for n, run in after.items() if ENGINE.match(n) and run != before.get(n)} == set(), counts


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
