"""Zero-downtime image upgrade and rollback under steady chat load (issue 33): the seed_pd_separation config scaled to
2 prefill + 2 decode instances on two simulated 800I_A2 engine hosts and a control host (prefix pymotor-upgrade). The
fake engines take MOTOR_SIM_LOAD_SECONDS=60 (env.json's engine sections) before they answer, as a model load does, so
an outage cannot hide. A client thread sends chat requests back to back through the coordinator during each roll;
every failed request must fall inside the control plane's unavailable window the deploy prints.

The tests run in file order on one cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import simctl
from fault_support import REPO
from roll_load import classify, post_chat, under_load, window
from support import playbook, recap_changed

PREFIX = "pymotor-upgrade" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "upgrade-job"
OLD = "local/pymotor-upgrade:1"
NEW = "local/pymotor-upgrade:2"
BAD = "local/pymotor-upgrade:bad"  # its engines never answer: a model load that never ends
LOAD_SECONDS = 60
FAST = ("-e", "motor_service_ready_timeout=400", "-e", "motor_service_ready_delay=1")

pytestmark = pytest.mark.docker


def new_image(base: str, tag: str, extra: str = "") -> None:
    """A second image of the same content with its own id (a label), as a new release would have."""
    with tempfile.TemporaryDirectory() as ctx:
        (Path(ctx) / "Dockerfile").write_text(f'FROM {base}\nLABEL io.pymotor.test-release="{tag}"\n{extra}')
        subprocess.run(["docker", "build", "-q", "-t", tag, ctx], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "DOCKER_BUILDKIT": "0"})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("upgrade")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), OLD],
                   check=True, capture_output=True, text=True)
    new_image(OLD, NEW)
    new_image(OLD, BAD, "RUN printf '#!/bin/sh\\nexec sleep infinity\\n' > /usr/local/bin/engine_server\n")
    config = tmp / "config"
    config.mkdir()
    seed = REPO / "examples/seed_pd_separation"
    user = json.loads((seed / "user_config.json").read_text())
    user["motor_deploy_config"].update(job_id=JOB, image_name=OLD, p_instances_num=2, d_instances_num=2)
    env = json.loads((seed / "env.json").read_text())
    for role in ("prefill", "decode"):
        env[f"motor_engine_{role}_env"]["MOTOR_SIM_LOAD_SECONDS"] = LOAD_SECONDS
    (config / "user_config.json").write_text(json.dumps(user, indent=2))
    (config / "env.json").write_text(json.dumps(env, indent=2))
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(2, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, [OLD, NEW, BAD])
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        playbook("deploy.yml", inventory, config, *FAST, image=OLD)
        plan = json.loads((config / "motor_plan.json").read_text())
        coordinator = plan["coordinator"]
        yield {"hosts": hosts, "inventory": inventory, "config": config,
               "chat": f"http://{coordinator['ip']}:{coordinator['infer_port']}/v1/chat/completions",
               "model": user["motor_engine_prefill_config"]["engine_config"]["served_model_name"]}
    finally:
        simctl.down(PREFIX)


def roll_under_load(cluster, image: str, *extra: str, check: bool = True) -> tuple:
    """Deploy ``image`` while a client sends chat back to back; the counts and the playbook's result."""
    assert post_chat(cluster["chat"], cluster["model"]) == 200, "the job does not serve before the roll"
    results, result = under_load(cluster["chat"], cluster["model"], lambda: playbook(
        "deploy.yml", cluster["inventory"], cluster["config"], *FAST, *extra, image=image, timeout=1500, check=check))
    printed = window(result.stdout)
    assert printed, "no control plane window printed:\n" + result.stdout[-4000:]
    counts, outside = classify(results, printed, image)
    print("roll to %s: %s" % (image, counts))
    assert "image changed" in result.stdout and "rolling" in result.stdout, result.stdout[-4000:]
    assert not outside, f"{len(outside)} request(s) failed outside the control plane's window {counts}: {outside[:10]}"
    assert len(results) > 100, counts  # the client really ran through the roll
    return counts, result


def container_images(cluster) -> dict:
    out = {}
    for host in cluster["hosts"]:
        _, text = simctl.host_exec(host["name"], "docker ps --filter label=io.pymotor.job --format '{{.Names}} {{.Image}}'")
        out.update(line.split() for line in text.splitlines() if len(line.split()) == 2)
    return out


def engine_images(cluster) -> set:
    out = set()
    for host in cluster["hosts"]:
        _, text = simctl.host_exec(host["name"], "docker ps --filter label=io.pymotor.job --format '{{.Image}}'")
        out.update(line.strip() for line in text.splitlines() if line.strip())
    return out


def test_upgrade_rolls_with_no_failed_request_outside_the_control_plane_window(cluster):
    counts, result = roll_under_load(cluster, NEW)
    assert engine_images(cluster) == {NEW}
    # each instance (the only one of its role on its host) left the coordinator's routing before its stop: the del
    # was answered 200 (roll_drain.yml says so for every instance it was not)
    text = " ".join(result.stdout.split())
    assert "was not taken out of the coordinator's routing" not in text, result.stdout[-4000:]
    assert text.count("Take the instance out of the coordinator's routing] *") == 4, result.stdout[-4000:]
    for host in cluster["hosts"]:  # the previous image stays on every host
        rc, out = simctl.host_exec(host["name"], f"docker image inspect --format ok {OLD}")
        assert rc == 0, f"{OLD} gone from {host['name']}: {out}"


def test_rerun_after_the_upgrade_changes_nothing(cluster):
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, image=NEW)
    assert recap_changed(result.stdout) == 0, result.stdout[-4000:]


def test_rollback_rolls_the_same_way(cluster):
    roll_under_load(cluster, OLD)
    assert engine_images(cluster) == {OLD}


def test_failed_upgrade_stops_the_roll_leaves_the_old_instances_serving_and_says_what_to_run(cluster):
    counts, result = roll_under_load(cluster, BAD, "-e", "motor_service_ready_timeout=90", check=False)
    text = " ".join(result.stdout.split())
    assert result.returncode != 0, result.stdout[-4000:]
    assert "The upgrade stopped at" in text and f"-e motor_image={OLD}" in text, result.stdout[-4000:]
    images = container_images(cluster)
    engines = {name: image for name, image in images.items() if re.search(r"-[pd]\d+-\d+$", name)}
    assert sorted(engines.values()).count(BAD) == 1 and sorted(engines.values()).count(OLD) == 3, engines
    assert post_chat(cluster["chat"], cluster["model"]) == 200, "the old instances do not serve"
    print("failed upgrade stopped with", engines, counts)
    back, _ = roll_under_load(cluster, OLD)
    assert engine_images(cluster) == {OLD}
    print("rollback after the failed upgrade:", back)
