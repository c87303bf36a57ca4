"""playbooks/monitoring.yml against a deployed simulated job, scraped by a real Prometheus (Debian's package, on
loopback): every target of the job up, the prefix-cache hit-ratio series non-empty after a few requests, the KV
watcher's registrations equal to the prefill DP ranks; after a scale-out (deploy.yml refreshes the files) the new
instance's targets appear and are up. Own sim hosts (prefix pymotor-mon)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import requests
import yaml

import simctl
import support
from support import REPO

PREFIX = "pymotor-mon" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")
IMAGE = "local/pymotor-mon:test"
JOB = "mon-job"
PROMETHEUS = shutil.which("prometheus")
SETTINGS = {"scrape_interval": "2s", "hit_ratio_window": "1m"}

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(PROMETHEUS is None, reason="prometheus absent (Debian package prometheus: "
                                                            "scripts/ensure_tools.sh)")]

playbook = functools.partial(support.playbook, image=IMAGE)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(config_dir, p_instances):
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    user["motor_deploy_config"].update(job_id=JOB, image_name=IMAGE, p_instances_num=p_instances)
    (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
    (config_dir / "env.json").write_text((REPO / "examples/seed_pd_separation/env.json").read_text())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("monitoring")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)
    config_dir = tmp / "config"
    config_dir.mkdir()
    write_config(config_dir, 1)
    simctl.down(PREFIX)
    prometheus = None
    try:
        hosts = simctl.up(2, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, IMAGE)
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        playbook("deploy.yml", inventory, config_dir, "-e", "motor_service_ready_timeout=240")
        mon = tmp / "mon"
        playbook("monitoring.yml", inventory, config_dir, "-e", f"motor_monitoring_dir={mon}",
                 "-e", json.dumps({"motor_operations_monitoring_settings": SETTINGS}))
        port = free_port()
        log = open(tmp / "prometheus.log", "w")  # noqa: SIM115 (closed below)
        prometheus = subprocess.Popen(
            [PROMETHEUS, f"--config.file={mon}/prometheus/{JOB}.yml", f"--storage.tsdb.path={tmp}/tsdb",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        yield {"hosts": hosts, "inventory": inventory, "config": config_dir, "tmp": tmp, "mon": mon,
               "api": f"http://127.0.0.1:{port}/api/v1", "web": f"http://127.0.0.1:{port}"}
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        simctl.down(PREFIX)


def query(cluster, expr):
    answer = requests.get(cluster["api"] + "/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def active_targets(cluster):
    answer = requests.get(cluster["api"] + "/targets", params={"state": "active"}, timeout=10).json()
    return answer["data"]["activeTargets"]


def wait_all_up(cluster, count, timeout=240):
    deadline = time.time() + timeout
    while True:
        try:
            targets = active_targets(cluster)
        except requests.RequestException:
            targets = []
        if len(targets) == count and all(t["health"] == "up" for t in targets):
            return targets
        if time.time() > deadline:
            pytest.fail("targets not all up: %s" % json.dumps(
                [(t["labels"], t["health"], t.get("lastError")) for t in targets], indent=1))
        time.sleep(2)


def wait_values(cluster, expr, values, timeout=180):
    """Until the query's values are ``values`` (sorted)."""
    deadline = time.time() + timeout
    while True:
        got = sorted(float(r["value"][1]) for r in query(cluster, expr))
        if got == values:
            return
        assert time.time() < deadline, f"{expr}: {got}, expected {values}"
        time.sleep(2)


def chat(plan, prompt):
    body = {"model": "qwen3-8B", "messages": [{"role": "user", "content": prompt}], "max_tokens": 4}  # the example's
    return requests.post(f"{plan['coordinator']['url']}/v1/chat/completions", json=body, timeout=30)


def test_targets_up_hit_ratio_and_scale_out(cluster):
    mon = cluster["mon"]
    targets_file = mon / "targets" / f"{JOB}.json"
    planned = json.loads(targets_file.read_text())
    targets = wait_all_up(cluster, len(planned))
    assert {t["labels"]["role"] for t in targets} == {"coordinator", "controller", "prefill", "decode", "kv_pool",
                                                      "kv_conductor"}
    # the KV watcher's view of the conductor: every prefill DP rank registered
    plan = json.loads((cluster["config"] / "motor_plan.json").read_text())
    watcher = next(c for c in plan["containers"] if c["role"] == "kv_watcher")
    rc, out = simctl.host_exec(watcher["host"], "ss -Hltn")
    assert rc == 0, out
    bound = {line.split()[3].rpartition(":")[0].strip("[]") for line in out.splitlines()
             if line.split()[3].rpartition(":")[2] == str(watcher["port_map"]["metrics"])}
    assert bound == {watcher["ip"]}  # its /metrics on the host's address only, never the wildcard
    ranks = sum(i["dp"] for i in plan["instances"] if i["role"] == "prefill")
    wait_values(cluster, 'motor_kv_conductor_registrations{job="%s"}' % JOB, [ranks])
    # a few requests sharing a long prefix: the hit-ratio recording rule has a series
    prefix = "monitoring prefix " * 200
    for i in range(4):
        assert chat(plan, prefix + str(i)).status_code == 200
    # the first rule evaluations may see only the first request's scrape (all misses: ratio 0): the stand-in engine
    # takes its modelled prefill time per request, so scrapes land between the requests. Wait for the later ones.
    # (deadlines here are generous: they only cost time when the answer never comes, and CI loads 2 cores thrice)
    deadline, ratio = time.time() + 180, None
    while ratio is None or ratio == 0:
        assert time.time() < deadline, f"no hit-ratio series above 0 (last value {ratio})"
        time.sleep(2)
        series = query(cluster, 'motor:prefix_cache_hit_ratio_overall:rate1m{job="%s"}' % JOB)
        ratio = float(series[0]["value"][1]) if series else None
    assert 0 < ratio <= 1
    assert query(cluster, 'motor:prefix_cache_hit_ratio:rate1m{job="%s"}' % JOB)
    # scale out: a second prefill instance; the deploy rewrites the files, Prometheus picks the new targets up
    write_config(cluster["config"], 2)
    playbook("deploy.yml", cluster["inventory"], cluster["config"], "-e", "motor_service_ready_timeout=240",
             "-e", f"motor_monitoring_dir={mon}", "-e", json.dumps({"motor_operations_monitoring_settings": SETTINGS}))
    grown = json.loads(targets_file.read_text())
    assert len(grown) > len(planned)
    targets = wait_all_up(cluster, len(grown))
    assert f"{JOB}-p1" in {t["labels"]["instance"] for t in targets}
    wait_values(cluster, 'motor_kv_conductor_registrations{job="%s"}' % JOB, [2 * ranks])
    rules = yaml.safe_load((mon / "rules" / f"{JOB}.rules.yml").read_text())
    assert "< %d" % (2 * ranks) in json.dumps(rules)
    shot = os.environ.get("MOTOR_MONITORING_SCREENSHOT")
    if shot:  # the README picture: Prometheus' graph page of the hit ratio, in headless Chromium
        chromium = shutil.which("chromium")
        url = cluster["web"] + "/graph?g0.expr=" + requests.utils.quote(
            'motor:prefix_cache_hit_ratio:rate1m{job="%s"}' % JOB) + "&g0.tab=0&g0.range_input=5m"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-extensions", "--window-size=1280,800", "--virtual-time-budget=8000",
                        f"--screenshot={shot}", url], check=True, capture_output=True, timeout=120)
