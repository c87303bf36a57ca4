"""TLS on (mgmt_tls_config and infer_tls_config of motor_deploy_config.tls_config): the stand-in serves https with
the named cert/key like PyMotor's servers, and deploy.yml (readiness) and verify.yml (status reads, inference and the
affinity probe) use https with the CA / client cert / key those sections name. One A2 engine host (1 P + 1 D) and a
control host, prefix pymotor-tls."""

from __future__ import annotations

import base64
import datetime
import functools
import ipaddress
import json
import os
import subprocess
import sys

import pytest
import requests

import simctl
import support
from support import REPO

PREFIX = "pymotor-tls" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts per concurrent run
IMAGE = "local/pymotor-tls:test"
JOB = "tls-job"

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
                                             serialization.NoEncryption())}
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
    certs = tmp / "certs"
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True)
        simctl.load_image(PREFIX, IMAGE)
        files = make_certs(certs, [h["ip"] for h in hosts])
        for host in hosts:  # the same paths on every host (mounted into the containers) and on the controller
            for name, data in files.items():
                rc, out = simctl.host_exec(host["name"], f"mkdir -p {certs} && echo {base64.b64encode(data).decode()}"
                                                         f" | base64 -d > {certs / name} && chmod 600 {certs / name}")
                assert rc == 0, out
        tls = {"enable_tls": True, "ca_file": str(certs / "ca.crt"), "cert_file": str(certs / "server.crt"),
               "key_file": str(certs / "server.key")}
        config_dir = tmp / "config"
        config_dir.mkdir()
        user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
        user["motor_deploy_config"].update(job_id=JOB, image_name=IMAGE,
                                           tls_config={"mgmt_tls_config": tls, "infer_tls_config": dict(tls)})
        (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
        (config_dir / "env.json").write_text((REPO / "examples/seed_pd_separation/env.json").read_text())
        inventory = tmp / "hosts.yml"
        simctl.write_inventory(hosts, inventory)
        volumes = json.dumps({"motor_service_extra_volumes": [f"{certs}:{certs}:ro"]})
        deploy = playbook("deploy.yml", inventory, config_dir, "-e", "motor_service_ready_timeout=240", "-e", volumes)
        yield {"hosts": hosts, "inventory": inventory, "config": config_dir, "tmp": tmp, "certs": certs,
               "volumes": volumes, "deploy": deploy}
    finally:
        simctl.down(PREFIX)


def ctl(cluster):
    return [h for h in cluster["hosts"] if h["name"].endswith("-ctl")][0]


def test_deploy_waits_over_https(cluster):
    """The readiness waits held over https (deploy passed); the controller and coordinator really serve TLS: plain
    http gets no answer, https with the named CA and client cert does."""
    assert "the coordinator reports ready" in cluster["deploy"].stdout
    ip, certs = ctl(cluster)["ip"], cluster["certs"]
    for port in (2026, 1026):  # controller API, coordinator management
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"http://{ip}:{port}/readiness", timeout=5)
        resp = requests.get(f"https://{ip}:{port}/readiness", timeout=5, verify=str(certs / "ca.crt"),
                            cert=(str(certs / "server.crt"), str(certs / "server.key")))
        assert resp.status_code == 200


def test_verify_passes_with_tls_on(cluster):
    report_path = cluster["tmp"] / "report.json"
    result = playbook("verify.yml", cluster["inventory"], cluster["config"], "-e", f"motor_verify_report={report_path}",
                      "-e", cluster["volumes"])
    report = json.loads(report_path.read_text())
    assert report["passed"], report
    affinity = report["affinity"]
    assert affinity["passed"] and affinity["tokens"]["source"] == "tokenize"  # /tokenize over https
    assert all(p["verdict"] == "ok" and not p["notes"] for p in affinity["prefixes"])  # /metrics over https
    assert "checks passed, 0 failed" in result.stdout
