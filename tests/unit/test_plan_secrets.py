# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""No secret at rest nor in output at plan time: playbooks/plan.yml on the example inventory (no host touched) with
a TLS key file and password file and API keys (api_key_config.valid_keys) in user_config.json and an API key, a key
password and a token in env.json, at -v, -vv and -vvv with --diff: the plan file holds none of them (masked as
collect_logs masks), is mode 0600 (also when it was there with another mode), and neither the output nor the diff
shows them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
API_KEY = "FAKE-APIKEY-unit-3b7f"
TLS_KEY_FILE = "/etc/pymotor-keys/FAKE-TLSKEY-unit-a1c9/server.key"  # PyMotor's TLSConfig.key_file
TLS_PASSWORD = "FAKE-TLSPASS-unit-0d42"  # noqa: S105  (test data)
PASSWD_FILE = "/etc/pymotor-keys/FAKE-PWDFILE-unit-93d0/key_pwd.txt"  # PyMotor's TLSConfig.passwd_file
TOKEN = "FAKE-ENVTOKEN-unit-6e15"  # noqa: S105
VALID_KEY = "FAKE-VALIDKEY-unit-47c3"  # PyMotor's APIKeyConfig.valid_keys (issue 47)
SECRETS = (API_KEY, "FAKE-TLSKEY-unit-a1c9", TLS_PASSWORD, "FAKE-PWDFILE-unit-93d0", TOKEN, VALID_KEY)


def seeded_config(config_dir: Path) -> None:
    config_dir.mkdir(parents=True)
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    env = json.loads((REPO / "examples/seed_pd_separation/env.json").read_text())
    # only keys PyMotor reads (an unknown key is refused): TLSConfig's key_file and passwd_file; the API key and the
    # key's password as environment variables
    user["motor_deploy_config"]["tls_config"] = {"mgmt_tls_config": {
        "enable_tls": False, "key_file": TLS_KEY_FILE, "passwd_file": PASSWD_FILE}}
    user["motor_coordinator_config"]["api_key_config"] = {"enable_api_key": True, "valid_keys": [VALID_KEY]}
    env["motor_common_env"]["HF_TOKEN"] = TOKEN
    env["motor_common_env"]["MOTOR_API_KEY"] = API_KEY
    env["motor_common_env"]["TLS_KEY_PASSWORD"] = TLS_PASSWORD
    (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
    (config_dir / "env.json").write_text(json.dumps(env, indent=2))


def run_plan(tmp_path: Path, config_dir: Path, output: Path, *extra: str):
    env = ansible_env(tmp_path)
    cmd = [str(BIN / "ansible-playbook"), "-i", str(REPO / "inventories" / "example" / "hosts.yml"),
           str(REPO / "playbooks" / "plan.yml"), "-e", f"motor_config_dir={config_dir}",
           "-e", f"motor_plan_output={output}", *extra]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan_secrets")
    seeded_config(tmp / "config")
    return tmp


# Ansible's verbosity is cumulative (a line shown at -v is shown at -vvv too): one run at -vvv covers -v and -vv.
def test_plan_file_and_output_hold_no_secret(seeded, verbosity="-vvv"):
    output = seeded / verbosity / "plan.json"
    output.parent.mkdir()
    output.write_text("{}\n")  # an older plan file, readable by everyone
    output.chmod(0o644)
    text = run_plan(seeded, seeded / "config", output, verbosity, "--diff")
    assert "changed=1" in text  # the plan task, content and mode
    leaks = [s for s in SECRETS if s in text]
    assert not leaks, f"{verbosity} output shows {leaks}"
    assert oct(output.stat().st_mode & 0o777) == "0o600"
    raw = output.read_text()
    assert not [s for s in SECRETS if s in raw]
    plan = json.loads(raw)
    for container in plan["containers"]:
        tls = container["user_config"]["motor_deploy_config"]["tls_config"]["mgmt_tls_config"]
        assert tls["key_file"] == tls["passwd_file"] == "********" and tls["enable_tls"] is False
        # env.json reaches a container through the set_*_env functions (and its Docker env where PyMotor sets it)
        for name in ("HF_TOKEN", "MOTOR_API_KEY", "TLS_KEY_PASSWORD"):
            assert container["shell_env"]["set_common_env"][name] == "********"
            assert container["env"].get(name, "********") == "********"
    # what readers of the plan use stays readable (names, hosts, ports, devices, plain env)
    assert all(c["shell_env"]["set_common_env"]["MOTOR_LOG_ROOT_PATH"] == "/root/ascend/log" for c in plan["containers"])
    assert any(c["devices"] for c in plan["containers"])
    assert "--- before: " in text and '"MOTOR_API_KEY": "********"' in text  # the diff, masked


def test_a_plan_file_in_clear_is_masked_in_the_diff_too(seeded):
    """A plan file an older release wrote in clear: the diff that replaces it must not show its secrets."""
    output = seeded / "old" / "plan.json"
    output.parent.mkdir()
    output.write_text(json.dumps({"containers": [{"user_config": {"motor_controller_config": {"api_key": API_KEY}},
                                                  "env": {"HF_TOKEN": TOKEN}}]}, indent=2))
    text = run_plan(seeded, seeded / "config", output, "--diff", "--check")
    assert "--- before: " in text and not [s for s in SECRETS if s in text]
    assert API_KEY in output.read_text()  # check mode: nothing written
    again = run_plan(seeded, seeded / "config", output)
    assert "changed=1" in again and API_KEY not in output.read_text()
    assert "changed=0" in run_plan(seeded, seeded / "config", output, "--diff")  # idempotent
