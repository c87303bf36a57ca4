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
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import simctl
from fault_support import REPO
from support import playbook, recap_changed

PREFIX = "pymotor-upgrade" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
JOB = "upgrade-job"
OLD = "local/pymotor-upgrade:1"
NEW = "local/pymotor-upgrade:2"
BAD = "local/pymotor-upgrade:bad"  # its engines never answer: a model load that never ends
LOAD_SECONDS = 60
FAST = ("-e", "motor_service_ready_timeout=400", "-e", "motor_service_ready_delay=1")
WINDOW = re.compile(r"control plane unavailable window: at most ([0-9.]+) s \((.*?) restarted; from ([0-9.]+)\s+"
                    r"to ([0-9.]+), epoch")

pytestmark = pytest.mark.docker


def post_chat(url: str, model: str) -> int:
    body = json.dumps({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


class Client(threading.Thread):
    """Chat requests back to back through the coordinator: (start, end, status) of each."""

    def __init__(self, url: str, model: str):
        super().__init__(daemon=True)
        self.url, self.model, self.done, self.results = url, model, threading.Event(), []

    def run(self):
        while not self.done.is_set():
            start = time.time()
            status = post_chat(self.url, self.model)
            self.results.append((start, time.time(), status))
            if status != 200:
                time.sleep(0.05)


def longest_gap(results: list) -> float:
    """The longest time in seconds between two answered (200) requests, the client's longest outage."""
    ends = sorted(end for _, end, status in results if status == 200)
    return round(max((b - a for a, b in zip(ends, ends[1:])), default=0.0), 1)


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
    client = Client(cluster["chat"], cluster["model"])
    client.start()
    try:
        result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *FAST, *extra, image=image,
                          timeout=1500, check=check)
    finally:
        client.done.set()
        client.join(timeout=60)
    found = WINDOW.search(" ".join(result.stdout.split()))
    assert found, "no control plane window printed:\n" + result.stdout[-4000:]
    took, restarted, start, end = float(found[1]), found[2], float(found[3]), float(found[4])
    failed = [r for r in client.results if r[2] != 200]
    outside = [r for r in failed if r[1] < start or r[0] > end]
    counts = {"image": image, "requests": len(client.results), "failed": len(failed),
              "failed_outside_window": len(outside), "window_s": round(took, 1), "restarted": restarted,
              "failed_in_window_s": round(max((r[1] for r in failed), default=start) - start, 1),
              "longest_gap_s": longest_gap(client.results)}
    print("roll to %s: %s" % (image, counts))
    assert "image changed" in result.stdout and "rolling" in result.stdout, result.stdout[-4000:]
    assert not outside, f"{len(outside)} request(s) failed outside the control plane's window {counts}: {outside[:10]}"
    assert len(client.results) > 100, counts  # the client really ran through the roll
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
    roll_under_load(cluster, NEW)
    assert engine_images(cluster) == {NEW}
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
