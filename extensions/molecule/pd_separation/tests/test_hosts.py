"""Testinfra checks of the deployed hosts against the plan the deploy wrote (run by verify.yml:
pytest --hosts=docker://<host>,... tests/: the simulated hosts are containers on this machine)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

PLAN = json.loads((Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "motor_plan.json").read_text())
FUNCTIONS = ["set_common_env", "set_controller_env", "set_coordinator_env", "set_prefill_env", "set_decode_env",
             "set_union_env", "set_encode_env", "set_kv_pool_env", "set_kv_conductor_env"]


def planned(host) -> list[dict]:
    name = host.backend.get_hostname()
    return [c for c in PLAN["containers"] if c["host"] == name]


def inspect(host, name: str) -> dict:
    return json.loads(host.check_output(f"docker inspect {name}"))[0]


def test_planned_containers_run_with_their_devices_env_and_labels(host):
    for c in planned(host):
        info = inspect(host, c["name"])
        assert info["State"]["Running"], c["name"]
        assert info["HostConfig"]["NetworkMode"] == "host"
        assert not info["HostConfig"]["Privileged"]
        devices = sorted(f"{d['PathOnHost']}:{d['PathInContainer']}:{d['CgroupPermissions']}"
                         for d in info["HostConfig"]["Devices"] or [])
        assert devices == sorted(c["devices"]), c["name"]
        env = dict(item.split("=", 1) for item in info["Config"]["Env"])
        assert {k: env.get(k) for k in c["env"]} == c["env"], c["name"]
        labels = info["Config"]["Labels"]
        assert (labels["io.pymotor.job"], labels["io.pymotor.role"], labels["io.pymotor.container"]) == \
            (PLAN["job_id"], c["role"], c["name"])
        assert info["HostConfig"]["LogConfig"] == {"Type": "json-file", "Config": {"max-file": "5", "max-size": "100m"}}


def test_engines_see_only_their_npus(host):
    for c in planned(host):
        if c["npu_ids"]:
            out = host.check_output(f"docker exec {c['name']} sh -c 'ls /dev | grep -E \"^davinci[0-9]+$\"'")
            assert sorted(out.split()) == sorted(f"davinci{i}" for i in c["npu_ids"])


def test_config_directories_hold_the_image_scripts_and_every_env_function(host):
    for c in planned(host):
        path = c["configmap_path"]
        directory = host.file(path)
        assert directory.is_directory and directory.mode == 0o750 and directory.user == "root"
        user_config = host.file(f"{path}/user_config.json")
        assert user_config.mode == 0o640 and user_config.user == "root"
        assert json.loads(user_config.content_string) == c["user_config"]
        # flat, as PyMotor's boot.sh sources "$SCRIPT_DIR/<role>.sh"
        assert not host.file(f"{path}/roles").exists
        scripts = host.check_output(f"cat {path}/common.sh {path}/controller.sh {path}/coordinator.sh "
                                    f"{path}/engine.sh {path}/kv_pool.sh {path}/kv_conductor.sh")
        for function in FUNCTIONS:
            assert f"function {function}() {{" in scripts, (c["name"], function)
        # the injected function as written (sourcing common.sh would run the image's boot steps on the host)
        common = host.file(f"{path}/common.sh").content_string
        own = common.split("function set_common_env() {", 1)[1].split("\n}", 1)[0]
        model = c["shell_env"]["set_common_env"]["MODEL_NAME"]
        assert f'export MODEL_NAME="{model}"' in own and "export ROLE=" not in own


@pytest.mark.parametrize("kind", ["node_manager", "api", "infer", "mgmt", "master", "http"])
def test_named_ports_listen(host, kind):
    for c in planned(host):
        if kind in c["port_map"]:
            assert host.socket(f"tcp://0.0.0.0:{c['port_map'][kind]}").is_listening or \
                host.socket(f"tcp://{c['ip']}:{c['port_map'][kind]}").is_listening, (c["name"], kind)
