"""Secrets in plugins/modules/motor_containers.py: the variables with a secret-looking name travel in the no_log
options (secret_env, configmap secret_functions), reach the container and the rendered scripts, and never the
module's output."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_start
from ansible_collections.pymotor.ascend.plugins.modules import motor_containers
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps, container_spec, split_env

TOKEN = "FAKE-TOKEN-41d9e7"  # noqa: S105  (test data)
ENV = {"ROLE": "prefill", "POD_IP": "10.0.0.1", "HF_TOKEN": TOKEN, "MAX_NUM_BATCHED_TOKENS": "8192", "N": 200}


def run_main(args, monkeypatch, capsys):
    from ansible.module_utils.testing import patch_module_args

    with patch_module_args(args), pytest.raises(SystemExit):
        motor_containers.main()
    return json.loads(capsys.readouterr().out)


def test_split_env_uses_the_one_masking_rule():
    plain, secret = split_env(ENV)
    assert secret == {"HF_TOKEN": TOKEN}
    assert plain == {"ROLE": "prefill", "POD_IP": "10.0.0.1", "MAX_NUM_BATCHED_TOKENS": "8192", "N": 200}


def test_specs_keep_the_secret_variables_apart():
    # the plan's shell_env: the body of each set_*_env function PyMotor's generator injects (common env, role env)
    shell_env = {"set_common_env": {"POD_IP": "10.0.0.1", "HF_TOKEN": TOKEN}, "set_prefill_env": ENV}
    container = {"name": "job-p0-0", "env": ENV, "configmap_path": "/etc/pymotor/job/job-p0-0", "role": "prefill",
                 "tier": 2, "devices": [], "ports": [1], "shell_env": shell_env}
    result = {"hashes": {"job-p0-0": "h"}, "parts": {"job-p0-0": "p"}}
    settings = {"image": "img", "job_id": "job", "log_root": "/var/log/pymotor", "weight_dir": "/w",
                "restart_policy": "unless-stopped", "log_max_size": "100m", "log_max_file": 5}
    spec = container_spec(container, result, settings)
    assert spec["secret_env"] == {"HF_TOKEN": TOKEN} and "HF_TOKEN" not in spec["env"]
    assert spec["env"]["N"] == "200"
    (cmap,) = configmaps([container], {"common.sh": ["set_common_env"], "engine.sh": ["set_prefill_env", "set_decode_env"]})
    assert TOKEN not in json.dumps(cmap["functions"])
    assert cmap["secret_functions"] == {"common.sh": {"set_common_env": {"HF_TOKEN": TOKEN}},
                                        "engine.sh": {"set_prefill_env": {"HF_TOKEN": TOKEN}}}
    assert TOKEN in cmap["files"]["env.json"]  # the file PyMotor reads, passed in the no_log files option
    (plain,) = configmaps([dict(container, env={"ROLE": "prefill"}, shell_env={"set_common_env": {"ROLE": "prefill"}})],
                          {"common.sh": ["set_common_env"]})
    assert plain["secret_functions"] == {}


def test_secret_env_reaches_the_container_and_not_the_output(monkeypatch, capsys):
    seen = {}

    def fake_start(params, check_mode=False, diff=False):
        seen["env"] = dict(params["containers"][0]["env"])
        # a result that would echo the value: AnsibleModule must mask it as a no_log value
        return {"changed": True, "containers": [{"name": "c", "action": "created", "note": "env HF_TOKEN=" + TOKEN}],
                "removed": [], "states": {"c": "running"}}

    monkeypatch.setattr(motor_start, "start_on_docker", fake_start)
    spec = {"name": "c", "image": "img", "env": {"ROLE": "prefill"}, "secret_env": {"HF_TOKEN": TOKEN}}
    result = run_main({"job_id": "job", "containers": [spec], "_ansible_verbosity": 3}, monkeypatch, capsys)
    assert seen["env"] == {"ROLE": "prefill", "HF_TOKEN": TOKEN}
    text = json.dumps(result)
    assert TOKEN not in text and result["changed"]
    assert result["invocation"]["module_args"]["containers"][0]["env"]["ROLE"] == "prefill"  # the rest readable


@pytest.mark.skipif(os.geteuid() != 0, reason="the render chowns to root, as it does on the hosts")
def test_secret_functions_are_rendered_and_hidden(tmp_path, monkeypatch, capsys):
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "boot.sh").write_text("source engine.sh\n")
    (startup / "engine.sh").write_text("start_engine\n")
    target = tmp_path / "etc" / "job" / "job-p0-0"
    configmap = {"startup_dir": str(startup),
                 "containers": [{"name": "job-p0-0", "path": str(target), "files": {},
                                 "functions": {"engine.sh": {"set_prefill_env": {"ROLE": "prefill"}}},
                                 "secret_functions": {"engine.sh": {"set_prefill_env": {"HF_TOKEN": TOKEN}}}}]}
    result = run_main({"job_id": "job", "configmap": configmap, "_ansible_verbosity": 3}, monkeypatch, capsys)
    assert (target / "engine.sh").read_text() == (
        'function set_prefill_env() {\n    export ROLE="prefill"\n    export HF_TOKEN="%s"\n}\nstart_engine\n' % TOKEN)
    assert result["changed"] and TOKEN not in json.dumps(result)
