"""Unit tests of plugins/modules/motor_containers.py and plugins/module_utils/motor_start.py: the create body, the decision and the call sequence, against a
recording fake of the collection's Docker API client (module_utils/motor_docker.py, tested on its own against a fake
Engine API server; the real engine is exercised by the integration tests and molecule)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_start as mc
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import DockerClient, DockerUnavailable, NotFound
from ansible_collections.pymotor.ascend.plugins.modules import motor_containers

SPEC = {
    "name": "job-p0-0", "image": "local/pymotor:1", "command": ["bash", "-c", "source $CONFIGMAP_PATH/boot.sh"],
    "env": {"ROLE": "prefill", "POD_IP": "10.0.0.1"},
    "devices": ["/dev/davinci0:/dev/davinci0:rwm", "/dev/davinci_manager:/dev/davinci_manager:rwm"],
    "volumes": ["/etc/pymotor/job/job-p0-0:/etc/pymotor/job/job-p0-0:ro"],
    "ipc_mode": "host", "shm_size": "4g", "stdin_open": True, "restart_policy": "unless-stopped", "log_driver": "json-file",
    "log_options": {"max-size": "100m", "max-file": 5},
    "labels": {"io.pymotor.job": "job", mc.HASH_LABEL: "h1"},
}


def test_create_body_maps_every_field():
    body = mc.create_body(SPEC)
    host = body["HostConfig"]
    assert body["Image"] == "local/pymotor:1"
    assert body["Cmd"] == SPEC["command"]
    assert body["Env"] == ["POD_IP=10.0.0.1", "ROLE=prefill"]
    assert body["Labels"] == {"io.pymotor.job": "job", mc.HASH_LABEL: "h1"}
    assert host["NetworkMode"] == "host" and host["Privileged"] is False
    assert host["Devices"] == [
        {"PathOnHost": "/dev/davinci0", "PathInContainer": "/dev/davinci0", "CgroupPermissions": "rwm"},
        {"PathOnHost": "/dev/davinci_manager", "PathInContainer": "/dev/davinci_manager", "CgroupPermissions": "rwm"}]
    assert host["Binds"] == SPEC["volumes"]
    assert host["IpcMode"] == "host"
    assert host["ShmSize"] == 4 * 1024 ** 3
    assert host["RestartPolicy"] == {"Name": "unless-stopped", "MaximumRetryCount": 0}
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "100m", "max-file": "5"}}
    assert "CapAdd" not in host and "Privileged" in host
    assert body["OpenStdin"] is True and body["StdinOnce"] is False


def test_create_body_leaves_docker_defaults_when_empty():
    body = mc.create_body(dict(SPEC, ipc_mode=None, shm_size=None, stdin_open=False, command=[], devices=["/dev/x"]))
    assert "OpenStdin" not in body and "IpcMode" not in body["HostConfig"] and "ShmSize" not in body["HostConfig"] and "Cmd" not in body
    assert "Init" not in body["HostConfig"]
    assert body["HostConfig"]["Devices"] == [{"PathOnHost": "/dev/x", "PathInContainer": "/dev/x", "CgroupPermissions": "rwm"}]


def test_create_body_runs_docker_init_when_asked():
    """docker run --init: the startup script's bash is no longer PID 1 (which ignores SIGTERM), so docker stop ends
    the container at once instead of after its stop timeout; the diff shows it."""
    spec = dict(SPEC, init=True)
    assert mc.create_body(spec)["HostConfig"]["Init"] is True
    assert mc.planned(spec)["init"] is True and mc.planned(SPEC)["init"] is False
    assert mc.observed({"Config": {}, "HostConfig": {"Init": True}})["init"] is True


@pytest.mark.parametrize("existing, action", [
    (None, "created"),
    ({"Config": {"Labels": {mc.HASH_LABEL: "h0"}}, "State": {"Running": True}}, "recreated"),
    ({"Config": {"Labels": {}}, "State": {"Running": True}}, "recreated"),
    ({"Config": {"Labels": {mc.HASH_LABEL: "h1"}}, "State": {"Running": True}}, "unchanged"),
    ({"Config": {"Labels": {mc.HASH_LABEL: "h1"}}, "State": {"Running": False, "Status": "exited"}}, "started"),
])
def test_decide(existing, action):
    assert mc.decide(existing, SPEC) == action


def test_restart_asked_restarts_only_a_running_container_with_its_config():
    asked = dict(SPEC, restart=True)
    assert mc.decide({"Config": {"Labels": {mc.HASH_LABEL: "h1"}}, "State": {"Running": True}}, asked) == "restarted"
    assert mc.decide({"Config": {"Labels": {mc.HASH_LABEL: "h0"}}, "State": {"Running": True}}, asked) == "recreated"
    assert mc.decide({"Config": {"Labels": {mc.HASH_LABEL: "h1"}}, "State": {"Running": False}}, asked) == "started"
    client = FakeClient({"job-p0-0": running("job-p0-0", "h1")})
    result = mc.run(client, params([asked]), check_mode=False)
    assert result["changed"] is True and result["containers"][0]["action"] == "restarted"
    assert ("restart", "id-job-p0-0") in client.calls
    assert ("create", "job-p0-0") not in client.calls


class FakeClient:
    """Records the Engine API calls; containers: name -> inspection."""

    def __init__(self, containers=None, images=("local/pymotor:1",)):
        self.containers = dict(containers or {})
        self.images = images
        self.calls = []

    def inspect_container(self, name):
        self.calls.append(("inspect", name))
        return self.containers.get(name)

    def job_containers(self, job_id):
        self.calls.append(("list",))
        return [{"Names": ["/" + n], "State": "running" if c["State"]["Running"] else "exited"}
                for n, c in self.containers.items()]

    def delete(self, path, name, params=None):
        self.calls.append(("remove", name, params["force"]))
        if name not in self.containers:
            raise NotFound(404, "no such container")
        del self.containers[name]

    def post_json(self, path, data=None, params=None):
        self.calls.append(("create", params["name"]))
        if data["Image"] not in self.images:
            raise NotFound(404, "No such image")
        self.containers[params["name"]] = {"Id": "id-" + params["name"], "Config": {"Labels": data["Labels"]},
                                           "State": {"Running": False}}
        return {"Id": "id-" + params["name"]}

    def post(self, path, container_id):
        self.calls.append(("restart" if path.endswith("/restart") else "start", container_id))
        for c in self.containers.values():
            if c["Id"] == container_id:
                c["State"]["Running"] = True

    def stop(self, name, wait):
        self.calls.append(("stop", name, wait))
        container = self.containers[name]
        was_running = container["State"]["Running"]
        container["State"] = {"Running": False, "Status": "exited"}
        return was_running

    def inspect_image(self, name):
        self.calls.append(("inspect_image", name))
        return {"Id": name, "Config": {"Env": ["PATH=/usr/bin", "LANG=C"]}}


def params(containers=(), remove=(), stop=(), stop_timeout=10):
    return {"job_id": "job", "containers": list(containers), "remove": list(remove), "stop": [list(g) for g in stop],
            "stop_timeout": stop_timeout}


def running(name, hash_value, running_now=True):
    return {"Id": "id-" + name, "Config": {"Labels": {mc.HASH_LABEL: hash_value}}, "State": {"Running": running_now}}


def test_first_run_creates_and_starts_in_order():
    second = dict(SPEC, name="job-d0-0")
    client = FakeClient()
    result = mc.run(client, params([SPEC, second]), check_mode=False)
    assert [c["action"] for c in result["containers"]] == ["created", "created"]
    assert result["changed"] is True
    assert [c for c in client.calls if c[0] in ("create", "start")] == [
        ("create", "job-p0-0"), ("start", "id-job-p0-0"), ("create", "job-d0-0"), ("start", "id-job-d0-0")]
    assert result["states"] == {"job-p0-0": "running", "job-d0-0": "running"}


def test_converged_run_changes_nothing():
    client = FakeClient({"job-p0-0": running("job-p0-0", "h1")})
    result = mc.run(client, params([SPEC]), check_mode=False)
    assert result["changed"] is False and result["containers"][0]["action"] == "unchanged"
    assert [c[0] for c in client.calls] == ["inspect", "list"]


def test_stale_hash_is_removed_then_created_and_stopped_one_started():
    client = FakeClient({"job-p0-0": running("job-p0-0", "old"), "job-d0-0": running("job-d0-0", "h1", False)})
    result = mc.run(client, params([SPEC, dict(SPEC, name="job-d0-0")]), check_mode=False)
    assert [c["action"] for c in result["containers"]] == ["recreated", "started"]
    assert ("remove", "job-p0-0", "true") in client.calls
    assert client.calls.index(("remove", "job-p0-0", "true")) < client.calls.index(("create", "job-p0-0"))
    assert ("create", "job-d0-0") not in client.calls and ("start", "id-job-d0-0") in client.calls


def test_remove_runs_first_and_ignores_missing_containers():
    client = FakeClient({"job-p1-0": running("job-p1-0", "h1")})
    result = mc.run(client, params([SPEC], remove=["job-p1-0", "job-gone"]), check_mode=False)
    assert result["removed"] == ["job-p1-0"]
    assert client.calls[:3] == [("inspect", "job-p1-0"), ("remove", "job-p1-0", "true"), ("inspect", "job-gone")]
    assert ("remove", "job-gone", "true") not in client.calls
    assert "job-p1-0" not in result["states"]


def test_check_mode_reports_without_calling_docker_to_change():
    client = FakeClient({"job-p1-0": running("job-p1-0", "h1"), "job-p0-0": running("job-p0-0", "old")})
    result = mc.run(client, params([SPEC], remove=["job-p1-0"]), check_mode=True)
    assert result["changed"] is True and result["removed"] == ["job-p1-0"]
    assert result["containers"][0]["action"] == "recreated"
    assert {c[0] for c in client.calls} == {"inspect", "list"}


def test_missing_image_names_the_container_and_the_fix():
    client = FakeClient(images=())
    with pytest.raises(DockerUnavailable, match="cannot create job-p0-0: image local/pymotor:1 is not on this host.*build_image.yml"):
        mc.run(client, params([SPEC]), check_mode=False)


def test_start_groups_are_consecutive_runs_of_one_tier():
    specs = [dict(SPEC, name=n, group=g) for n, g in (("a", 0), ("b", 1), ("c", 1), ("d", 2), ("e", 1))]
    assert [[s["name"] for s in group] for group in mc.start_groups(specs)] == [["a"], ["b", "c"], ["d"], ["e"]]
    ungrouped = [dict(SPEC, name=n) for n in ("x", "y")]
    assert [[s["name"] for s in group] for group in mc.start_groups(ungrouped)] == [["x"], ["y"]]


def test_a_group_starts_on_clients_of_its_own_and_keeps_the_order():
    shared = FakeClient()
    made = []

    def new_client():
        made.append(1)
        return shared
    specs = [dict(SPEC, name="job-kv-pool", group=0)] + [dict(SPEC, name=f"job-c{i}", group=1) for i in range(3)]
    result = mc.run(FakeClient(), params(specs), check_mode=False, new_client=new_client)
    assert len(made) == 3  # one per container of the 3-container group; the single kv-pool on the main client
    assert [c["name"] for c in result["containers"]] == ["job-kv-pool", "job-c0", "job-c1", "job-c2"]
    assert all(c["action"] == "created" for c in result["containers"])
    assert sorted(c[1] for c in shared.calls if c[0] == "create") == ["job-c0", "job-c1", "job-c2"]


def run_main(args, monkeypatch, capsys):
    """main() with these module arguments; the Docker API client must not be created."""
    from ansible.module_utils.testing import patch_module_args

    def no_client(*args, **kwargs):
        raise AssertionError("the Docker engine was asked")

    monkeypatch.setattr(DockerClient, "__init__", no_client)
    with patch_module_args(args), pytest.raises(SystemExit):
        motor_containers.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the render chowns to root, as it does on the hosts")
def test_a_render_alone_never_asks_docker_and_hides_the_file_texts(tmp_path, monkeypatch, capsys):
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "boot.sh").write_text("source engine.sh\n")
    (startup / "engine.sh").write_text("start_engine\n")
    target = tmp_path / "etc" / "job" / "job-p0-0"
    configmap = {"startup_dir": str(startup), "dirs": [str(tmp_path / "log" / "job-p0-0")],
                 "containers": [{"name": "job-p0-0", "path": str(target),
                                 "files": {"user_config.json": '{"api_key": "s3cret"}\n'},
                                 "functions": {"engine.sh": {"set_prefill_env": {"ROLE": "prefill"}}}}]}
    first = run_main({"job_id": "job", "configmap": configmap}, monkeypatch, capsys)
    assert first["changed"] and first["states"] == {} and first["containers"] == []
    assert first["configmap"]["changed_dirs"] == [str(tmp_path / "log" / "job-p0-0"), "job-p0-0"]
    assert (target / "engine.sh").read_text() == 'function set_prefill_env() {\n    export ROLE="prefill"\n}\nstart_engine\n'
    assert "s3cret" not in json.dumps(first)
    again = run_main({"job_id": "job", "configmap": configmap}, monkeypatch, capsys)
    assert not again["changed"] and again["configmap"]["changed_dirs"] == []
    assert again["configmap"]["digests"] == first["configmap"]["digests"]


def test_a_render_error_is_shown(tmp_path, monkeypatch, capsys):
    result = run_main({"job_id": "job", "configmap": {"startup_dir": str(tmp_path / "none"), "containers": []}},
                      monkeypatch, capsys)
    assert result["failed"] and "cannot render the config directories: startup scripts not found at" in result["msg"]


def test_stop_goes_group_after_group_and_leaves_stopped_ones_alone():
    client = FakeClient({"job-p0-0": running("job-p0-0", "h1"), "job-d0-0": running("job-d0-0", "h1", False),
                         "job-controller": running("job-controller", "h1")})
    result = mc.run(client, params(stop=[["job-d0-0", "job-p0-0"], ["job-controller", "job-gone"]], stop_timeout=30),
                    check_mode=False)
    assert result["stopped"] == ["job-p0-0", "job-controller"] and result["changed"] is True
    assert [c for c in client.calls if c[0] == "stop"] == [("stop", "job-p0-0", 30), ("stop", "job-controller", 30)]
    assert result["states"] == {"job-p0-0": "exited", "job-d0-0": "exited", "job-controller": "exited"}
    again = mc.run(client, params(stop=[["job-d0-0", "job-p0-0"], ["job-controller"]]), check_mode=False)
    assert again["changed"] is False and again["stopped"] == []


def test_stop_in_check_mode_only_reports():
    client = FakeClient({"job-p0-0": running("job-p0-0", "h1")})
    result = mc.run(client, params(stop=[["job-p0-0"]]), check_mode=True)
    assert result["stopped"] == ["job-p0-0"] and result["changed"] is True
    assert not [c for c in client.calls if c[0] == "stop"]


def test_diff_masks_every_env_value_and_shows_only_what_changes():
    stale = running("job-p0-0", "old")
    stale["Config"].update(Image="local/pymotor:0", Env=["PATH=/usr/bin", "LANG=C", "ROLE=prefill", "API_KEY=s3cret"])
    stale["Image"] = "sha256:old"
    client = FakeClient({"job-p0-0": stale, "job-d0-0": running("job-d0-0", "h1"),
                         "job-c0": running("job-c0", "h1")})
    result = mc.run(client, params([SPEC, dict(SPEC, name="job-d0-0", env={"TOKEN": "t0ken"})], stop=[["job-c0"]]),
                    check_mode=True, want_diff=True)
    before, after = result["diff"]["before"], result["diff"]["after"]
    assert sorted(before) == sorted(after) == ["job-c0", "job-p0-0"]  # job-d0-0 is unchanged: no entry
    assert before["job-p0-0"]["env"] == {"API_KEY": "********", "ROLE": "********"}  # the image's PATH, LANG left out
    assert after["job-p0-0"]["env"] == {"POD_IP": "********", "ROLE": "********"}
    assert before["job-p0-0"]["image"] == "local/pymotor:0" and after["job-p0-0"]["image"] == "local/pymotor:1"
    assert after["job-p0-0"]["labels"][mc.HASH_LABEL] == "h1" and after["job-p0-0"]["shm_size"] == 4 * 1024 ** 3
    assert (before["job-c0"], after["job-c0"]) == ({"state": "running"}, {"state": "exited"})
    text = json.dumps(result)
    assert "s3cret" not in text and "10.0.0.1" not in text and "t0ken" not in text


def test_diff_of_a_new_started_and_removed_container():
    client = FakeClient({"job-d0-0": running("job-d0-0", "h1", False), "job-p1-0": running("job-p1-0", "h1")})
    result = mc.run(client, params([SPEC, dict(SPEC, name="job-d0-0")], remove=["job-p1-0"]), check_mode=False,
                    want_diff=True)
    diff = result["diff"]
    assert diff["before"]["job-p0-0"] == {} and diff["after"]["job-p0-0"]["state"] == "running"
    assert diff["before"]["job-d0-0"]["state"] == "exited" and diff["after"]["job-d0-0"]["state"] == "running"
    assert "job-p1-0" in diff["before"] and "job-p1-0" not in diff["after"]
    assert "diff" not in mc.run(client, params([SPEC]), check_mode=False)
