# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Issue 47: an encrypted TLS private key with upstream's passwd_file (the password in clear in that file, read
stripped: password_utils.py:45-47, cert_util.py:797-805) works in every TLS client of ours: the readiness waits and
verify's reads (motor_wait), the controller and pod healers (heal.py), the health check (probe.py), the affinity
probe (motor_ops_probe.py); and a TLS setup that fails is "nothing answered" for the healer, never an exception
that ends its round."""

from __future__ import annotations

import datetime
import importlib.util
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_wait
from ansible_collections.pymotor.ascend.plugins.plugin_utils import heal, probe

REPO = Path(__file__).resolve().parents[4]
PASSWORD = "FAKE-keypass-47"  # noqa: S105 (test data)


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory):
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = tmp_path_factory.mktemp("keys")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pymotor test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    (directory / "server.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "server.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.BestAvailableEncryption(PASSWORD.encode())))
    (directory / "key_pwd.txt").write_text(PASSWORD + "\n")  # upstream strips the file's text
    (directory / "wrong_pwd.txt").write_text("FAKE-not-the-password\n")
    return {"ca_file": str(directory / "server.crt"), "cert_file": str(directory / "server.crt"),
            "key_file": str(directory / "server.key"), "passwd_file": str(directory / "key_pwd.txt"),
            "check_hostname": False, "wrong": str(directory / "wrong_pwd.txt")}


def affinity_probe():
    spec = importlib.util.spec_from_file_location(
        "motor_ops_probe", REPO / "roles" / "motor_operations" / "files" / "motor_ops_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_client_loads_an_encrypted_key_with_passwd_file(encrypted):
    tls = {k: v for k, v in encrypted.items() if k != "wrong"}
    assert heal._context(tls) is not None
    assert probe._context(tls) is not None
    assert motor_wait._context(tls) is not None
    assert affinity_probe().context(tls) is not None


def test_a_wrong_password_fails_loudly_not_silently(encrypted):
    tls = dict(encrypted, passwd_file=encrypted["wrong"])
    with pytest.raises(Exception):  # noqa: B017, PT011 (ssl.SSLError; what matters is that it does not load)
        heal._context(tls)


def test_the_healer_reads_nothing_when_its_tls_setup_fails(encrypted, capsys):
    """The context is built inside the request's try: a wrong password is one logged line and "no answer" (the
    repair rule never acts on what it could not read), not an exception that ends every round."""
    target = {"url": "https://127.0.0.1:9/readiness", "tls": dict(encrypted, passwd_file=encrypted["wrong"])}
    assert heal._fetch(target) == (-1, None)
    assert heal._fetch(target) == (-1, None)
    assert capsys.readouterr().out.count("TLS setup failed") == 1
    assert probe.alive(target, 1) is False
    status, _body, _text = motor_wait.get_answer(target["url"], 1, target["tls"])
    assert status == -1


def test_no_password_never_asks_a_terminal(encrypted):
    """Without passwd_file an encrypted key fails at once (OpenSSL would otherwise prompt on the terminal)."""
    tls = dict(encrypted, passwd_file="")
    for build in (heal._context, probe._context, motor_wait._context, affinity_probe().context):
        with pytest.raises(Exception):  # noqa: B017, PT011 (ssl.SSLError)
            build(tls)
