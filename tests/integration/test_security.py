"""Security properties of a deployed job on a small simulated cluster (one A2 engine host with 1 P x 4 NPUs +
1 D x 4 NPUs, and a control host; prefix pymotor-sec): no privileged container, exactly the planned devices,
config modes, secrets (an API key, a TLS key and its password in user_config.json, a token in env.json) kept out of
the plan file (mode 0600), of the Ansible output of deploy and collect_logs at -v, -vv and -vvv and of the log
bundle, while the containers still get them; management endpoints on the host address; and (on this machine's
Docker) the Go archive checksum of the image build. (plan.yml alone at -v..-vvv: tests/unit/test_plan_secrets.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile

import pytest

import simctl
from support import deployed_containers, is_host_agent, recap_changed, wait_for
from fault_support import (
    build_image,
    conductor_image_run,
    container_exists,
    image_id,
    inspect,
    job_containers,
    make_build_inputs,
    playbook,
    write_config,
)

PREFIX = "pymotor-sec" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts, e.g. "-strict"
JOB = "sec-job"
API_KEY = "FAKE-APIKEY-7c41e2"
TLS_KEY_FILE = "/etc/pymotor-keys/FAKE-TLSKEY-5d90ab/server.key"  # PyMotor's TLSConfig.key_file
TLS_PASSWORD = "FAKE-TLSPASS-88e1f0"
PASSWD_FILE = "/etc/pymotor-keys/FAKE-PWDFILE-41b7e3/key_pwd.txt"  # PyMotor's TLSConfig.passwd_file
ENV_TOKEN = "FAKE-ENVTOKEN-2c8d51"
SECRETS = (API_KEY, "FAKE-TLSKEY-5d90ab", TLS_PASSWORD, "FAKE-PWDFILE-41b7e3", ENV_TOKEN)

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("security")
    build_image()
    config = tmp / "config"
    # Where PyMotor reads credentials (only keys it knows: an unknown key is refused): the management TLS settings
    # (TLSConfig's key_file and passwd_file); the API key and the key's password as environment variables.
    write_config(config, JOB, user_extra={
        "motor_deploy_config": {"tls_config": {"mgmt_tls_config": {
            "enable_tls": False, "key_file": TLS_KEY_FILE, "passwd_file": PASSWD_FILE}}}},
        env_extra={"motor_common_env": {"HF_TOKEN": ENV_TOKEN, "MOTOR_API_KEY": API_KEY,
                                        "TLS_KEY_PASSWORD": TLS_PASSWORD}})
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, "local/pymotor-fault:test")
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        deploy = playbook("deploy.yml", inventory, config, "-vvv",
                          "-e", "motor_service_ready_timeout=240", "-e", "motor_service_ready_delay=1")
        plan = json.loads((config / "motor_plan.json").read_text())
        yield {"hosts": hosts, "inventory": inventory, "config": config, "tmp": tmp, "plan": plan,
               "deploy_output": deploy.stdout + deploy.stderr}
    finally:
        simctl.down(PREFIX)


def inspected(cluster) -> dict[str, dict]:
    """{container name: docker inspect} of every container of the job, checked against the plan."""
    by_name = {}
    for host in cluster["hosts"]:
        names = [name for _, name, _ in job_containers([host], JOB)]
        for info in inspect(host["name"], names) if names else []:
            by_name[info["Name"].lstrip("/")] = info
    assert set(by_name) == set(deployed_containers(cluster["plan"]))  # with the per-host healers
    return by_name


# The one capability engines get on top of Docker's default set (motor_service_engine_cap_add's default): Docker's
# default seccomp profile allows NUMA memory binding (mbind, set_mempolicy) only with it; upstream runs unconfined.
ENGINE_CAP_ADD = ["SYS_NICE"]


def test_no_container_is_privileged_or_gains_capabilities(cluster):
    engines = {c["name"] for c in cluster["plan"]["containers"] if c.get("npu_ids")}
    for name, info in inspected(cluster).items():
        host_config = info["HostConfig"]
        assert host_config["Privileged"] is False, name
        allowed = ENGINE_CAP_ADD if name in engines else []
        assert sorted(host_config.get("CapAdd") or []) == allowed, f"{name}: CapAdd {host_config.get('CapAdd')}"
        assert not host_config.get("DeviceCgroupRules"), f"{name}: {host_config.get('DeviceCgroupRules')}"
        assert not any(opt.split("=")[-1] == "unconfined" for opt in host_config.get("SecurityOpt") or []), name
        assert host_config.get("PidMode", "") in ("", "private"), name
        real_socket = [m for m in info["Mounts"] if m["Source"] == "/var/run/docker.sock"]
        proxy_dir = [m for m in info["Mounts"] if m["Destination"] == "/run/motor-docker"]
        if is_host_agent(name, JOB):  # the per-host healer and its Docker socket proxy: hardened, nothing listening
            assert host_config["CapDrop"] == ["ALL"] and host_config["ReadonlyRootfs"] is True, name
            assert "no-new-privileges:true" in host_config["SecurityOpt"] and not host_config.get("PortBindings")
            assert len(proxy_dir) == 1, name  # the directory of the proxy's socket, shared by the two only
        if name.startswith(f"{JOB}-sockproxy-"):  # the only container with the host's Docker socket
            assert len(real_socket) == 1 and proxy_dir[0]["RW"] is True, name
        elif name.startswith(f"{JOB}-healer-"):  # the proxy's socket only, in a directory it cannot write
            assert not real_socket and proxy_dir[0]["RW"] is False, name
            assert not any("docker.sock" in m["Source"] for m in info["Mounts"]), name
        else:
            assert not real_socket and not proxy_dir, name
            assert not any("docker.sock" in m["Source"] or "-sockproxy-" in m["Source"] for m in info["Mounts"]), name


def test_engines_get_exactly_the_planned_devices(cluster):
    by_name = inspected(cluster)
    for container in cluster["plan"]["containers"]:
        info = by_name[container["name"]]
        got = sorted(f'{d["PathOnHost"]}:{d["PathInContainer"]}:{d["CgroupPermissions"]}'
                     for d in info["HostConfig"].get("Devices") or [])
        assert got == sorted(container["devices"]), container["name"]
        rc, out = simctl.host_exec(container["host"], f"docker exec {container['name']} sh -c 'ls /dev/davinci* "
                                                      "2>/dev/null || true'")
        visible = sorted(out.split())
        if container["npu_ids"]:
            assert all(d.endswith(":rwm") for d in got)
            expected = sorted([f"/dev/davinci{i}" for i in container["npu_ids"]]
                              + ["/dev/davinci_manager"])
            assert visible == expected, f"{container['name']} sees {visible}"
        else:
            assert got == [] and visible == [], f"control-plane container {container['name']} sees {visible}"


def test_config_directories_0750_and_files_0640_root_owned(cluster):
    for host in cluster["hosts"]:
        rc, out = simctl.host_exec(host["name"], f"find /etc/pymotor/{JOB} -printf '%y %m %u:%g %p\\n'")
        assert rc == 0, out
        entries = [line.split(" ", 3) for line in out.splitlines() if line.strip()]
        planned = [c["name"] for c in cluster["plan"]["containers"] if c["host"] == host["name"]]
        assert {f"/etc/pymotor/{JOB}/{n}" for n in planned} <= {p for _, _, _, p in entries}
        for kind, mode, owner, path in entries:
            assert owner == "root:root", path
            assert (kind, mode) in (("d", "750"), ("f", "640")), f"{path}: {kind} {mode}"


def leaking_tasks(output: str) -> list[str]:
    """The tasks whose output shows a seeded secret (plus 'outside any task' for the rest of the text)."""
    chunks = re.findall(r"TASK \[([^\]]+)\][^\n]*\n(.*?)(?=\nTASK \[|\Z)", output, flags=re.S)
    leaks = sorted({task for task, chunk in chunks if any(secret in chunk for secret in SECRETS)})
    if not leaks and any(secret in output for secret in SECRETS):
        leaks = ["outside any task"]
    return leaks


def test_verbose_first_deploy_output_holds_no_secret(cluster):
    """The first deploy ran at -vvv: module arguments (invocation) and results are shown."""
    output = cluster["deploy_output"]
    assert "invocation" in output and "module_args" in output  # -vvv really shows the arguments
    assert not leaking_tasks(output)


# Ansible's verbosity is cumulative (a line shown at -v is shown at -vvv too): one run at -vvv covers -v and -vv.
VERBOSITY = "-vvv"


def test_verbose_redeploy_output_holds_no_secret(cluster, verbosity=VERBOSITY):
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], verbosity,
                      "-e", "motor_service_ready_timeout=240", "-e", "motor_service_ready_delay=1")
    output = result.stdout + result.stderr
    assert not leaking_tasks(output), f"{verbosity}: {leaking_tasks(output)}"
    assert recap_changed(result.stdout) == 0


def test_plan_file_holds_no_secret_and_is_0600(cluster):
    path = cluster["config"] / "motor_plan.json"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    text = path.read_text()
    assert not [secret for secret in SECRETS if secret in text]
    for container in cluster["plan"]["containers"]:
        tls = container["user_config"]["motor_deploy_config"]["tls_config"]["mgmt_tls_config"]
        assert tls["key_file"] == tls["passwd_file"] == "********"
        assert tls["enable_tls"] is False
        # env.json reaches a container through the set_*_env functions (and its Docker env where PyMotor sets it)
        for name in ("HF_TOKEN", "MOTOR_API_KEY", "TLS_KEY_PASSWORD"):
            assert container["shell_env"]["set_common_env"][name] == "********"
            assert container["env"].get(name, "********") == "********"


def test_the_containers_still_get_the_secrets(cluster):
    """Masked in the output only: the rendered set_common_env of every container (how env.json reaches it, as
    PyMotor's generator injects it) and its Docker env, where set, hold the real values."""
    by_name = inspected(cluster)
    for container in cluster["plan"]["containers"]:
        env = dict(item.split("=", 1) for item in by_name[container["name"]]["Config"]["Env"])
        assert env.get("HF_TOKEN", ENV_TOKEN) == ENV_TOKEN, container["name"]
        rc, out = simctl.host_exec(container["host"], f"grep -h HF_TOKEN {container['configmap_path']}/common.sh")
        assert rc == 0 and f'export HF_TOKEN="{ENV_TOKEN}"' in out, (container["name"], out)
    engine = next(c for c in cluster["plan"]["containers"] if c["role"] == "prefill")
    rc, out = simctl.host_exec(engine["host"], f"cat {engine['configmap_path']}/user_config.json")
    rendered = json.loads(out)
    assert rc == 0 and rendered["motor_deploy_config"]["tls_config"]["mgmt_tls_config"]["key_file"] == TLS_KEY_FILE
    assert rendered["motor_deploy_config"]["tls_config"]["mgmt_tls_config"]["passwd_file"] == PASSWD_FILE


def test_collect_logs_output_and_bundle_hold_no_secret(cluster, verbosity=VERBOSITY):
    dest = cluster["tmp"] / f"bundles{verbosity}"
    result = playbook("collect_logs.yml", cluster["inventory"], cluster["config"], verbosity,
                      "-e", f"motor_logs_dest={dest}")
    assert not leaking_tasks(result.stdout + result.stderr), f"{verbosity}: {leaking_tasks(result.stdout)}"
    (archive,) = list(dest.glob(f"pymotor-logs-{JOB}-*.tar.gz"))
    assert archive.stat().st_mode & 0o777 == 0o600
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read().decode("utf-8", "replace") for m in tar.getmembers() if m.isfile()}
    assert any(name.endswith("/env.json") for name in members) and any(name.endswith(".log") for name in members)
    leaks = sorted(name for name, text in members.items() if any(secret in text for secret in SECRETS))
    assert not leaks, f"bundle files with a secret: {leaks}"
    env_json = json.loads(next(text for name, text in members.items() if name.endswith("-p0-0/env.json")))
    assert env_json.get("HF_TOKEN", "********") == "********"
    assert env_json["ROLE"] == "prefill"  # the rest stays readable


def test_management_endpoints_bind_the_host_address(cluster):
    """PyMotor binds its controller / coordinator / node-manager APIs to controller_api_host / coordinator_api_host /
    pod_ip, defaulting to POD_IP: the plan must give the host address there, never 0.0.0.0, and the listening
    sockets must be on that address. (mooncake_master, the Go conductor and vLLM's KV-event ZMQ sockets have no
    host setting that PyMotor passes through and listen on every interface.)"""
    by_name = inspected(cluster)
    hosts = {h["name"]: h["ip"] for h in cluster["hosts"]}
    for container in cluster["plan"]["containers"]:
        ip = hosts[container["host"]]
        assert container["ip"] == ip
        env = dict(item.split("=", 1) for item in by_name[container["name"]]["Config"]["Env"])
        assert env["POD_IP"] == env["HOST_IP"] == ip, container["name"]
        # the Docker SDK's exec_run has returned an empty output under heavy load once: read until we get the file
        raw = wait_for(lambda: (lambda r: r[1] if r[0] == 0 and r[1].strip() else "")(
            simctl.host_exec(container["host"], f"cat {container['configmap_path']}/user_config.json")),
            timeout=60, interval=1, what=f"{container['name']}/user_config.json")
        user = json.loads(raw)
        binds = [user["motor_controller_config"].get("api_config", {}).get("controller_api_host"),
                 user["motor_coordinator_config"].get("api_config", {}).get("coordinator_api_host")]
        if container["role"] in ("prefill", "decode", "union"):
            section = user[f"motor_engine_{container['role']}_config"]
            binds.append(section.get("motor_nodemanger_config", {}).get("api_config", {}).get("pod_ip"))
        assert all(value in (None, ip) for value in binds), f"{container['name']}: {binds}"

        rc, out = simctl.host_exec(container["host"], "ss -Hltn")
        assert rc == 0, out
        listening = {}
        for line in out.splitlines():
            address, _, port = line.split()[3].rpartition(":")
            listening.setdefault(int(port), set()).add(address.strip("[]"))
        ports = container["port_map"]
        mgmt = {"controller": [ports.get("api"), ports.get("obs")],
                "coordinator": [ports.get("infer"), ports.get("mgmt"), ports.get("obs")]}.get(container["role"])
        if mgmt is None and container["role"] in ("prefill", "decode", "union"):
            mgmt = [ports["node_manager"]] + [p for e in container["endpoints"]
                                              for p in (e["service_port"], e["mgmt_port"])]
        for port in mgmt or []:
            assert listening.get(port) == {ip}, f"{container['name']} port {port} listens on {listening.get(port)}"


def test_go_archive_with_a_wrong_sha256_is_refused(tmp_path):
    """conductor_image verifies the Go archive before it starts a build container: a mismatch stops the build,
    names both checksums, and leaves the target tag and Docker as they were."""
    base, tarball, actual = make_build_inputs(tmp_path)
    wrong = "0123456789abcdef" * 4
    target = "local/pymotor-fault-ib:checksum"
    subprocess.run(["docker", "tag", "local/debian:bookworm", target], check=True)
    previous = image_id(target)
    result = conductor_image_run(tmp_path, base, target, tarball, wrong, "pymotor-fault-sha-build")
    assert result.returncode != 0
    # The YAML callback folds long messages: compare with whitespace collapsed.
    assert f"has sha256 {actual}, expected {wrong}: refusing to build with it" in " ".join(result.stdout.split())
    assert "Start the build container" not in result.stdout
    assert image_id(target) == previous and not container_exists("pymotor-fault-sha-build")
