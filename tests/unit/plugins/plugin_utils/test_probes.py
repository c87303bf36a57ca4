"""reconcile/probes.py (Docker health checks from upstream's probes), plugin_utils/probe.py (the probe that runs in the
container) and the create body's Healthcheck (module_utils/motor_start.py)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_start import create_body, healthcheck_body
from ansible_collections.pymotor.ascend.plugins.plugin_utils import probe
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.probes import (
    PROBE_CONFIG,
    PROBE_SCRIPT,
    healthcheck,
    probe_files,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import own_files

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
HOSTS = {
    "h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]},
}


def seed_plan(seed="seed_pd_separation", tls=False):
    user = json.loads((EXAMPLES / seed / "user_config.json").read_text())
    user["motor_deploy_config"]["hardware_type"] = "800I_A2"
    if tls:
        user["motor_deploy_config"]["tls_config"] = {"mgmt_tls_config": {
            "enable_tls": True, "ca_file": "/c/ca.pem", "cert_file": "/c/cert.pem", "key_file": "/c/key.pem"}}
    return build_plan(normalize(user, json.loads((EXAMPLES / seed / "env.json").read_text())), HOSTS)


def test_only_the_roles_upstream_probes_get_a_health_check_with_its_thresholds():
    plan = seed_plan()
    checks = {c["role"]: healthcheck(c) for c in plan["containers"]}
    assert {role for role, check in checks.items() if check} == {"controller", "coordinator"}
    controller = next(c for c in plan["containers"] if c["role"] == "controller")
    # controller_template.yaml: livenessProbe period 10 / timeout 30 / failureThreshold 5; startupProbe 10 x 100
    assert checks["controller"] == {
        "test": ["CMD", "python3", controller["configmap_path"] + "/" + PROBE_SCRIPT,
                 controller["configmap_path"] + "/" + PROBE_CONFIG],
        "interval": 10, "timeout": 30, "retries": 5, "start_period": 1000}
    assert healthcheck_body(checks["controller"]) == {
        "Test": checks["controller"]["test"], "Interval": 10 * 10 ** 9, "Timeout": 30 * 10 ** 9, "Retries": 5,
        "StartPeriod": 1000 * 10 ** 9}


def test_probe_targets_each_roles_liveness_on_its_api_port_with_the_management_tls():
    plan = seed_plan(tls=True)
    files = probe_files(plan)
    by_role = {c["role"]: c for c in plan["containers"]}
    for role, key in (("controller", "api"), ("coordinator", "mgmt")):
        c = by_role[role]
        config = json.loads(files[c["name"]][PROBE_CONFIG])
        assert config["target"]["url"] == "https://%s:%s/liveness" % (c["ip"], c["port_map"][key])
        assert config["target"]["tls"]["ca_file"] == "/c/ca.pem" and config["target"]["tls"]["check_hostname"] is False
    # the files count in the config hash with the healer's, for the controller
    assert PROBE_SCRIPT in own_files(plan, "")[by_role["controller"]["name"]]
    assert PROBE_SCRIPT in own_files(plan, "")[by_role["coordinator"]["name"]]


def test_create_body_carries_the_health_check_only_when_asked():
    spec = {"name": "c", "image": "i", "healthcheck": {"test": ["CMD", "true"], "interval": 1, "timeout": 2,
                                                       "retries": 3, "start_period": 4}}
    assert create_body(spec)["Healthcheck"]["Test"] == ["CMD", "true"]
    assert "Healthcheck" not in create_body(dict(spec, healthcheck=None))


def test_probe_script_alone_exits_0_on_200_and_1_otherwise(tmp_path):
    codes = {"/liveness": 200, "/dead": 503}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(codes.get(self.path, 404))
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = tmp_path / PROBE_SCRIPT
    script.write_text(Path(probe.__file__).read_text())
    try:
        results = {}
        for path in ("/liveness", "/dead"):
            config = tmp_path / ("%s.json" % path.strip("/"))
            config.write_text(json.dumps({"target": {"url": "http://127.0.0.1:%d%s" % (server.server_port, path),
                                                     "tls": None}, "timeout": 2}))
            results[path] = subprocess.run([sys.executable, "-I", str(script), str(config)], capture_output=True,
                                           text=True, check=False).returncode
    finally:
        server.shutdown()
        server.server_close()
    assert results == {"/liveness": 0, "/dead": 1}
    assert probe.alive({"url": "http://127.0.0.1:%d/liveness" % server.server_port, "tls": None}, 1) is False  # gone
