# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The controller-side TLS variables (motor_tls_ca_file, motor_tls_cert_file, motor_tls_key_file,
motor_tls_passwd_file): the targets name the files of tls_config (paths inside the containers); our clients on the
Ansible controller (the motor_wait action: readiness waits, verify's reads, the roll's drain; motor_bench) read the
controller's copies the variables name, each unset one falling back to the section's own path. Checked against a
real mutual-TLS server on 127.0.0.1 with an encrypted client key."""

from __future__ import annotations

import contextlib
import json
import ssl
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.pymotor.ascend.plugins.action.motor_bench import bench_targets
from ansible_collections.pymotor.ascend.plugins.action.motor_wait import ActionModule
from ansible_collections.pymotor.ascend.plugins.plugin_utils import probe
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import (
    CONTROLLER_TLS_VARS,
    controller_targets,
    controller_tls,
    controller_tls_variables,
    service_targets,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.roll_drain import drain_context, roll_drain
from ansible_collections.pymotor.ascend.tests.integration.etcd_tls import pem_ca, pem_leaf
from ansible_collections.pymotor.ascend.tests.unit.local_http import local_server

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers of the neighbouring tests (importlib mode)

from test_roll_drain import HOSTS, SEED, rolling  # noqa: E402

PASSWORD = "FAKE-ctl-keypass-47"  # noqa: S105 (test data)
CONTAINER = {"ca_file": "/etc/pymotor-certs/ca.crt", "cert_file": "/etc/pymotor-certs/server.crt",
             "key_file": "/etc/pymotor-certs/server.key", "passwd_file": "/etc/pymotor-certs/key_pwd.txt"}


def tls_plan():
    user = json.loads((SEED / "user_config.json").read_text())
    user["motor_deploy_config"].update(p_instances_num=2, d_instances_num=1)
    section = dict(CONTAINER, enable_tls=True)
    user["motor_deploy_config"]["tls_config"] = {"mgmt_tls_config": section, "infer_tls_config": dict(section)}
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, one certificate for 127.0.0.1 (server and client use) and its key encrypted with PASSWORD: the
    controller's copies, in a directory of their own."""
    pytest.importorskip("cryptography.x509")
    ca = pem_ca("unit CA")
    leaf = pem_leaf(ca, "unit", ["127.0.0.1"], PASSWORD.encode())
    directory = tmp_path_factory.mktemp("controller-certs")
    (directory / "ca.crt").write_bytes(ca[2])
    (directory / "server.crt").write_bytes(leaf["crt"])
    (directory / "server.key").write_bytes(leaf["key"])
    (directory / "key_pwd.txt").write_text(PASSWORD + "\n")
    return {name: str(directory / base) for name, base in (
        ("motor_tls_ca_file", "ca.crt"), ("motor_tls_cert_file", "server.crt"), ("motor_tls_key_file", "server.key"),
        ("motor_tls_passwd_file", "key_pwd.txt"))}


@contextlib.contextmanager
def mutual_tls_server(pki):
    """https on 127.0.0.1 that asks for a client certificate signed by the CA (as PyMotor's servers with
    tls_config on); GET answers {"ready": true}, POST echoes its body; yields (base URL, list of requests seen)."""
    seen = []

    def answer(method, path, headers, body):
        seen.append((method, path, headers.get("X-Client-Certificate") == "verified"))
        return 200, body if method == "POST" else b'{"ready": true}', {}

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["motor_tls_cert_file"], pki["motor_tls_key_file"], password=PASSWORD)
    context.load_verify_locations(pki["motor_tls_ca_file"])
    context.verify_mode = ssl.CERT_REQUIRED
    with local_server(answer, tls=context) as base:
        yield base, seen


def run_motor_wait(args, task_vars):
    """The pymotor.ascend.motor_wait action as the controller's worker runs it (no module, no connection use)."""
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action="pymotor.ascend.motor_wait",
                           get_name=lambda: "wait")
    action = ActionModule(task, SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp")), SimpleNamespace(), None,
                          SimpleNamespace(template=lambda value: value), None)
    return action.run(task_vars=task_vars)


def test_an_unset_variable_keeps_the_sections_path_and_a_set_one_names_the_controllers_copy():
    tls = dict(CONTAINER, check_hostname=True)
    assert controller_tls(tls, {}) == tls  # today's behaviour: the controller reads the sections' paths
    assert controller_tls(tls, {"motor_tls_ca_file": "", "motor_tls_key_file": None}) == tls
    assert controller_tls(None, {"motor_tls_ca_file": "/x"}) is None  # plain http stays plain
    mixed = controller_tls(tls, {"motor_tls_ca_file": "/ctl/ca.crt", "motor_tls_passwd_file": "~/pwd"})
    assert mixed["ca_file"] == "/ctl/ca.crt" and mixed["passwd_file"].endswith("/pwd")
    assert not mixed["passwd_file"].startswith("~")  # a path of the controller's user, expanded
    assert {k: mixed[k] for k in ("cert_file", "key_file", "check_hostname")} == {
        "cert_file": CONTAINER["cert_file"], "key_file": CONTAINER["key_file"], "check_hostname": True}
    assert tls == dict(CONTAINER, check_hostname=True)  # the plan's target is not changed in place
    assert set(CONTROLLER_TLS_VARS) == {"ca_file", "cert_file", "key_file", "passwd_file"}


def test_the_variables_are_taken_templated_from_the_task_vars():
    task_vars = {"motor_tls_ca_file": "{{ d }}/ca.crt", "motor_tls_cert_file": "", "other": "x"}
    out = controller_tls_variables(task_vars, lambda value: value.replace("{{ d }}", "/ctl"))
    assert out == {"motor_tls_ca_file": "/ctl/ca.crt", "motor_tls_cert_file": "", "motor_tls_key_file": None,
                   "motor_tls_passwd_file": None}


def test_every_tls_target_of_the_controllers_clients_is_mapped_and_a_body_is_data(pki):
    plan = tls_plan()
    targets = service_targets(plan)
    args = {"checks": [{"name": "ready", "tls": targets["coordinator"]["tls"]}],
            "stalls": [{"node_manager": next(iter(targets["node_managers"].values())),
                        "engines": list(targets["engines"].values())[:2]}],
            "reads": {"drain": {"routes": targets["routes"], "refresh": dict(targets["coordinator"], body={"tls": "x"})}}}
    mapped = controller_targets(args, pki)
    found = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "tls" and isinstance(item, dict):
                    found.append(item)
                elif key != "body":
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(mapped)
    assert len(found) == 5  # the check, the node manager, two engines, the refresh
    expected = {field: pki[name] for field, name in CONTROLLER_TLS_VARS.items()}
    assert all({k: t[k] for k in expected} == expected and t["check_hostname"] for t in found)
    assert mapped["reads"]["drain"]["routes"]["tls"] is None  # upstream's observability port: plain http
    assert mapped["reads"]["drain"]["refresh"]["body"] == {"tls": "x"}
    assert targets["coordinator"]["tls"]["ca_file"] == CONTAINER["ca_file"]  # the plan's targets untouched


def test_the_roll_drain_and_the_benchmark_read_the_controllers_copies(pki):
    plan = tls_plan()
    inst, members = next((i, m) for i, m in rolling(plan) if i["role"] == "prefill")
    drain = roll_drain(plan, inst, members, drain_context(plan))
    assert drain["how"] == "del" and drain["refresh"]["tls"]["key_file"] == CONTAINER["key_file"]  # the plan: containers'
    assert controller_targets({"reads": {"drain": {"refresh": drain["refresh"]}}}, pki)[
        "reads"]["drain"]["refresh"]["tls"]["key_file"] == pki["motor_tls_key_file"]
    bench = bench_targets(plan, "FAKE-key", pki)
    tls = [bench["inference"]["tls"], bench["tokenize"]["tls"]] + [t["tls"] for ts in bench["metrics"].values() for t in ts]
    assert len(tls) >= 4 and all(t["ca_file"] == pki["motor_tls_ca_file"] and t["passwd_file"] == pki[
        "motor_tls_passwd_file"] for t in tls)
    assert bench_targets(plan, "FAKE-key")["inference"]["tls"]["ca_file"] == CONTAINER["ca_file"]  # unset: as before


def test_motor_wait_reaches_a_mutual_tls_server_with_the_controllers_encrypted_key_only_through_the_variables(pki):
    """The targets name container paths that do not exist here: without the variables nothing answers (the TLS
    setup fails: -1); with them the check holds, the GET and the POST (the roll's del) are answered over mutual TLS."""
    with mutual_tls_server(pki) as (base, seen):
        tls = dict(CONTAINER, check_hostname=True)  # a read target as service_targets gives it
        args = {"checks": [{"name": "the coordinator reports ready", "url": base + "/readiness", "until": "ready",
                            "timeout": 3, "tls": dict(CONTAINER)}],  # a check's as decide.py gives it
                "interval": 0.2, "request_timeout": 2,
                "reads": {"drain": {"routes": {"url": base + "/metrics?type=dp", "tls": tls, "text": True},
                                    "refresh": {"url": base + "/instances/refresh", "tls": tls,
                                                "body": {"event": "del"}}}}}
        without = run_motor_wait(json.loads(json.dumps(args)), {})
        assert without["failed"] and without["answers"]["drain"]["refresh"]["status"] == -1
        assert not seen  # no request got through the TLS handshake
        result = run_motor_wait(json.loads(json.dumps(args)), dict(pki, motor_api_key=""))
    assert not result.get("failed"), result
    assert [c["name"] for c in result["checks"]] == ["the coordinator reports ready"]
    assert result["answers"]["drain"]["refresh"] == {"status": 200, "json": {"event": "del"}, "error": ""}
    assert result["answers"]["drain"]["routes"]["text"] == '{"ready": true}'  # asked for with text: true
    assert sorted(seen) == sorted([("GET", "/readiness", True), ("GET", "/metrics?type=dp", True),
                                   ("POST", "/instances/refresh", True)])
    assert all(PASSWORD not in json.dumps(r) for r in (result, without))


def test_the_deploy_names_a_tls_file_the_controller_lacks_before_anything_changes(pki):
    """motor_decide's problems: a file a controller-side client would open and the controller does not have."""
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import controller_tls_problems

    plan = tls_plan()
    assert controller_tls_problems(plan, pki) == []  # every copy named and present
    unset = controller_tls_problems(plan, {})  # the sections' paths, absent here: each named once, with the fix
    assert len(unset) == 3 and all("no file on the Ansible controller" in p for p in unset)
    assert unset[0].startswith("motor_deploy_config.tls_config.mgmt_tls_config.ca_file: /etc/pymotor-certs/ca.crt")
    assert "name the copy in motor_tls_ca_file" in unset[0]
    assert not [p for p in unset if "passwd_file" in p]  # a missing passwd_file is a key that is not encrypted
    wrong = controller_tls_problems(plan, dict(pki, motor_tls_passwd_file="/nowhere/key_pwd.txt"))
    assert wrong == ["motor_tls_passwd_file: /nowhere/key_pwd.txt is no file on the Ansible controller, whose clients "
                     "(readiness waits, the roll's drain, verify, benchmark) open it"]
    plain = json.loads(json.dumps(plan))
    for c in plain["containers"]:
        c["user_config"]["motor_deploy_config"]["tls_config"] = {}
    assert controller_tls_problems(plain, {}) == []  # TLS off: nothing to open


def test_the_health_check_probe_answers_over_mutual_tls_with_the_encrypted_key(pki):
    """probe.py (Docker's health check, raw socket and ``ssl`` only for https): 200 over mutual TLS with the
    password file, the host name checked against the certificate; a path that answers 404 is not alive."""
    tls = {"ca_file": pki["motor_tls_ca_file"], "cert_file": pki["motor_tls_cert_file"],
           "key_file": pki["motor_tls_key_file"], "passwd_file": pki["motor_tls_passwd_file"], "check_hostname": True}
    with mutual_tls_server(pki) as (base, seen):
        assert probe.alive({"url": base + "/liveness", "tls": tls}, 3) is True
        assert probe.alive({"url": base + "/liveness", "tls": dict(tls, cert_file="")}, 3) is False  # no client cert
    assert seen == [("GET", "/liveness", True)]
