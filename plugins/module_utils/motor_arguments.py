# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Argument specs shared by module files and action plugins. They import Ansible (env_fallback), so they live apart
from the standard-library code a host runs without AnsiballZ (motor_docker, motor_host_probe, motor_configmap,
motor_start)."""

from __future__ import annotations

from ansible.module_utils.basic import env_fallback

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_configmap import RENDER_OPTIONS
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import DEFAULT_DOCKER_HOST

# The connection options of every module that talks to Docker (documented by the pymotor.ascend.docker fragment).
# Aliases and environment variables follow the names the Docker CLI and community.docker use.
DOCKER_CONNECTION_ARGS = dict(
    docker_host=dict(type="str", default=DEFAULT_DOCKER_HOST, aliases=["docker_url"],
                     fallback=(env_fallback, ["DOCKER_HOST"])),
    tls=dict(type="bool", default=False, fallback=(env_fallback, ["DOCKER_TLS"])),
    validate_certs=dict(type="bool", default=True, aliases=["tls_verify"]),
    ca_path=dict(type="path", aliases=["ca_cert", "tls_ca_cert", "cacert_path"]),
    client_cert=dict(type="path", aliases=["tls_client_cert", "cert_path"]),
    client_key=dict(type="path", aliases=["tls_client_key", "key_path"]),
    tls_hostname=dict(type="str", fallback=(env_fallback, ["DOCKER_TLS_HOSTNAME"])),
    api_version=dict(type="str", default="auto", aliases=["docker_api_version"],
                     fallback=(env_fallback, ["DOCKER_API_VERSION"])),
    timeout=dict(type="int", default=60, fallback=(env_fallback, ["DOCKER_TIMEOUT"])),
)
DOCKER_CONNECTION_REQUIRED_TOGETHER = [["client_cert", "client_key"]]

HOST_PROBE_ARGUMENT_SPEC = dict(
    DOCKER_CONNECTION_ARGS,
    job_id=dict(type="str", required=True),
    image=dict(type="str", default=""),
    paths=dict(type="list", elements="path", default=[]),
    model_dirs=dict(type="list", elements="path", default=[]),
    links=dict(type="bool", default=False),
    hccn_tool=dict(type="path", default="/usr/local/Ascend/driver/tools/hccn_tool"),
    driver_dir=dict(type="path", default="/usr/local/Ascend/driver"),
    disk_path=dict(type="path", default="/var/log"),
    inspect=dict(type="bool", default=False),
)

NPU_REACH_ARGUMENT_SPEC = dict(
    hccn_tool=dict(type="path", default="/usr/local/Ascend/driver/tools/hccn_tool"),
    pings=dict(type="list", elements="dict", default=[], options=dict(
        npu=dict(type="int", required=True),
        address=dict(type="str", required=True),
        peer_host=dict(type="str", required=True),
        peer_npu=dict(type="int", required=True),
    )),
)

CONTAINER_OPTIONS = dict(
    name=dict(type="str", required=True),
    image=dict(type="str", required=True),
    command=dict(type="list", elements="str", default=[]),
    env=dict(type="dict", default={}),
    secret_env=dict(type="dict", default={}, no_log=True),
    devices=dict(type="list", elements="str", default=[]),
    volumes=dict(type="list", elements="str", default=[]),
    ipc_mode=dict(type="str"),
    stdin_open=dict(type="bool", default=False),
    shm_size=dict(type="str"),
    cap_add=dict(type="list", elements="str", default=[]),
    security_opt=dict(type="list", elements="str", default=[]),
    cap_drop=dict(type="list", elements="str", default=[]),
    read_only=dict(type="bool", default=False),
    memory=dict(type="str"),
    cpuset_cpus=dict(type="str"),
    labels=dict(type="dict", default={}),
    restart_policy=dict(type="str", default="unless-stopped"),
    init=dict(type="bool", default=False),
    log_driver=dict(type="str", default="json-file"),
    log_options=dict(type="dict", default={}),
    group=dict(type="int"),
    restart=dict(type="bool", default=False),
    healthcheck=dict(type="dict", options=dict(
        test=dict(type="list", elements="str", required=True),
        interval=dict(type="int", default=30),
        timeout=dict(type="int", default=30),
        retries=dict(type="int", default=3),
        start_period=dict(type="int", default=0),
    )),
)

CONTAINERS_ARGUMENT_SPEC = dict(
    DOCKER_CONNECTION_ARGS,
    configmap=dict(type="dict", options=RENDER_OPTIONS),
    job_id=dict(type="str", required=True),
    stop=dict(type="list", elements="list", default=[]),
    stop_timeout=dict(type="int", default=10),
    remove=dict(type="list", elements="str", default=[]),
    containers=dict(type="list", elements="dict", default=[], options=CONTAINER_OPTIONS),
)
