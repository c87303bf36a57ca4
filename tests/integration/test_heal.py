"""Self-healing with no command run, PD hybrid (the seed_pd_hybrid config: 1 union instance, KV pool and conductor) on a
simulated A3 engine host and a control host (prefix pymotor-heal). The stand-in controller re-sends instances as
upstream's does (a SET only when some instance has role prefill), so without the controller's healer a restarted
coordinator of a hybrid job stays ``ready: false`` for good.

The tests run in file order on one cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import simctl
from fault_support import REPO
from support import playbook, recap_changed, wait_for

PREFIX = "pymotor-heal" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "heal-job"
IMAGE = "local/pymotor-heal:test"
FAST = ("-e", "motor_service_ready_timeout=240", "-e", "motor_service_ready_delay=1")
HEAL_WITHIN = 120  # the bound: a restarted coordinator of a PD-hybrid job ready and answering chat

pytestmark = pytest.mark.docker


def get_json(url: str, body: dict | None = None, timeout: float = 5):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("heal")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)
    config = tmp / "config"
    config.mkdir()
    user = json.loads((REPO / "examples/seed_pd_hybrid/user_config.json").read_text())
    user["motor_deploy_config"].update(job_id=JOB, image_name=IMAGE)
    (config / "user_config.json").write_text(json.dumps(user, indent=2))
    (config / "env.json").write_text((REPO / "examples/seed_pd_hybrid/env.json").read_text())
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A3", PREFIX, control=True)
        simctl.load_image(PREFIX, IMAGE)
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        playbook("deploy.yml", inventory, config, *FAST, image=IMAGE)
        plan = json.loads((config / "motor_plan.json").read_text())
        coordinator = plan["coordinator"]
        ctl = next(c["host"] for c in plan["containers"] if c["role"] == "coordinator")
        yield {"hosts": hosts, "inventory": inventory, "config": config, "ctl": ctl,
               "readiness": f"http://{coordinator['ip']}:{coordinator['mgmt_port']}/readiness",
               "chat": f"http://{coordinator['ip']}:{coordinator['infer_port']}/v1/chat/completions",
               "model": plan.get("served_model_name") or user["motor_engine_union_config"]["engine_config"].get(
                   "served_model_name", "")}
    finally:
        simctl.down(PREFIX)


def serving(cluster) -> bool:
    status, body = get_json(cluster["readiness"])
    if not (status == 200 and body and body.get("ready")):
        return False
    status, _ = get_json(cluster["chat"], {"model": cluster["model"], "max_tokens": 4,
                                           "messages": [{"role": "user", "content": "still there?"}]}, timeout=30)
    return status == 200


def test_restarted_coordinator_of_a_hybrid_job_heals_without_a_command(cluster):
    assert serving(cluster), "the deployed job does not serve"
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rc, out = simctl.host_exec(cluster["ctl"], f"docker restart {JOB}-coordinator")
    assert rc == 0, out
    start = time.monotonic()
    time.sleep(3)
    assert not serving(cluster), "the restarted coordinator serves at once: nothing to heal"
    wait_for(lambda: serving(cluster), timeout=HEAL_WITHIN, interval=2,
             what=f"the restarted coordinator ready and answering chat within {HEAL_WITHIN} s")
    took = time.monotonic() - start
    _, logs = simctl.host_exec(cluster["ctl"], f"docker logs --since {since} {JOB}-controller 2>&1")
    actions = [line for line in logs.splitlines() if "motor-healer: restarting the controller" in line]
    assert "SET event skipped" in logs and actions, logs[-3000:]  # upstream's rule, then the healer
    print(f"coordinator restart healed in {took:.0f} s: {actions[-1]}")


def test_deploy_rerun_after_the_heal_passes_with_nothing_changed(cluster):
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, image=IMAGE)
    assert recap_changed(result.stdout) == 0, result.stdout[-4000:]


def test_the_running_image_under_a_new_tag_restarts_nothing(cluster):
    """A retag (same image id, new name) deploys with 0 changed and every container keeps running (issue 48: before,
    every container restarted at once: "role settings changed")."""
    retag = IMAGE.rsplit(":", 1)[0] + ":release"
    started = "docker ps -a --filter label=io.pymotor.job=%s --format '{{.Names}}' | sort | xargs docker inspect " \
              "-f '{{.Name}} {{.State.StartedAt}}'" % JOB
    before = {}
    for host in cluster["hosts"]:
        rc, out = simctl.host_exec(host["name"], f"docker tag {IMAGE} {retag}")
        assert rc == 0, out
        before[host["name"]] = simctl.host_exec(host["name"], started)[1]
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, image=retag)
    assert recap_changed(result.stdout) == 0, result.stdout[-4000:]
    assert {h["name"]: simctl.host_exec(h["name"], started)[1] for h in cluster["hosts"]} == before
    assert all(out.strip() for out in before.values())
