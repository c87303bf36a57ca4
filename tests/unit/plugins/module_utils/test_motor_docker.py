"""Unit tests of plugins/module_utils/motor_docker.py (the collection's own Engine API client), of the startup-script
copy through the archive endpoint and of motor_job_info, against a fake Engine API server (docker_fake.py) on a unix
socket and on TCP with TLS (self-signed certificates)."""

from __future__ import annotations

import inspect
import json
import os
import tempfile

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import DOCKER_CONNECTION_ARGS
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_configmap
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_docker as md
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_start
from ansible_collections.pymotor.ascend.plugins.modules import motor_job_info

from .docker_fake import Engine, frame, make_certs, tls_engine, unix_engine

JOB = {"io.pymotor.job": "job", "io.pymotor.role": "prefill"}


@pytest.fixture(name="engine")
def fixture_engine():
    engine = Engine()
    engine.images = {"local/pymotor:1": "sha256:img1"}
    engine.image_files = {"sha256:img1": {"/opt/startup": {"boot.sh": b"source engine.sh\n",
                                                           "engine.sh": b"start_engine\n"}}}
    return engine


@pytest.fixture(name="sock")
def fixture_sock(engine):
    # a short path: AF_UNIX paths are limited to ~107 bytes, pytest's tmp_path can be longer
    folder = tempfile.mkdtemp(prefix="fdk")
    path = os.path.join(folder, "docker.sock")
    server = unix_engine(path, engine)
    yield "unix://" + path
    server.shutdown()
    server.server_close()
    os.unlink(path)
    os.rmdir(folder)


def client_of(sock, **kwargs):
    return md.DockerClient.from_params(dict(docker_host=sock, **kwargs))


def test_version_is_negotiated_once_and_calls_are_versioned(engine, sock):
    client = client_of(sock)
    assert client.get_json("/info")["ServerVersion"] == "27.0.0"
    client.get_json("/info")
    assert [c[1] for c in engine.calls] == ["/version", "/v1.43/info", "/v1.43/info"]
    pinned = client_of(sock, api_version="1.43")
    pinned.get_json("/info")
    assert engine.calls[-1][1] == "/v1.43/info" and len(engine.calls) == 4


def test_an_engine_older_than_the_minimum_api_is_refused(engine, sock):
    engine.api = "1.39"
    with pytest.raises(md.DockerUnavailable, match="speaks API 1.39; 1.40 or newer is needed"):
        client_of(sock).get_json("/info")


def test_errors_carry_the_engine_message_and_404_is_not_found(sock):
    client = client_of(sock)
    with pytest.raises(md.NotFound, match="No such container: nope") as missing:
        client.get_json("/containers/{0}/json", "nope")
    assert missing.value.status == 404
    with pytest.raises(md.DockerError, match=r"something broke inside \(HTTP 500\)") as broken:
        client.get_json("/boom")
    assert broken.value.status == 500 and not isinstance(broken.value, md.NotFound)
    assert client.inspect_container("nope") is None and client.inspect_image("nope:1") is None


def test_a_non_json_answer_is_reported(sock):
    with pytest.raises(md.DockerUnavailable, match="something other than JSON"):
        client_of(sock).get_json("/notjson")


def test_an_absent_socket_is_unavailable_not_a_crash(tmp_path):
    with pytest.raises(md.DockerUnavailable, match="cannot talk to the Docker engine at unix://.*(FileNotFound|No such)"):
        client_of("unix://%s" % (tmp_path / "absent.sock")).get_json("/info")
    with pytest.raises(md.DockerUnavailable, match="only unix://, tcp://"):
        client_of("ssh://host")


def test_chunked_list_with_label_filter_and_container_lifecycle(engine, sock):
    client = client_of(sock)
    created = client.post_json("/containers/create", data={"Image": "local/pymotor:1", "Labels": JOB},
                               params={"name": "job-p0-0"})
    client.post_json("/containers/create", data={"Image": "local/pymotor:1", "Labels": {"io.pymotor.job": "other"}},
                     params={"name": "other-0"})
    assert created["Id"] == "id-job-p0-0"
    assert client.post("/containers/{0}/start", created["Id"]) == 204
    rows = client.job_containers("job")
    assert [(r["Names"], r["State"]) for r in rows] == [(["/job-p0-0"], "running")]
    assert json.loads(engine.calls[-1][2]["filters"]) == {"label": ["io.pymotor.job=job"]}
    assert client.delete("/containers/{0}", "job-p0-0", params={"force": 1}) == 204
    assert client.job_containers("job") == []


def test_names_with_slashes_and_colons_stay_readable_in_the_path(engine, sock):
    assert client_of(sock).inspect_image("local/pymotor:1") == {"Id": "sha256:img1"}
    assert engine.calls[-1][1] == "/v1.43/images/local/pymotor:1/json"


def test_logs_are_demultiplexed_from_a_chunked_stream_or_read_raw_with_a_tty(engine, sock):
    engine.containers["a"] = {"Id": "id-a", "Config": {"Labels": JOB}, "State": {"Status": "running"}}
    engine.containers["b"] = {"Id": "id-b", "Config": {"Labels": JOB}, "State": {"Status": "running"}}
    engine.logs["id-a"] = (b"line 1\nline 2\n" * 20, b"warn\n", False)
    engine.logs["id-b"] = (b"\x1b[1mtty output\n", b"", True)
    client = client_of(sock)
    assert client.logs("a", tail=40) == ("line 1\nline 2\n" * 20, "warn\n")
    assert engine.calls[-1][2] == {"stdout": "1", "stderr": "1", "tail": "40", "timestamps": "1"}
    assert client.logs("b") == ("\x1b[1mtty output\n", "")


def test_demux_stream_of_frames_and_of_raw_text():
    assert md.demux_stream(frame(1, b"out") + frame(2, b"err") + frame(1, b"!")) == (b"out!", b"err")
    assert md.demux_stream(b"plain text, no frame header") == (b"plain text, no frame header", b"")
    assert md.demux_stream(frame(1, b"x"), raw=True) == (frame(1, b"x"), b"")


def test_copy_out_of_image_uses_a_created_container_and_removes_it(engine, sock):
    data = client_of(sock).copy_out_of_image("local/pymotor:1", "/opt/startup", labels={"io.pymotor.purpose": "x"})
    assert data[257:262] == b"ustar"  # a tar stream
    methods = [(c[0], c[1].split("/")[-1]) for c in engine.calls[1:]]
    assert methods == [("POST", "create"), ("GET", "archive"), ("DELETE", "id-anon0")]
    assert engine.containers == {}


def test_run_once_runs_confined_returns_the_output_and_removes_the_container(engine, sock):
    engine.logs["id-anon0"] = (b"imported\n{}\n", b"a warning\n", False)
    engine.exit_codes["id-anon0"] = 3
    code, out, err = client_of(sock).run_once("local/pymotor:1", ["python3", "-c", "print(1)"], labels={"a": "b"})
    assert (code, out, err) == (3, "imported\n{}\n", "a warning\n")
    created = engine.created[-1]
    assert created["Entrypoint"] == ["python3"] and created["Cmd"] == ["-c", "print(1)"]
    assert created["NetworkDisabled"] is True and created["Labels"] == {"a": "b"}
    host = created["HostConfig"]
    assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
    assert host["SecurityOpt"] == ["no-new-privileges"] and "Privileged" not in host and "Devices" not in host
    methods = [(c[0], c[1].split("/")[-1]) for c in engine.calls[1:]]
    assert methods == [("POST", "create"), ("POST", "start"), ("POST", "wait"), ("GET", "logs"), ("DELETE", "id-anon0")]
    assert engine.containers == {}


def test_copy_out_of_a_missing_directory_still_removes_the_container(engine, sock):
    with pytest.raises(md.NotFound, match="Could not find the file /nope"):
        client_of(sock).copy_out_of_image("local/pymotor:1", "/nope")
    assert engine.containers == {}


def test_render_copies_the_startup_scripts_through_the_archive_endpoint(engine, sock, tmp_path):
    startup = tmp_path / "cache" / "sha256-img1"
    made = []

    def new_client():
        made.append(1)
        return client_of(sock)
    params = {"startup_dir": str(startup), "image": "local/pymotor:1", "in_image": "/opt/startup", "dirs": [],
              "dir_mode": "0750", "file_mode": "0640", "containers": []}
    result = motor_configmap.render(params, False, new_client=new_client)
    assert result["extracted"] is True and made == [1]
    assert (startup / "boot.sh").read_bytes() == b"source engine.sh\n"
    assert (startup / "engine.sh").read_bytes() == b"start_engine\n"
    assert motor_configmap.render(params, False, new_client=new_client)["extracted"] is False and made == [1]
    assert engine.containers == {}


def test_motor_start_runs_a_job_against_the_engine(engine, sock):
    spec = {"name": "job-p0-0", "image": "local/pymotor:1", "command": [], "env": {"A": "1"}, "devices": [],
            "volumes": [], "ipc_mode": None, "shm_size": "64m", "labels": dict(JOB, **{motor_start.HASH_LABEL: "h"}),
            "restart_policy": "no", "log_driver": "json-file", "log_options": {}, "group": None}
    client = client_of(sock)
    first = motor_start.run(client, {"job_id": "job", "containers": [spec], "remove": []}, False, client.clone)
    assert first["changed"] and first["states"] == {"job-p0-0": "running"}
    again = motor_start.run(client, {"job_id": "job", "containers": [spec], "remove": []}, False, client.clone)
    assert not again["changed"] and again["containers"][0]["action"] == "unchanged"
    with pytest.raises(md.DockerUnavailable, match="image missing:1 is not on this host"):
        motor_start.run(client, {"job_id": "job", "containers": [dict(spec, name="x", image="missing:1")],
                                 "remove": []}, False)


def test_motor_start_stops_then_removes_the_job_like_destroy(engine, sock):
    client = client_of(sock, timeout=5)
    for name in ("job-p0-0", "job-controller"):
        client.post_json("/containers/create", data={"Image": "local/pymotor:1", "Labels": JOB}, params={"name": name})
        client.post("/containers/{0}/start", name)
    assert client.stop("job-controller", 1) is True
    assert client.stop("job-controller", 1) is False  # 304: not running
    params = {"job_id": "job", "containers": [], "remove": ["job-p0-0", "job-controller"],
              "stop": [["job-p0-0"], ["job-controller"]], "stop_timeout": 45}
    result = motor_start.run(client, params, False, client.clone, want_diff=True)
    assert result["stopped"] == ["job-p0-0"] and result["removed"] == ["job-p0-0", "job-controller"]
    assert result["states"] == {} and engine.containers == {}
    stops = [c for c in engine.calls if c[1].endswith("/stop")]
    assert [(c[1].split("/")[-2], c[2]["t"]) for c in stops] == [("job-controller", "1"), ("job-controller", "1"),
                                                                 ("job-p0-0", "45")]
    assert sorted(result["diff"]["before"]) == ["job-controller", "job-p0-0"] and result["diff"]["after"] == {}


def test_parse_bytes_like_docker_run():
    assert motor_start.parse_bytes("4g") == 4 * 1024 ** 3
    assert motor_start.parse_bytes("64M") == 64 * 1024 ** 2
    assert motor_start.parse_bytes(512) == 512
    with pytest.raises(ValueError, match="invalid size"):
        motor_start.parse_bytes("4 lots")


def test_motor_job_info_reads_everything_in_one_client(engine, sock):
    client = client_of(sock)
    client.post_json("/containers/create", data={"Image": "local/pymotor:1", "Labels": JOB}, params={"name": "job-p0-0"})
    engine.logs["id-job-p0-0"] = (b"ready\n", b"", False)
    params = {"job_id": "job", "inspect": True, "names": ["job-p0-0", "job-d0-0"],
              "images": ["local/pymotor:1", "absent:1"], "logs": True, "log_tail": 10, "engine_info": True}
    result = motor_job_info.read_job(client, params)
    assert [c["Names"] for c in result["containers"]] == [["/job-p0-0"]]
    assert [c["Name"] for c in result["inspections"]] == ["/job-p0-0"]
    assert result["named"]["job-d0-0"] is None and result["named"]["job-p0-0"]["Id"] == "id-job-p0-0"
    assert result["images"] == {"local/pymotor:1": "sha256:img1", "absent:1": ""}
    assert result["logs"] == [{"name": "job-p0-0", "id": "id-job-p0-0", "stdout": "ready\n", "stderr": ""}]
    assert result["engine"]["info"]["ServerVersion"] == "27.0.0" and result["engine"]["version"]["ApiVersion"] == "1.43"


@pytest.fixture(name="certs", scope="module")
def fixture_certs(tmp_path_factory):
    pytest.importorskip("cryptography")
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_tls_verifies_the_engine_against_the_given_ca(engine, certs):
    server = tls_engine(certs, engine)
    url = "tcp://127.0.0.1:%d" % server.server_address[1]
    try:
        assert client_of(url, tls=True, ca_path=str(certs / "ca.pem")).get_json("/info")["Containers"] == 0
        with pytest.raises(md.DockerUnavailable, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            client_of(url, tls=True).get_json("/info")  # system CAs do not know the fake CA
        with pytest.raises(md.DockerUnavailable, match="cannot talk"):
            client_of(url, tls=True, ca_path=str(certs / "ca.pem"), tls_hostname="docker.example").get_json("/info")
        assert client_of(url, tls=True, ca_path=str(certs / "ca.pem"), tls_hostname="localhost").get_json("/info")
        assert client_of(url, tls=True, validate_certs=False).get_json("/info")["Containers"] == 0
        with pytest.raises(md.DockerUnavailable, match="cannot talk"):
            client_of(url).get_json("/info")  # plain HTTP to a TLS port
    finally:
        server.shutdown()
        server.server_close()


def test_tls_client_certificate_for_a_tlsverify_engine(engine, certs, monkeypatch):
    server = tls_engine(certs, engine, require_client_cert=True)
    url = "https://127.0.0.1:%d" % server.server_address[1]
    try:
        with pytest.raises(md.DockerUnavailable, match="cannot talk"):
            client_of(url, ca_path=str(certs / "ca.pem")).get_json("/info")
        good = client_of(url, ca_path=str(certs / "ca.pem"), client_cert=str(certs / "client.pem"),
                         client_key=str(certs / "client-key.pem"))
        assert good.tls and good.get_json("/info")["ServerVersion"] == "27.0.0"
        # DOCKER_CERT_PATH as the Docker CLI reads it (ca.pem, cert.pem, key.pem)
        folder = certs / "cli"
        folder.mkdir(exist_ok=True)
        for src, dst in (("ca.pem", "ca.pem"), ("client.pem", "cert.pem"), ("client-key.pem", "key.pem")):
            (folder / dst).write_bytes((certs / src).read_bytes())
        monkeypatch.setenv("DOCKER_CERT_PATH", str(folder))
        assert client_of(url, tls=True).get_json("/info")["ServerVersion"] == "27.0.0"
    finally:
        server.shutdown()
        server.server_close()


def test_unreadable_tls_files_are_reported(tmp_path):
    with pytest.raises(md.DockerUnavailable, match="cannot load the TLS files"):
        client_of("tcp://127.0.0.1:2376", tls=True, ca_path=str(tmp_path / "none.pem"))


def test_connection_args_follow_the_doc_fragment():
    from ansible_collections.pymotor.ascend.plugins.doc_fragments.docker import ModuleDocFragment
    import yaml

    documented = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    assert set(documented) == set(DOCKER_CONNECTION_ARGS) == set(md.CONNECTION_OPTIONS)
    assert list(inspect.signature(md.DockerClient).parameters) == list(md.CONNECTION_OPTIONS)
    for name, spec in DOCKER_CONNECTION_ARGS.items():
        assert documented[name]["type"] == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name
        assert sorted(documented[name].get("aliases", [])) == sorted(spec.get("aliases", [])), name
    assert DOCKER_CONNECTION_ARGS["validate_certs"]["default"] is True


def test_host_probe_inspects_the_jobs_containers_only_when_asked(engine, sock):
    """verify.yml judges the containers from the discovery's own read (motor_host_probe inspect: true)."""
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_host_probe import read_docker
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.verify import observed_from_probes
    client = client_of(sock)
    client.post_json("/containers/create", data={"Image": "local/pymotor:1", "Labels": JOB}, params={"name": "job-p0-0"})
    client.post_json("/containers/create", data={"Image": "local/pymotor:1", "Labels": {}}, params={"name": "other"})
    plain = read_docker({"docker_host": sock}, "job", "local/pymotor:1")
    assert "inspections" not in plain and [c["Names"] for c in plain["containers"]] == [["/job-p0-0"]]
    probe = read_docker({"docker_host": sock, "inspect": True}, "job", "local/pymotor:1")
    assert [i["Name"] for i in probe["inspections"]] == ["/job-p0-0"]
    assert set(probe["inspections"][0]) == {"Id", "Name", "Image", "RestartCount", "State"}  # no Config (env)
    image_ids, seen = observed_from_probes({"h1": probe, "h2": {"images": [], "containers": []}})
    assert image_ids == {"h1": "sha256:img1", "h2": ""}
    assert seen == {"job-p0-0": {"exists": True, "running": False, "status": probe["inspections"][0]["State"]["Status"],
                                 "image": "sha256:img1", "restarts": probe["inspections"][0].get("RestartCount")}}
