"""Day-2 verbs on a small simulated cluster: one A2 engine host (1 P x 4 NPUs + 1 D x 4 NPUs) and a control host,
deployed with playbooks/deploy.yml, then verify, status, stop, destroy and collect_logs (prefix pymotor-ops); status,
stop, collect_logs and destroy also by job id with a config dir that no longer validates."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tarfile
import time

import pytest
import requests

import simctl
import support
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from support import REPO, deployed_containers, recap_changed

PREFIX = "pymotor-ops" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts, e.g. "-strict"
IMAGE = "local/pymotor-ops:test"
JOB = "ops-job"
# Secrets only where PyMotor reads them (an unknown key is refused): TLSConfig's key_file and passwd_file.
SECRET = "/etc/pymotor-keys/FAKE-SECRET-9f3a1c/key_pwd.txt"
TLS_KEY = "/etc/pymotor-keys/FAKE-TLSKEY-5d90ab/server.key"  # noqa: S105  (test data)
TLS_PASSWORD = "/etc/pymotor-keys/FAKE-TLSPASS-7e21c4/infer_pwd.txt"  # noqa: S105

pytestmark = pytest.mark.docker


playbook = functools.partial(support.playbook, image=IMAGE)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("day2")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)
    config_dir = tmp / "config"
    config_dir.mkdir()
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    user["motor_deploy_config"]["job_id"] = JOB
    user["motor_deploy_config"]["image_name"] = IMAGE
    user["motor_deploy_config"]["tls_config"] = {
        "mgmt_tls_config": {"enable_tls": False, "key_file": TLS_KEY, "passwd_file": SECRET},
        "infer_tls_config": {"enable_tls": False, "passwd_file": TLS_PASSWORD}}
    (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
    (config_dir / "env.json").write_text((REPO / "examples/seed_pd_separation/env.json").read_text())
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, IMAGE)
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        playbook("deploy.yml", inventory, config_dir, "-e", "motor_service_ready_timeout=240")
        yield {"hosts": hosts, "inventory": inventory, "config": config_dir, "tmp": tmp}
    finally:
        simctl.down(PREFIX)


def test_verify_passes_with_full_affinity(cluster):
    report_path = cluster["tmp"] / "report.json"
    result = playbook("verify.yml", cluster["inventory"], cluster["config"], "-e", f"motor_verify_report={report_path}")
    report = json.loads(report_path.read_text())
    assert report["passed"], report
    affinity = report["affinity"]
    assert affinity["passed"] and affinity["fraction"] == 1.0 and affinity["repeats"] >= 6
    assert affinity["tokens"]["source"] == "tokenize"  # the prefill engine's vLLM route
    for prefix in affinity["prefixes"]:  # judged from the conductor's /query and the engines' counters only
        assert prefix["verdict"] == "ok" and prefix["matched_before"] == 0 and prefix["matched"] >= 4 * 128, prefix
        assert prefix["holder"].startswith("vllm-prefill-") and prefix["holder_container"].startswith(f"{JOB}-p0-0/")
        assert all(r["engine"] == prefix["holder_container"] and r["hit_tokens"] >= 4 * 128 for r in prefix["repeats"])
        assert prefix["spread"] == [prefix["holder"]] and not prefix["notes"]
    assert report["kv_events"]["block_stored"] > 0 and report["kv_events"]["decode_errors"] == 0
    assert report["kv_format"]["compatible"] is True and report["kv_format"]["shape"] == "array"
    assert len(report["containers"]) == 7 and all(c["restarts"] == 0 for c in report["containers"])
    assert "checks passed, 0 failed" in result.stdout


def test_verify_check_mode_probes_and_passes_without_writing(cluster):
    """verify.yml --check on a healthy cluster: the read-only probes run (check_mode: false), every check passes,
    nothing is written (neither the report nor the plan file) and nothing changes on the hosts."""
    report_path = cluster["tmp"] / "report-check.json"
    plan_file = cluster["config"] / "motor_plan.json"
    plan_before = (plan_file.read_bytes(), plan_file.stat().st_mtime_ns)
    result = playbook("verify.yml", cluster["inventory"], cluster["config"], "--check",
                      "-e", f"motor_verify_report={report_path}")
    assert "checks passed, 0 failed" in result.stdout, result.stdout[-4000:]
    for task in ("Read the controller, the coordinator, every node manager and engine and the KV conductor "
                 "(concurrently)", "Send one inference request",
                 "Subscribe to the KV events and run the affinity probe"):
        chunk = result.stdout.split(f"TASK [pymotor.ascend.motor_operations : {task}]", 1)[1].split("TASK [", 1)[0]
        assert "ok: [localhost" in chunk and "skipping" not in chunk, f"{task} was not probed:\n{chunk}"
    assert not report_path.exists()
    assert (plan_file.read_bytes(), plan_file.stat().st_mtime_ns) == plan_before
    for line in result.stdout[result.stdout.index("PLAY RECAP"):].splitlines()[1:]:
        if "ok=" in line and not line.startswith("localhost"):
            assert "changed=0" in line and "failed=0" in line, line


def test_status_lists_every_container(cluster):
    out = cluster["tmp"] / "status.json"
    result = playbook("status.yml", cluster["inventory"], cluster["config"], "-e", f"motor_status_output={out}")
    rows = json.loads(out.read_text())
    # the conductor's registrations, per publishing pod: both DP ranks of the prefill pod
    text = result.stdout[result.stdout.index("KV conductor registrations (2):"):]
    assert sorted(re.findall(rf"{JOB}-p0-0 +(\d+) +vllm-prefill-\d+ +tcp://", text)) == ["0", "1"], text[:1500]
    names = {r["container"] for r in rows}
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    assert names == set(deployed_containers(plan)) and {f"{JOB}-{n}" for n in (
        "controller", "coordinator", "kv-conductor", "kv-watcher", "kv-pool", "p0-0", "d0-0")} < names
    assert all(r["state"] == "running" for r in rows)
    assert {r["npus"] for r in rows if r["role"] in ("prefill", "decode")} == {"0,1,2,3", "4,5,6,7"}


@pytest.fixture(scope="module")
def broken_config(cluster):
    """The job's config dir after an edit that fails validation (a misspelt key), with the last plan kept beside it."""
    broken = cluster["tmp"] / "broken-config"
    broken.mkdir(exist_ok=True)
    user = json.loads((cluster["config"] / "user_config.json").read_text())
    user["motor_coordinator_config"].setdefault("scheduler_config", {})["schedular_type"] = "kv_cache_affinity"
    env = json.loads((cluster["config"] / "env.json").read_text())
    with pytest.raises(MotorConfigError, match="did you mean 'scheduler_type'"):
        normalize(user, env)
    (broken / "user_config.json").write_text(json.dumps(user, indent=2))
    (broken / "env.json").write_text(json.dumps(env))
    (broken / "motor_plan.json").write_text((cluster["config"] / "motor_plan.json").read_text())
    return broken


def said_by_id(broken_config):
    """What a day-2 playbook run with -e motor_job_id says it read the job from (whitespace folded)."""
    return (f"job {JOB} from -e motor_job_id (the configuration is not read; the containers are found on the hosts by "
            f"their label io.pymotor.job={JOB}; the last plan at {broken_config}/motor_plan.json is of this job)")


def test_status_by_job_id_when_the_config_no_longer_validates(cluster, broken_config):
    """status with -e motor_job_id and a config dir that fails validation: it does not read it, says what it read the
    job from and lists the job's containers, found by their label on the hosts. (collect_logs, stop and destroy run
    by job id on that config dir below.)"""
    status = playbook("status.yml", cluster["inventory"], broken_config, "-e", f"motor_job_id={JOB}")
    assert said_by_id(broken_config) in " ".join(status.stdout.split()), status.stdout[-3000:]
    assert re.search(rf"job {JOB}: \d+ container\(s\)", status.stdout) and f"{JOB}-coordinator" in status.stdout


def readme_site_commands() -> list[str]:
    """The README's real-site quick start from the plan on the site to the checks, as written: the plan line of step 2
    after "# then the same on your site", and every bash block of steps 5 (deploy), 6 (first request), 7 (status,
    verify). Steps 1 and 4 are the simulated hosts and the stand-in image of the fixture."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quick start on a real site", 1)[1].split("\n## ", 1)[0]
    install, later = quick.split("### 5. Deploy", 1)
    step2 = re.search(r"```bash\n(.*?)```", install.split("### 2. ", 1)[1], re.S).group(1)
    site = step2.split("# then the same on your site", 1)[1].split("\n", 1)[1]
    return [site] + re.findall(r"```bash\n(.*?)```", later, re.S)


def test_readme_quick_start_runs_as_written(cluster, tmp_path):
    """The README's site commands with its placeholders replaced by this cluster's (inventory, configuration
    directory, image tag, coordinator address): the plan, a deploy re-run that changes nothing, the first curl
    answered through the coordinator, status and verify; each playbook names the job and configuration first."""
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    script = "\n".join(readme_site_commands())
    for placeholder, value in (("inventory.yml", str(cluster["inventory"])), ("/srv/pymotor/my-job", str(cluster["config"])),
                               ("<tag>", IMAGE), ("http://192.0.2.10:1025", plan["coordinator"]["url"])):
        assert placeholder in script, placeholder
        script = script.replace(placeholder, value)
    assert "<" not in script.replace("<<", ""), script  # every placeholder has a value here
    (tmp_path / "playbooks").symlink_to(REPO / "playbooks")  # as in a clone; the plan file lands in tmp_path
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, env=support.ansible_env(),
                          capture_output=True, text=True, timeout=1200, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:] + proc.stderr[-2000:]
    runs = out.split("PLAY [Validate the PyMotor configuration]")[1:]
    assert len(runs) == 4, out[-3000:]  # plan, deploy, status, verify
    assert all(f"job {JOB} from {cluster['config']}" in re.sub(r"\s+", " ", run) for run in runs), out[-6000:]
    deploy = runs[1]
    hosts_recap = [line for line in deploy[deploy.index("PLAY RECAP"):].splitlines()[1:]
                   if "ok=" in line and not line.startswith("localhost")]  # the controller writes its own plan file
    assert "all deploy end." in deploy and hosts_recap and recap_changed("\n".join(hosts_recap)) == 0, deploy[-4000:]
    # curl's answer: the JSON object printed between the deploy's recap and the status run
    answer, dummy = json.JSONDecoder().raw_decode(deploy[deploy.index('{', deploy.rindex("PLAY RECAP")):])
    assert answer["choices"][0]["message"]["content"], answer
    assert "checks passed, 0 failed" in runs[3], runs[3][-4000:]


def ctl(cluster):
    return [h for h in cluster["hosts"] if h["name"].endswith("-ctl")][0]


def ctl_name(cluster):
    return ctl(cluster)["name"]


def conductor(cluster, method, path, body=None):
    """Call the KV conductor on the control host (host network) like a client."""
    resp = requests.request(method, f"http://{ctl(cluster)['ip']}:13333{path}", json=body, timeout=5)
    assert resp.status_code == 200, resp.text
    return resp.json()


def failed_verify(cluster, name):
    report_path = cluster["tmp"] / f"{name}.json"
    result = playbook("verify.yml", cluster["inventory"], cluster["config"], "-e", f"motor_verify_report={report_path}",
                      check=False)
    assert result.returncode != 0
    report = json.loads(report_path.read_text())
    return report, {c["check"] + " @ " + c["target"]: c for c in report["checks"] if not c["ok"]}


def ranks_back_within(cluster, count, seconds=60):
    """Seconds until the conductor lists ``count`` registrations again (no command run meanwhile), else fail."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            if len(conductor(cluster, "GET", "/services")["services"]) == count:
                return time.monotonic() - started
        except (requests.RequestException, AssertionError):
            pass  # the conductor is still starting
        time.sleep(1)
    pytest.fail(f"the conductor did not list {count} registrations again within {seconds} s")


def test_verify_fails_precisely_when_the_engines_kv_events_are_cut(cluster):
    """The conductor stops following the prefill engine's events (its ranks unregistered, as after a conductor
    restart, with the KV watcher stopped so that nothing repairs it): verify fails on the registrations and on every
    prefix, saying the conductor matched nothing. Then the watcher starts again and restores them from what it
    remembered (its state in its own filesystem), with no other command."""
    rc, out = simctl.host_exec(ctl_name(cluster), f"docker stop {JOB}-kv-watcher")
    assert rc == 0, out
    services = conductor(cluster, "GET", "/services")["services"]
    assert len(services) == 2
    for svc in services:
        conductor(cluster, "POST", "/unregister", {"instance_id": svc["InstanceID"], "dp_rank": svc["DPRank"]})
    try:
        report, failed = failed_verify(cluster, "events-cut")
        assert failed["conductor lists every prefill DP rank @ kv_conductor"]["detail"].startswith("0/2 registered")
        assert failed[f"conductor registrations of the pod's DP ranks @ {JOB}-p0-0"]["detail"] == "0/2 registered"
        prefixes = report["affinity"]["prefixes"]
        assert prefixes and all(p["verdict"] == "fail" and p["holder"] is None for p in prefixes)
        assert all("the conductor matched no token of the prefix" in p["reasons"][0] for p in prefixes)
        assert {k.split(" @ ")[0] for k in failed} == {
            "container running with the planned image", "conductor lists every prefill DP rank",
            "conductor registrations of the pod's DP ranks",
            "affinity: repeats of a shared prefix go to the instance holding it",
            "affinity: fraction of repeats served with the cached prefix"}
    finally:
        rc, out = simctl.host_exec(ctl_name(cluster), f"docker start {JOB}-kv-watcher")
        assert rc == 0, out
    ranks_back_within(cluster, 2)
    restored = {(s["InstanceID"], s["DPRank"], s["Endpoint"], s["ReplayEndpoint"]) for s in
                conductor(cluster, "GET", "/services")["services"]}
    assert restored == {(s["InstanceID"], s["DPRank"], s["Endpoint"], s["ReplayEndpoint"]) for s in services}
    playbook("verify.yml", cluster["inventory"], cluster["config"], "-e",
             f"motor_verify_report={cluster['tmp'] / 'restored.json'}")


def test_verify_fails_precisely_when_the_conductor_is_stopped(cluster):
    rc, out = simctl.host_exec(ctl_name(cluster), f"docker stop {JOB}-kv-conductor")
    assert rc == 0, out
    report, failed = failed_verify(cluster, "conductor-stopped")
    assert "conductor /services unreadable" in failed["conductor lists every prefill DP rank @ kv_conductor"]["detail"]
    assert f"container running with the planned image @ {ctl_name(cluster)}/{JOB}-kv-conductor" in failed
    prefixes = report["affinity"]["prefixes"]
    assert prefixes and all(p["verdict"] == "unknown" for p in prefixes)
    assert all(p["reasons"][0].startswith("conductor /query: no answer") for p in prefixes)


def test_conductor_back_empty_is_repaired_without_a_command_and_a_rerun_passes(cluster):
    """The conductor stopped above comes back empty (what its restart policy does after a crash): the KV watcher
    registers every prefill DP rank again within 60 s, with nothing run; a deploy re-run then changes nothing."""
    rc, out = simctl.host_exec(ctl_name(cluster), f"docker start {JOB}-kv-conductor")
    assert rc == 0, out
    took = ranks_back_within(cluster, 2)
    assert took < 60
    rerun = playbook("deploy.yml", cluster["inventory"], cluster["config"], "-e", "motor_service_ready_timeout=240")
    assert recap_changed(rerun.stdout) == 0, rerun.stdout[-3000:]
    playbook("verify.yml", cluster["inventory"], cluster["config"], "-e",
             f"motor_verify_report={cluster['tmp'] / 'healed.json'}")


def test_collect_logs_masks_secrets(cluster, broken_config):
    """By job id, the config dir failing validation (issue 45): the bundle needs nothing of the configuration."""
    dest = cluster["tmp"] / "bundles"
    logs = playbook("collect_logs.yml", cluster["inventory"], broken_config, "-e", f"motor_job_id={JOB}",
                    "-e", f"motor_logs_dest={dest}")
    assert said_by_id(broken_config) in " ".join(logs.stdout.split())
    archives = list(dest.glob(f"pymotor-logs-{JOB}-*.tar.gz"))
    assert len(archives) == 1 and (archives[0].stat().st_mode & 0o777) == 0o600
    with tarfile.open(archives[0]) as tar:
        names = tar.getnames()
        contents = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert any(n.endswith(f"logs/{JOB}-coordinator.log") for n in names)
    assert any(n.endswith(f"{JOB}-p0-0/user_config.json") for n in names)
    assert any(n.endswith("npu-smi-info.txt") for n in names) and any(n.endswith("docker-info.txt") for n in names)
    for secret in (SECRET, TLS_KEY, TLS_PASSWORD):
        assert secret.encode() not in contents, secret
    assert b"********" in contents
    with tarfile.open(archives[0]) as tar:
        config = next(m for m in tar.getmembers() if m.name.endswith(f"{JOB}-p0-0/user_config.json"))
        masked = json.loads(tar.extractfile(config).read())
    tls = masked["motor_deploy_config"]["tls_config"]
    assert tls["mgmt_tls_config"]["key_file"] == tls["mgmt_tls_config"]["passwd_file"] == "********"
    assert tls["infer_tls_config"]["passwd_file"] == "********"


def test_stop_is_idempotent(cluster, broken_config):
    first = playbook("stop.yml", cluster["inventory"], cluster["config"])
    assert recap_changed(first.stdout) == 2  # one stop per host (every tier of a host in one module run)
    # the second by job id, the config dir failing validation (issue 45): same job, nothing left to stop
    second = playbook("stop.yml", cluster["inventory"], broken_config, "-e", f"motor_job_id={JOB}")
    assert said_by_id(broken_config) in " ".join(second.stdout.split())
    assert recap_changed(second.stdout) == 0
    ctl = [h for h in cluster["hosts"] if h["name"].endswith("-ctl")][0]["name"]
    _, out = simctl.host_exec(ctl, f"docker ps -a --filter label=io.pymotor.job={JOB} --format '{{{{.State}}}}'")
    assert out.split() and set(out.split()) == {"exited"}


def test_destroy_needs_confirmation_and_spares_other_jobs(cluster, broken_config):
    engine = [h for h in cluster["hosts"] if not h["name"].endswith("-ctl")][0]["name"]
    rc, out = simctl.host_exec(engine, f"docker run -d --name decoy-other-job --label io.pymotor.job=other-job "
                                       f"--label io.pymotor.role=prefill --entrypoint sleep {IMAGE} 600")
    assert rc == 0, out
    refused = playbook("destroy.yml", cluster["inventory"], cluster["config"], check=False)
    assert refused.returncode != 0 and "motor_destroy_confirm" in refused.stdout
    wrong = playbook("destroy.yml", cluster["inventory"], cluster["config"], "-e", "motor_destroy_confirm=other-job",
                     check=False)
    assert wrong.returncode != 0
    # by job id, the config dir failing validation (issue 45): nothing of the config is needed to remove the job
    destroyed = playbook("destroy.yml", cluster["inventory"], broken_config, "-e", f"motor_job_id={JOB}",
                         "-e", f"motor_destroy_confirm={JOB}")
    assert said_by_id(broken_config) in " ".join(destroyed.stdout.split())
    for host in cluster["hosts"]:
        _, out = simctl.host_exec(host["name"], f"docker ps -a --filter label=io.pymotor.job={JOB} -q")
        assert out.strip() == ""
        rc, _ = simctl.host_exec(host["name"], f"test -e /etc/pymotor/{JOB}")
        assert rc != 0
    _, out = simctl.host_exec(engine, "docker ps --filter name=decoy-other-job --format '{{.Names}}'")
    assert out.strip() == "decoy-other-job"
