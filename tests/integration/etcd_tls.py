"""Certificates for the etcd suites (tests/integration/test_etcd.py, tests/conformance/test_standby.py) and the
controller's TLS unit tests: a CA, leaf certificates for server and client use with IP SANs, and a file placed on a
simulated host (root's, mode 0600). Only ``place`` needs the simulated hosts (simctl, imported there)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os


def pem_ca(common_name: str):
    """A self-signed CA: (key, certificate, certificate PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert, cert.public_bytes(serialization.Encoding.PEM)


def pem_leaf(ca, common_name: str, ips: list[str], password: bytes | None = None) -> dict[str, bytes]:
    """A certificate of ``ca`` for server and client use with ``ips`` as SANs: {"crt", "key"} PEM bytes."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key, ca_cert, _ = ca
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(i)) for i in ips]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return {"crt": cert.public_bytes(serialization.Encoding.PEM),
            "key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                     encryption)}


def place(host: str, path: str, data: bytes) -> None:
    import simctl  # pylint: disable=import-outside-toplevel  # the unit tests use the certificates only

    rc, out = simctl.host_exec(host, f"mkdir -p {os.path.dirname(path)} && echo {base64.b64encode(data).decode()} "
                                     f"| base64 -d > {path} && chmod 600 {path}")
    assert rc == 0, out
