# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""plugin_utils/host_script.py and module_utils/motor_script.py: a module's standard-library code run on a host as
one plain script, with the arguments validated on the controller and what only the host knows resolved there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.loader import shell_loader

from ansible_collections.pymotor.ascend.plugins.module_utils import (
    motor_configmap,
    motor_docker,
    motor_host_probe,
    motor_npu_smi,
    motor_start,
)
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import (
    CONTAINERS_ARGUMENT_SPEC,
    DOCKER_CONNECTION_REQUIRED_TOGETHER,
    HOST_PROBE_ARGUMENT_SPEC,
)
from ansible_collections.pymotor.ascend.plugins.modules import motor_containers
from ansible_collections.pymotor.ascend.plugins.plugin_utils import host_script

from ...ansible_cli import REPO, ansible_env

PROBE = dict(spec=HOST_PROBE_ARGUMENT_SPEC, entry=(motor_host_probe, "probe"),
             modules=(motor_docker, motor_npu_smi, motor_host_probe),
             required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
CONTAINERS = dict(spec=CONTAINERS_ARGUMENT_SPEC, entry=(motor_start, "apply"), modules=(motor_docker, motor_configmap, motor_start),
                  required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
NO_ENGINE = "unix:///nonexistent/docker.sock"
TOKEN = "FAKE-TOKEN-5c1a"  # noqa: S105  (test data)


def run_script(script, env=None):
    """What a host does with the script: the interpreter reads it from stdin (an empty environment but PATH/HOME)."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/home/probe"}
    proc = subprocess.run([sys.executable, "-I"], input=script, capture_output=True, text=True, env=dict(base, **(env or {})),
                          check=False, timeout=60)
    return json.loads(proc.stdout)


def test_split_spec_leaves_environment_fallbacks_and_paths_to_the_host():
    controller, fallbacks, paths = host_script.split_spec(HOST_PROBE_ARGUMENT_SPEC)
    assert fallbacks["docker_host"] == [["DOCKER_HOST"], motor_docker.DEFAULT_DOCKER_HOST, "str"]
    assert fallbacks["timeout"] == [["DOCKER_TIMEOUT"], 60, "int"]
    assert "validate_certs" not in fallbacks  # no fallback: its default stays on the controller
    assert "default" not in controller["docker_host"] and "fallback" not in controller["docker_host"]
    assert controller["validate_certs"]["default"] is True
    assert paths == {"ca_path": "path", "client_cert": "path", "client_key": "path", "paths": ["path"],
                     "model_dirs": ["path"], "hccn_tool": "path", "driver_dir": "path",
                     "disk_path": "path"}
    assert controller["paths"]["elements"] == "str" and controller["disk_path"]["type"] == "str"
    assert HOST_PROBE_ARGUMENT_SPEC["paths"]["elements"] == "path"  # the module's own spec is left as it is


def test_nested_path_options_keep_their_shape():
    spec = {"config": {"type": "dict", "options": {"root": {"type": "path"}, "name": {"type": "str"}}},
            "items": {"type": "list", "elements": "dict", "options": {"dirs": {"type": "list", "elements": "path"}}}}
    assert host_script.split_spec(spec)[2] == {"config": {"root": "path"}, "items": [{"dirs": ["path"]}]}


def test_bad_arguments_are_refused_on_the_controller():
    script, validated = host_script.build_script(args={"image": 3, "client_cert": "/c.pem", "bogus": 1}, **PROBE)
    assert script is None
    text = " ".join(validated.error_messages)
    assert "job_id" in text and "bogus" in text and "client_cert" in text


def test_the_script_gives_what_the_module_gives(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    args = {"job_id": "demo", "docker_host": NO_ENGINE, "paths": ["~/weights", str(tmp_path)],
            "model_dirs": [str(tmp_path / "model"), "$PROBE_ROOT/none"], "disk_path": str(tmp_path)}
    script, validated = host_script.build_script(args=args, **PROBE)
    assert validated.error_messages == []
    result = run_script(script, {"PROBE_ROOT": str(tmp_path), "DOCKER_TIMEOUT": "7"})
    assert result["paths"] == {"/home/probe/weights": False, str(tmp_path): True}  # expanded on the host
    assert result["models"] == {str(tmp_path / "model"): "ok", str(tmp_path / "none"): "missing"}
    assert result["can_talk_to_docker"] is False and "nonexistent" in result["msg"]
    # the same function in this process, with the params AnsibleModule would make on that host
    os.environ.update(PROBE_ROOT=str(tmp_path), HOME="/home/probe")
    try:
        module_params = ArgumentSpecValidator(HOST_PROBE_ARGUMENT_SPEC).validate(args).validated_parameters
    finally:
        del os.environ["PROBE_ROOT"]
    expected = motor_host_probe.probe(module_params)
    for key in ("paths", "models", "can_talk_to_docker", "msg", "npu_devices", "npu_health", "links", "interfaces"):
        assert result[key] == expected[key], key


def test_environment_fallbacks_are_the_hosts():
    script, dummy = host_script.build_script(args={"job_id": "demo"}, **PROBE)
    result = run_script(script, {"DOCKER_HOST": NO_ENGINE, "DOCKER_TIMEOUT": "7", "DOCKER_TLS": "no"})
    assert result["can_talk_to_docker"] is False and "nonexistent" in result["msg"]
    bad = run_script(script, {"DOCKER_TLS": "maybe"})
    assert bad["failed"] is True and "'maybe' is not a boolean" in bad["msg"] and "Traceback" in bad["exception"]


class FakeAction(object):
    """What run_on_host uses of an action plugin, running the command on this machine like the local connection."""

    def __init__(self, args, pipelining=True, task_vars_interpreter=sys.executable):
        self._task = types.SimpleNamespace(args=args, async_val=0, delegate_to=None, check_mode=False, diff=False)
        self._connection = types.SimpleNamespace(_shell=shell_loader.get("sh"))
        self._templar = types.SimpleNamespace(template=lambda value: value)
        self.pipelining = pipelining
        self.commands = []
        self.module_runs = 0

    def _is_pipelining_enabled(self, style):
        return self.pipelining

    def _compute_environment_string(self):
        return "DOCKER_TIMEOUT=9"

    def _execute_module(self, task_vars=None):
        self.module_runs += 1
        return {"through": "AnsiballZ"}

    def _low_level_execute_command(self, cmd, sudoable=True, in_data=None):
        self.commands.append(cmd)
        proc = subprocess.run(["/bin/sh", "-c", cmd], input=in_data, capture_output=True, check=False, timeout=60)
        return {"rc": proc.returncode, "stdout": proc.stdout.decode(), "stderr": proc.stderr.decode()}


def test_run_on_host_pipes_the_script_to_the_configured_interpreter():
    action = FakeAction({"job_id": "demo", "docker_host": NO_ENGINE})
    result = host_script.run_on_host(action, {"ansible_python_interpreter": sys.executable}, **PROBE)
    assert action.commands == ["DOCKER_TIMEOUT=9 %s" % sys.executable]
    assert result["changed"] is False and result["can_talk_to_docker"] is False and "ansible_facts" not in result
    assert action.module_runs == 0


def test_run_on_host_discovers_the_interpreter_once_and_returns_it_as_a_fact(monkeypatch):
    calls = []
    monkeypatch.setattr(host_script, "discover_interpreter",
                        lambda **kwargs: calls.append(kwargs["discovery_mode"]) or sys.executable)
    action = FakeAction({"job_id": "demo", "docker_host": NO_ENGINE})
    result = host_script.run_on_host(action, {}, **PROBE)
    assert calls == ["auto_silent"]  # this repository's ansible.cfg
    assert result["ansible_facts"] == {"discovered_interpreter_python": sys.executable}
    facts = {"ansible_facts": {"discovered_interpreter_python": sys.executable}}
    again = host_script.run_on_host(FakeAction({"job_id": "demo", "docker_host": NO_ENGINE}), facts, **PROBE)
    assert calls == ["auto_silent"] and "ansible_facts" not in again


def test_without_pipelining_the_module_runs_through_ansiballz():
    action = FakeAction({"job_id": "demo"}, pipelining=False)
    assert host_script.run_on_host(action, {}, **PROBE) == {"through": "AnsiballZ"}
    assert action.commands == []


def test_a_host_without_a_working_interpreter_is_a_clear_failure():
    action = FakeAction({"job_id": "demo"})
    result = host_script.run_on_host(action, {"ansible_python_interpreter": "/nonexistent/python3"}, **PROBE)
    assert result["failed"] is True and result["rc"] == 127 and "nonexistent" in result["module_stderr"]


@pytest.mark.parametrize("pipelining", [True, False])
def test_the_action_plugin_on_localhost(tmp_path, pipelining):
    """The real action plugin through ansible-playbook, pipelined (the script) and not (AnsiballZ): same answer."""
    playbook = tmp_path / "probe.yml"
    out = tmp_path / "result.json"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - pymotor.ascend.motor_host_probe: {job_id: demo, docker_host: '%s', paths: ['%s', '~/none']}\n"
        "      register: probed\n"
        "    - ansible.builtin.copy: {content: '{{ probed | to_json }}', dest: '%s', mode: '0600'}\n"
        % (NO_ENGINE, tmp_path, out))
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook") if (REPO / ".venv").is_dir()
                           else "ansible-playbook", "-i", "localhost,", "-c", "local", str(playbook),
                           "-e", "ansible_python_interpreter=%s" % sys.executable,
                           "-e", "ansible_pipelining=%s" % pipelining],
                          env=ansible_env(tmp_path), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["paths"] == {str(tmp_path): True, os.path.expanduser("~/none"): False}
    assert result["can_talk_to_docker"] is False and result["changed"] is False


def test_a_failing_container_run_hides_the_secret_and_shows_the_rest():
    spec = {"name": "c", "image": "img", "env": {"ROLE": "prefill"}, "secret_env": {"HF_TOKEN": TOKEN}}
    action = FakeAction({"job_id": "job", "docker_host": NO_ENGINE, "containers": [spec]})
    result = host_script.run_on_host(action, {"ansible_python_interpreter": sys.executable}, **CONTAINERS)
    assert result["failed"] is True and "nonexistent" in result["msg"]
    assert TOKEN not in json.dumps(result)
    shown = result["invocation"]["module_args"]["containers"][0]
    assert shown["env"] == {"ROLE": "prefill"} and shown["secret_env"] == {"HF_TOKEN": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}


def test_check_mode_and_diff_reach_the_entry(monkeypatch, capsys):
    """A stop in check mode with diff, on an engine that is not there: the same failure both ways."""
    args = {"job_id": "job", "docker_host": NO_ENGINE, "stop": [["job-c0"]]}
    script, dummy = host_script.build_script(args=args, check_mode=True, diff=True, **CONTAINERS)
    assert '"check_mode": true' in script and '"diff": true' in script
    through_script = run_script(script)
    from ansible.module_utils.testing import patch_module_args

    with patch_module_args(dict(args, _ansible_check_mode=True, _ansible_diff=True)), pytest.raises(SystemExit):
        motor_containers.main()
    through_module = json.loads(capsys.readouterr().out)
    assert through_script["failed"] and through_module["failed"]
    assert through_script["msg"] == through_module["msg"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the render chowns to root, as it does on the hosts")
def test_a_render_through_the_script_is_the_modules_render(tmp_path):
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "boot.sh").write_text("source engine.sh\n")
    (startup / "engine.sh").write_text("start_engine\n")
    configmap = {"startup_dir": str(startup),
                 "containers": [{"name": "job-p0-0", "path": str(tmp_path / "etc" / "job-p0-0"), "files": {},
                                 "functions": {"engine.sh": {"set_prefill_env": {"ROLE": "prefill"}}},
                                 "secret_functions": {"engine.sh": {"set_prefill_env": {"HF_TOKEN": TOKEN}}}}]}
    action = FakeAction({"job_id": "job", "docker_host": NO_ENGINE, "configmap": configmap})
    first = host_script.run_on_host(action, {"ansible_python_interpreter": sys.executable}, **CONTAINERS)
    assert first["changed"] and first["configmap"]["changed_dirs"] == ["job-p0-0"] and "failed" not in first
    assert TOKEN in (tmp_path / "etc" / "job-p0-0" / "engine.sh").read_text() and TOKEN not in json.dumps(first)
    again = host_script.run_on_host(action, {"ansible_python_interpreter": sys.executable}, **CONTAINERS)
    assert not again["changed"] and again["configmap"]["digests"] == first["configmap"]["digests"]
