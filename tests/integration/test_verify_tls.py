"""TLS on (mgmt_tls_config and infer_tls_config of motor_deploy_config.tls_config): the stand-in serves https with
the named cert/key like PyMotor's servers, and deploy.yml (readiness) and verify.yml (status reads, inference and the
affinity probe) use https with the CA / client cert / key those sections name. The key is encrypted, its password in
the sections' passwd_file (upstream's cert_util.py:797-805), and API keys are on (issue 47: api_key_config; verify
sends motor_api_key from a vars file, as Vault would give it; a wrong key gets upstream's 403, none 401). Then, with
the key from the same vars file, benchmark.yml replays a few requests, a killed engine is healed with no command
and a change of the decode engines' config is rolled through deploy.yml, each decode instance drained first; after all
that the plain key is in no file of any host nor in the controller's job files or the playbooks' output. The hosts keep the certificates
at HOST_CERTS, which tls_config names (the containers' paths) and which the controller does not have: every client on
the controller reads its own copies, which the motor_tls_* variables name. Two A2 hosts (1 P + 2 D; the first is the
control host too, so each decode instance has a host of its own and drains), prefix pymotor-tls. The tests run in
file order on one cluster."""

from __future__ import annotations

import base64
import datetime
import functools
import http.client
import ipaddress
import json
import os
import re
import ssl
import subprocess
import sys
import time

import pytest
import requests

import simctl
import support
from support import REPO

PREFIX = "pymotor-tls" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts per concurrent run
IMAGE = "local/pymotor-tls:test"
JOB = "tls-job"
KEY_PASSWORD = "FAKE-tls-keypass-47"  # noqa: S105 (test data)
API_KEY = "FAKE-apikey-integration-47d9"  # the plain key: on the controller, in the user's own files only
HOST_CERTS = "/etc/pymotor-tls-certs"  # on the hosts (and in the containers) only, not on the controller

pytestmark = pytest.mark.docker

playbook = functools.partial(support.playbook, image=IMAGE)


def make_certs(directory, ips):
    """A CA and one certificate (server and client use) for every host IP, PEM files in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pymotor test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(set(ips) | {"127.0.0.1"})]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pymotor")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    files = {"ca.crt": ca.public_bytes(pem), "server.crt": cert.public_bytes(pem),
             "server.key": key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                             serialization.BestAvailableEncryption(KEY_PASSWORD.encode())),
             "key_pwd.txt": (KEY_PASSWORD + "\n").encode()}
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
        (directory / name).chmod(0o600)
    return files


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)
    certs = tmp / "certs"  # the controller's copies
    assert not os.path.exists(HOST_CERTS)  # a client that read tls_config's paths here would fail
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(2, "800I_A2", PREFIX)  # the first is the control host too (simctl.write_inventory)
        simctl.load_image(PREFIX, IMAGE)
        files = make_certs(certs, [h["ip"] for h in hosts])
        for host in hosts:  # the same paths on every host, mounted into the containers
            for name, data in files.items():
                rc, out = simctl.host_exec(host["name"], f"mkdir -p {HOST_CERTS} && echo {base64.b64encode(data).decode()}"
                                                         f" | base64 -d > {HOST_CERTS}/{name} && chmod 600 {HOST_CERTS}/{name}")
                assert rc == 0, out
        tls = {"enable_tls": True, "ca_file": f"{HOST_CERTS}/ca.crt", "cert_file": f"{HOST_CERTS}/server.crt",
               "key_file": f"{HOST_CERTS}/server.key", "passwd_file": f"{HOST_CERTS}/key_pwd.txt"}
        config_dir = tmp / "config"
        config_dir.mkdir()
        user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
        user["motor_deploy_config"].update(job_id=JOB, image_name=IMAGE, d_instances_num=2,
                                           tls_config={"mgmt_tls_config": tls, "infer_tls_config": dict(tls)})
        user["motor_coordinator_config"]["api_key_config"] = {"enable_api_key": True,
                                                              "valid_keys": [API_KEY, "FAKE-apikey-second-47"]}
        (config_dir / "secrets.yml").write_text(  # what Vault would decrypt, and the controller's TLS files
            f"motor_api_key: {API_KEY}\nmotor_tls_ca_file: {certs / 'ca.crt'}\nmotor_tls_cert_file: {certs / 'server.crt'}\n"
            f"motor_tls_key_file: {certs / 'server.key'}\nmotor_tls_passwd_file: {certs / 'key_pwd.txt'}\n")
        (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
        (config_dir / "env.json").write_text((REPO / "examples/seed_pd_separation/env.json").read_text())
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        volumes = json.dumps({"motor_service_extra_volumes": [f"{HOST_CERTS}:{HOST_CERTS}:ro"]})
        deploy = playbook("deploy.yml", inventory, config_dir, "-e", "motor_service_ready_timeout=240", "-e", volumes,
                          "-e", f"@{config_dir / 'secrets.yml'}")
        yield {"hosts": hosts, "inventory": inventory, "config": config_dir, "tmp": tmp, "certs": certs,
               "volumes": volumes, "deploy": deploy, "outputs": [deploy]}
    finally:
        simctl.down(PREFIX)


def ctl(cluster):
    return cluster["hosts"][0]  # motor_control_hosts (simctl.write_inventory: the first NPU host)


def https(cluster, method, url, body=None, headers=None):
    """(status, body) of one request with the CA and the encrypted client key (requests takes no key password)."""
    certs = cluster["certs"]
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(str(certs / "server.crt"), str(certs / "server.key"), password=KEY_PASSWORD)
    host, rest = url.split("://", 1)[1].split("/", 1)
    conn = http.client.HTTPSConnection(host.split(":")[0], int(host.split(":")[1]), timeout=30, context=context)
    try:
        conn.request(method, "/" + rest, body=None if body is None else json.dumps(body),
                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def test_deploy_waits_over_https(cluster):
    """The readiness waits held over https (deploy passed); the controller and coordinator really serve TLS: plain
    http gets no answer, https with the named CA and client cert does."""
    assert "the coordinator reports ready" in cluster["deploy"].stdout
    ip, certs = ctl(cluster)["ip"], cluster["certs"]
    for port in (2026, 1026):  # controller API, coordinator management
        with pytest.raises(requests.exceptions.ConnectionError):  # a read timeout is no ConnectionError: 30 s
            requests.get(f"http://{ip}:{port}/readiness", timeout=30)
        assert https(cluster, "GET", f"https://{ip}:{port}/readiness")[0] == 200
    assert certs.is_dir()


def test_verify_passes_with_tls_on(cluster):
    report_path = cluster["tmp"] / "report.json"
    result = playbook("verify.yml", cluster["inventory"], cluster["config"], "-e", f"motor_verify_report={report_path}",
                      "-e", cluster["volumes"], "-e", f"@{cluster['config'] / 'secrets.yml'}")
    cluster["outputs"].append(result)
    report = json.loads(report_path.read_text())
    assert report["passed"], report
    affinity = report["affinity"]
    assert affinity["passed"] and affinity["tokens"]["source"] == "tokenize"  # /tokenize over https
    assert all(p["verdict"] == "ok" and not p["notes"] for p in affinity["prefixes"])  # /metrics over https
    assert "checks passed, 0 failed" in result.stdout


def test_coordinator_checks_api_keys_as_upstream(cluster):
    """The coordinator's config holds the keys in PBKDF2 form only; the right key 200, a wrong one 403, none 401
    (upstream's inference_server.py:213-229)."""
    url = f"https://{ctl(cluster)['ip']}:1025/v1/chat/completions"
    body = {"model": "qwen3-8B", "max_tokens": 2, "messages": [{"role": "user", "content": "Reply with one word."}]}
    assert https(cluster, "POST", url, body)[0] == 401
    assert https(cluster, "POST", url, body, {"Authorization": "Bearer FAKE-wrong-key"})[0] == 403
    status, text = https(cluster, "POST", url, body, {"Authorization": f"Bearer {API_KEY}"})
    assert status == 200, text


def key_vars(cluster):
    """The vars file of motor_api_key, as every playbook of an operator's run gets it (Vault would decrypt it)."""
    return ("-e", f"@{cluster['config'] / 'secrets.yml'}")


def chat_with_key(cluster) -> int:
    url = f"https://{ctl(cluster)['ip']}:1025/v1/chat/completions"
    body = {"model": "qwen3-8B", "max_tokens": 2, "messages": [{"role": "user", "content": "still there?"}]}
    try:
        return https(cluster, "POST", url, body, {"Authorization": f"Bearer {API_KEY}"})[0]
    except (OSError, http.client.HTTPException):
        return 0


def test_benchmark_replays_with_the_key_over_https(cluster):
    """benchmark.yml: a few requests through the coordinator's https API with motor_api_key, the prefill engines'
    counters read over https."""
    report_path = cluster["tmp"] / "bench" / "report.json"
    report_path.parent.mkdir()
    result = playbook("benchmark.yml", cluster["inventory"], cluster["config"], "-e", "motor_bench_requests=4",
                      "-e", f"motor_bench_report={report_path}", "-e", cluster["volumes"], *key_vars(cluster))
    cluster["outputs"].append(result)
    run = json.loads(report_path.read_text())["runs"][0]
    assert run["requests"] == 4 and run["failed"] == 0, run["errors"]
    assert sum(i["requests"] for i in run["per_instance"].values()) == 4, run["per_instance"]  # /metrics read


def test_a_killed_engine_is_healed_without_a_command(cluster):
    """The decode engine's process killed on its host: Docker's restart policy and the healers (their probes over
    https with the encrypted key) bring the job back to serving with no command; verify.yml then passes."""
    engine = f"{JOB}-d0-0"
    engine_host = next(h["name"] for h in cluster["hosts"]
                       if simctl.host_exec(h["name"], f"docker inspect -f ok {engine}")[0] == 0)
    rc, pid = simctl.host_exec(engine_host, f"docker inspect -f '{{{{.State.Pid}}}}' {engine}")
    assert rc == 0 and pid.strip().isdigit() and int(pid) > 0, pid
    rc, out = simctl.host_exec(engine_host, f"kill -9 {pid.strip()}")
    assert rc == 0, out
    count = f"docker inspect -f '{{{{.RestartCount}}}} {{{{.State.Running}}}}' {engine}"

    def restarted():
        restarts, running = (simctl.host_exec(engine_host, count)[1].split() + ["", ""])[:2]
        return restarts.isdigit() and int(restarts) > 0 and running == "true"
    support.wait_for(restarted, timeout=120, interval=2, what=f"{engine} restarted by Docker's restart policy")
    support.wait_for(lambda: chat_with_key(cluster) == 200, timeout=300, interval=5,
                     what="the job serving chat (with the key, over https) again after the engine was killed")
    # the restarted pod's registration may be refused ("already registered") until a healer restarts it once more
    # (the pod's own after 30 s, the controller's after 75 s: docs/design.md): verify (read-only) until it passes
    report_path = cluster["tmp"] / "report-healed.json"

    deadline = time.monotonic() + 300
    while True:
        result = playbook("verify.yml", cluster["inventory"], cluster["config"],
                          "-e", f"motor_verify_report={report_path}", "-e", cluster["volumes"], *key_vars(cluster),
                          check=False)
        cluster["outputs"].append(result)
        report = json.loads(report_path.read_text())
        if (report["passed"] and result.returncode == 0) or time.monotonic() > deadline:
            break
        time.sleep(10)
    assert report["passed"] and result.returncode == 0, [c for c in report["checks"] if not c["ok"]]
    assert {c["container"]: c for c in report["containers"]}[engine]["restarts"] >= 1


def test_a_decode_change_rolls_each_instance_drained_with_keys_and_tls(cluster):
    """deploy.yml after a change of the decode engines' config: both decode instances roll, one at a time, each first
    drained (one per host, so the coordinator's /metrics?type=dp names one id at its IP): its del answered 200 over
    https with the encrypted key, its engines read idle on their https /metrics, then stopped; the readiness and
    routing waits over https too, all with the controller's copies of the TLS files. The prefill instance keeps
    serving, so no motor_roll_allow_outage. Then the job serves with the key and a re-run changes nothing."""
    path = cluster["config"] / "user_config.json"
    user = json.loads(path.read_text())
    user["motor_engine_decode_config"]["engine_config"]["gpu_memory_utilization"] = 0.85
    path.write_text(json.dumps(user, indent=2))
    before = {h["name"]: simctl.host_exec(h["name"], f"docker ps -q --filter name={JOB}-p0-0")[1].strip()
              for h in cluster["hosts"]}
    args = ("-e", "motor_service_ready_timeout=240", "-e", cluster["volumes"], *key_vars(cluster))
    result = playbook("deploy.yml", cluster["inventory"], cluster["config"], *args)
    cluster["outputs"].append(result)
    assert "rolling" in result.stdout, result.stdout[-4000:]
    text = " ".join(result.stdout.split())
    # the del sent for both decode instances and answered 200 (roll_drain.yml's changed_when), their idle waits held
    assert text.count("Take the instance out of the coordinator's routing] *") == 2, result.stdout[-6000:]
    assert "was not taken out of the coordinator's routing" not in text, result.stdout[-6000:]
    drained = re.findall(r"Take the instance out of the coordinator's routing\] \**\s*(\w+):", result.stdout)
    assert drained == ["changed", "changed"], drained
    idle = re.findall(r"Wait until the instance's engines hold no running and no waiting request\] \**\s*(\w+):",
                      result.stdout)
    assert idle == ["ok", "ok"], idle
    assert "stops with requests in flight" not in text
    after = {h["name"]: simctl.host_exec(h["name"], f"docker ps -q --filter name={JOB}-p0-0")[1].strip()
             for h in cluster["hosts"]}
    assert after == before and any(after.values()), (before, after)  # the prefill pod was not touched
    support.wait_for(lambda: chat_with_key(cluster) == 200, timeout=120, interval=3, what="chat after the roll")
    again = playbook("deploy.yml", cluster["inventory"], cluster["config"], *args)
    cluster["outputs"].append(again)
    assert support.recap_changed(again.stdout) == 0, again.stdout[-4000:]


def test_plain_key_is_nowhere_but_the_users_own_files(cluster):
    """After the deploy, verify, the benchmark, the heal and the roll: every file of every simulated host
    (containers' configs, logs and layers, Docker's state), the controller's job files (plan, verify and benchmark
    reports) and every playbook's output: the plain API key is in none of them."""
    for host in cluster["hosts"]:
        # not the kernel's views (proc, sys, dev) nor Docker's network namespace handles (nsfs: not readable)
        rc, out = simctl.host_exec(host["name"], ["grep", "-rlF", "-D", "skip", "--exclude-dir=proc",
                                                  "--exclude-dir=sys", "--exclude-dir=dev", "--exclude-dir=netns",
                                                  API_KEY, "/"])
        assert rc == 1 and not out.strip(), (host["name"], out[-2000:])  # grep: 1 = every file read, none matched
    own = {cluster["config"] / "user_config.json", cluster["config"] / "secrets.yml"}
    files = [p for p in cluster["tmp"].rglob("*") if p.is_file() and p not in own]
    assert cluster["config"] / "motor_plan.json" in files
    assert not [str(p) for p in files if API_KEY.encode() in p.read_bytes()]
    for result in cluster["outputs"]:
        assert API_KEY not in result.stdout + result.stderr
