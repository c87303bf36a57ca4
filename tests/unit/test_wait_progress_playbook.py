# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A motor_wait task run by ansible-playbook prints its progress lines on the console while it waits (Ansible's
display from the action, as the benchmark's progress), not only a result at the end."""

from __future__ import annotations

import subprocess

from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import BIN, ansible_env
from ansible_collections.pymotor.ascend.tests.unit.local_http import local_server

PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Wait for the engine
      pymotor.ascend.motor_wait:
        checks:
          - {name: engine p0, url: "%s/status", until: status_ok, timeout: 60}
        progress_every: 1
"""


def test_a_waiting_task_prints_progress_lines_while_it_waits(tmp_path):
    polls = []  # the engine is ready at the 8th poll: about 3.5 s into the wait (a poll every 0.5 s)

    def engine(_method, path, _headers, _body):
        polls.append(path)
        loaded = len(polls) >= 8
        return (200, b'{"status": "normal"}', {}) if loaded else (503, b'{"status": "loading"}', {})

    with local_server(engine) as base:
        book = tmp_path / "wait.yml"
        book.write_text(PLAYBOOK % base, encoding="utf-8")
        proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(book)], env=ansible_env(tmp_path),
                              capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("Wait for the engine: waiting ")]
    assert lines, proc.stdout
    assert all("ready 0/1; not ready: engine p0 (engine p0: HTTP 503" in line and " s left" in line for line in lines)
    # printed before the task's result, while it waited
    assert proc.stdout.index(lines[0]) < proc.stdout.index("ok: [localhost]")
