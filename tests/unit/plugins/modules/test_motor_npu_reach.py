# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""pymotor.ascend.motor_npu_reach: every device ping of a host in one run (module_utils/motor_npu_reach.py, as the
host script its action plugin runs), answered in the shape reconcile/npu_reach.py judges, the same verdicts as the
one command run per ping it replaces; a host without pings is not contacted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

from ansible_collections.pymotor.ascend.plugins.action.motor_decide import with_pings
from ansible_collections.pymotor.ascend.plugins.action.motor_npu_reach import ActionModule
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_npu_reach
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import NPU_REACH_ARGUMENT_SPEC
from ansible_collections.pymotor.ascend.plugins.plugin_utils import host_script
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_reach import reach_findings

from ...ansible_cli import REPO, ansible_env

# answers like the real tool's (and the simulated hosts'): 29.2.0.3 loses every packet, NPU 3 does not exist
FAKE_HCCN_TOOL = """#!/bin/sh
[ "$2" = 3 ] && { echo "Error: device 3 does not exist." >&2; exit 1; }
echo "device $2 PING $6"
if [ "$6" = 29.2.0.3 ]; then
  echo 'recv time out seq=0'; echo '3 packets transmitted, 0 received, 100.00% packet loss'
else
  echo 'recv seq=0,time=0.041000ms'; echo '3 packets transmitted, 3 received, 0.00% packet loss'
fi
"""


def pings():
    return [{"npu": n, "address": "29.2.0.%d" % (n + 1), "peer_host": "b", "peer_npu": n} for n in range(4)]


def test_one_run_answers_every_ping_and_the_precheck_judges_them_as_before(tmp_path):
    tool = tmp_path / "hccn_tool"
    tool.write_text(FAKE_HCCN_TOOL)
    tool.chmod(0o755)
    script, validated = host_script.build_script(
        NPU_REACH_ARGUMENT_SPEC, {"hccn_tool": str(tool), "pings": pings()}, (motor_npu_reach, "reach"),
        (motor_npu_reach,))
    assert validated.error_messages == []
    proc = subprocess.run([sys.executable, "-I"], input=script, capture_output=True, text=True, check=False,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, timeout=60)
    result = json.loads(proc.stdout)
    assert result["changed"] is False
    assert [r["item"] for r in result["results"]] == pings()  # in order, each with its ping
    assert result["results"][0]["stdout"].endswith("3 received, 0.00% packet loss")  # no trailing newline
    assert result["results"][3]["rc"] == 1 and result["results"][3]["stderr"] == "Error: device 3 does not exist."
    found = reach_findings({"a": {"npu_pings": result["results"]}})
    assert [(check, what) for check, what, dummy in found["a"]] == [
        ("NPU 2 to b NPU 2", "hccn_tool -i 2 -ping -g address 29.2.0.3: 0 of 3 packets received"),
        ("NPU 3 to b NPU 3", "hccn_tool -i 3 -ping -g address 29.2.0.4: Error: device 3 does not exist."),
    ]


def test_a_missing_tool_is_a_failed_ping_not_a_failed_run(tmp_path):
    result = motor_npu_reach.reach({"hccn_tool": str(tmp_path / "none"), "pings": pings()[:1]})
    answer = result["results"][0]
    assert answer["rc"] == 2 and "No such file" in answer["msg"]
    assert [what for dummy, what, dummy2 in reach_findings({"a": {"npu_pings": [answer]}})["a"]] == [
        "hccn_tool -i 0 -ping -g address 29.2.0.1: " + answer["msg"]]


def test_bad_pings_are_refused_on_the_controller():
    dummy, validated = host_script.build_script(
        NPU_REACH_ARGUMENT_SPEC, {"pings": [{"npu": "x", "address": "29.2.0.1"}]}, (motor_npu_reach, "reach"),
        (motor_npu_reach,))
    text = " ".join(validated.error_messages)
    assert "npu" in text and "peer_host" in text


def test_a_host_without_pings_is_not_contacted():
    action = ActionModule.__new__(ActionModule)
    action._task = types.SimpleNamespace(args={"pings": []}, async_val=0, check_mode=False)

    def contact(*args, **kwargs):
        raise AssertionError("the host was contacted")

    action._low_level_execute_command = contact
    action._execute_module = contact
    action._connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    result = ActionModule.run(action, task_vars={})
    assert result["changed"] is False and result["results"] == []


def test_the_decision_reads_the_answers_with_the_discovery():
    probe = {"npu_network": {"0": {"ip": "29.1.0.1"}}}
    answers = [{"item": pings()[0], "rc": 0, "stdout": "3 packets transmitted, 3 received, 0.00% packet loss"}]
    assert with_pings(probe, {"changed": False, "results": answers}) == dict(probe, npu_pings=answers)
    assert "npu_pings" not in probe  # the host's registered discovery is not changed
    # no run (links not checked, another playbook), a skipped run, a host without pings: the discovery as it is
    for reach in (None, {"skipped": True, "changed": False}, {"changed": False, "results": []}):
        assert with_pings(probe, reach) is probe
    # a run that failed as a whole fails every ping it was given, with its message
    failed = {"failed": True, "msg": "the host script did not answer with JSON", "rc": 127,
              "invocation": {"module_args": {"pings": pings()[:2]}}}
    found = reach_findings({"a": with_pings(probe, failed)})
    assert [what for dummy, what, dummy2 in found["a"]] == [
        "hccn_tool -i %d -ping -g address 29.2.0.%d: the host script did not answer with JSON" % (n, n + 1)
        for n in range(2)]


def test_the_action_through_ansible_playbook(tmp_path):
    """The real action plugin in a play (the script piped to the host's Python), with pings and without."""
    tool = tmp_path / "hccn_tool"
    tool.write_text(FAKE_HCCN_TOOL)
    tool.chmod(0o755)
    out = tmp_path / "result.json"
    playbook = tmp_path / "reach.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - pymotor.ascend.motor_npu_reach: {hccn_tool: '%s', pings: %s}\n      register: with_pings\n"
        "    - pymotor.ascend.motor_npu_reach: {hccn_tool: /nonexistent, pings: []}\n      register: without_pings\n"
        "    - ansible.builtin.copy: {content: '{{ [with_pings, without_pings] | to_json }}', dest: '%s', mode: '0600'}\n"
        % (tool, json.dumps(pings()[:3]), out))
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook") if (REPO / ".venv").is_dir()
                           else "ansible-playbook", "-i", "localhost,", "-c", "local", str(playbook),
                           "-e", "ansible_python_interpreter=%s" % sys.executable],
                          env=ansible_env(tmp_path), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    some, none = json.loads(out.read_text())
    assert [r["rc"] for r in some["results"]] == [0, 0, 0] and some["changed"] is False
    assert [what for dummy, what, dummy2 in reach_findings({"a": {"npu_pings": some["results"]}})["a"]] == [
        "hccn_tool -i 2 -ping -g address 29.2.0.3: 0 of 3 packets received"]
    assert none["results"] == [] and none["changed"] is False
