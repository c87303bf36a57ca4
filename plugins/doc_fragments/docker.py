# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The Docker connection options of the modules that talk to the Docker engine (module_utils/motor_docker.py)."""

from __future__ import annotations


class ModuleDocFragment:
    """Documentation fragment pymotor.ascend.docker."""

    DOCUMENTATION = r"""
options:
  docker_host:
    description:
      - The Docker engine to talk to - C(unix:///path/to/docker.sock), or C(tcp://host:port) (plain HTTP unless
        O(tls) is set, or C(https://host:port)).
      - If not given, the environment variable E(DOCKER_HOST) is used, else C(unix:///var/run/docker.sock).
    type: str
    default: unix:///var/run/docker.sock
    aliases: [docker_url]
  tls:
    description:
      - Talk TLS to a C(tcp://) O(docker_host) (implied by C(https://) and by O(client_cert)).
      - If not given, E(DOCKER_TLS) is used.
    type: bool
    default: false
  validate_certs:
    description:
      - Verify the engine's certificate (against O(ca_path), or the system's CAs) and its host name (O(tls_hostname)).
      - Only for testing turn it off.
    type: bool
    default: true
    aliases: [tls_verify]
  ca_path:
    description:
      - CA certificate (PEM) to verify the engine's certificate with. If not given and E(DOCKER_CERT_PATH) is set,
        its C(ca.pem).
    type: path
    aliases: [ca_cert, tls_ca_cert, cacert_path]
  client_cert:
    description:
      - Client certificate (PEM) for an engine that requires one (C(dockerd --tlsverify)); with O(client_key).
        If not given and E(DOCKER_CERT_PATH) is set, its C(cert.pem).
    type: path
    aliases: [tls_client_cert, cert_path]
  client_key:
    description:
      - Key (PEM) of O(client_cert). If not given and E(DOCKER_CERT_PATH) is set, its C(key.pem).
    type: path
    aliases: [tls_client_key, key_path]
  tls_hostname:
    description:
      - Host name the engine's certificate must name, when it differs from the host of O(docker_host).
      - If not given, E(DOCKER_TLS_HOSTNAME) is used, else the host of O(docker_host).
    type: str
  api_version:
    description:
      - Engine API version to use (for example C(1.43)); C(auto) asks the engine for its own. At least C(1.40)
        (Docker 19.03).
      - If not given, E(DOCKER_API_VERSION) is used.
    type: str
    default: auto
    aliases: [docker_api_version]
  timeout:
    description:
      - Seconds to wait for the engine to answer one call. If not given, E(DOCKER_TIMEOUT) is used.
    type: int
    default: 60
notes:
  - The modules talk to the Docker Engine API with the Python standard library only (C(http.client), C(socket),
    C(ssl)) - neither the Docker SDK for Python nor the C(docker) CLI is needed on the hosts.
"""
