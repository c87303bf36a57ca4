# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The contract every phase shares: hardware, default ports, roles, labels, the job_id rule and ``Problem``.

Each fact lives here once; config/, plan/, reconcile/ and operations/ import it (docs/design.md, "Layout").
Pure data and tiny pure functions, no I/O.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# --------------------------------------------------------------------------------------------------
# Hardware: NPUs per host (Atlas 800I A2: 8 NPUs; 800I A3: 16 NPU dies, used in die pairs).
# Atlas A5: PyMotor's HARDWARE_TYPE_950I_A5 list (examples/deployer/lib/constant.py); the number a type ends with is its
# NPUs per node, as in the MindCluster schedule policy the deployer gives each (chip<N>-node<M>: M NPUs per node).
HARDWARE_A5 = ("350-Atlas-8", "350-Atlas-16", "350-Atlas-4p-8", "350-Atlas-4p-16", "850-Atlas-8p-8",
               "850-SuperPod-Atlas-8", "950-SuperPod-Atlas-8")
HARDWARE_NPUS = {"800I_A2": 8, "800I_A3": 16, **{hw: int(hw.rsplit("-", 1)[1]) for hw in HARDWARE_A5}}
# Products whose NPU count is the product's (the A5 numbers are schedule policies: a host may have more, issue 36).
FIXED_NPU_HARDWARE = ("800I_A2", "800I_A3")
# NPUs that belong together on one host: A3 die pairs; the A5 "4p" cards hold 4 chips (schedule policy chip4-node<M>).
# A pod's block starts on a group boundary when it fills whole groups, and never straddles one when it is smaller.
NPU_GROUP = {"800I_A3": 2, "350-Atlas-4p-8": 4, "350-Atlas-4p-16": 4}
NPU_GROUP_NAME = {"800I_A3": "die pair", "350-Atlas-4p-8": "4-chip card", "350-Atlas-4p-16": "4-chip card"}
# The transfer protocol PyMotor's deployer gives the SGLang engines' memfabric store: device RDMA on A2, SDMA elsewhere.
MF_TRANSFER_PROTOCOL = {"800I_A2": "device_rdma"}
MF_TRANSFER_PROTOCOL_DEFAULT = "sdma"
# PD heterogeneous deployment (A5): prefill and decode on hosts labelled differently, PyMotor's defaults.
PD_HETEROGENEOUS_LABEL_KEY = "card_type"
PD_HETEROGENEOUS_VALUES = {"prefill": "Ascend950PR", "decode": "Ascend950DT"}
PD_HETEROGENEOUS_VALUE_KEYS = {"prefill": "pd_heterogeneous_prefill_label_value",
                               "decode": "pd_heterogeneous_decode_label_value"}


def npu_align(hardware, count):
    """Alignment of a pod's NPU block of ``count`` on ``hardware`` (see NPU_GROUP)."""
    group = NPU_GROUP.get(hardware, 1)
    if count % group == 0:
        return group
    if count < group:
        align = 1
        while align < count:
            align *= 2
        return align if group % align == 0 else group
    return 1


def splits_npu_group(hardware, count):
    """True when pods of ``count`` NPUs leave parts of NPU groups (an odd count on A3, 6 on a 4p A5 host)."""
    group = NPU_GROUP.get(hardware, 1)
    if count < group:
        return count > 1 and group % count != 0
    return count % group != 0


# Inventory groups.
ENGINE_GROUP = "motor_engine_hosts"
CONTROL_GROUP = "motor_control_hosts"

# --------------------------------------------------------------------------------------------------
# Roles.
# The engine roles the bare-metal plan places (PyMotor's prefill, decode, and union of PD-hybrid).
PLANNED_ENGINE_ROLES = ("prefill", "decode", "union")
# Every engine role PyMotor knows (encode too: a container of it, from a newer deploy, restarts like an engine).
ENGINE_ROLES = PLANNED_ENGINE_ROLES + ("encode",)
# Engine roles whose DP ranks publish KV events to the KV conductor (KV-cache affinity).
PUBLISHING_ROLES = ("prefill", "union")
CONTROL_ROLES = ("kv_pool", "controller", "coordinator", "kv_conductor", "kv_watcher", "mf_store")
# The collection's own container next to the KV conductor (KV-cache affinity only): upstream's coordinator registers
# each prefill/union DP rank with the conductor once, so a conductor that restarts forgets them for good; the watcher
# re-registers them (roles/motor_service/files/motor_kv_watcher.py, started with python3 from the job's image).
WATCHER_ROLE = "kv_watcher"
WATCHER_SCRIPT = "motor_kv_watcher.py"
WATCHER_CONFIG = "kv_watcher.json"
WATCHER_INTERVAL = 2  # seconds between two reads of the conductor's /services (self-healing within 60 s)
WATCHER_STATE = "/var/tmp/motor_kv_watcher.json"  # in the container's own filesystem: kept across its restarts
# Control roles that get the Ascend driver directory (read-only, where the host has it), as upstream's
# kv_pool_template.yaml / kv_conductor_template.yaml mount /usr/local/Ascend/driver: mounts profile "kv".
KV_DRIVER_ROLES = ("kv_pool", "kv_conductor")
# With ENABLE_GEN_CERT=true in set_common_env, upstream's common.sh (setup_tls_certificates) makes each container's
# TLS certificates from the CA in CA_PATH with the script GEN_CERT_SCRIPT, both on the host under /mnt in
# PyMotor's pod templates (which mount /mnt); the collection mounts just those directories, read-only.
GEN_CERT_DEFAULTS = {"CA_PATH": "/mnt/cert_scripts/ca", "GEN_CERT_SCRIPT": "/mnt/cert_scripts/openssl_gen_cert.sh"}
# Start order: KV pool, then the control plane, then the engines (each tier up on every host before the next).
TIER_KV_POOL = 0
TIER_CONTROL = 1
TIER_ENGINE = 2
# Display and stop order of the roles (status tables: control plane first).
ROLE_ORDER = {"kv_pool": 0, "controller": 1, "coordinator": 2, "kv_conductor": 3, "kv_watcher": 4, "mf_store": 5,
              "prefill": 6, "decode": 7, "union": 8}
# Container name letter of an engine role: <job_id>-<letter><instance>-<pod>.
ROLE_LETTER = {"prefill": "p", "decode": "d", "union": "u"}
# motor_deploy_config keys per engine role: (instances, pods per instance, NPUs per pod).
DEPLOY_KEYS = {
    "prefill": ("p_instances_num", "single_p_instance_pod_num", "p_pod_npu_num"),
    "decode": ("d_instances_num", "single_d_instance_pod_num", "d_pod_npu_num"),
    "union": ("hybrid_instances_num", "single_hybrid_instance_pod_num", "hybrid_pod_npu_num"),
}
# The instance counts: scaling changes only these, so they are no part of any config hash.
SCALE_KEYS = ("p_instances_num", "d_instances_num", "hybrid_instances_num", "e_instances_num")
# user_config section of an engine role.
ENGINE_SECTIONS = {
    "prefill": "motor_engine_prefill_config",
    "decode": "motor_engine_decode_config",
    "union": "motor_engine_union_config",
}

# --------------------------------------------------------------------------------------------------
# Default ports (host networking: the plan moves a port up to the next free one when it is taken).
PORT_MIN = 1024  # the plan binds nothing privileged
PORT_MAX = 65535
# PyMotor's coordinator defaults (motor/config/coordinator.py): inference, management, observability.
COORDINATOR_INFER_PORT = 1025
COORDINATOR_MGMT_PORT = 1026
COORDINATOR_OBS_PORT = 1027
# The coordinator's worker metaserver ports start here, one per inference worker (PyMotor's defaults).
METASERVER_BASE_PORT = 12000
NUM_WORKERS = 4
# The controller's PyMotor defaults (1026/1027) collide with the coordinator's on one host: remapped to 2026/2027.
CONTROLLER_API_PORT = 2026
CONTROLLER_OBS_PORT = 2027
# Node managers: PyMotor's 1026 moved per role so that a prefill and a decode pod can share a host.
NODE_MANAGER_PORT = {"prefill": 3026, "decode": 4026, "union": 4026}
# An engine pod binds 2 ports per local DP rank from here (service + management endpoint of each rank).
ENGINE_BASE_PORT = 10000
# vLLM's data_parallel_rpc_port default; all pods of an instance must agree on it.
DP_RPC_PORT = 9000
# vLLM's KV-event publisher default (tcp://*:5557); each DP rank binds base + rank.
KV_EVENTS_PORT = 5557
# Mooncake master (kv_cache_pool_config.port) as PyMotor's kv_pool startup script starts it.
KV_POOL_PORT = 50088
# SGLang (engine_type "sglang"): PyMotor's deployer starts the memfabric config store (ROLE=mf_store) on this port
# (DEFAULT_MF_STORE_PORT, not configurable there); the prefill engines bind SGLang's --disaggregation-bootstrap-port.
MF_STORE_PORT = 50089
SGLANG_BOOTSTRAP_PORT = 8998
# mooncake_master's metrics port: not configurable in PyMotor's startup script, always bound.
KV_POOL_METRICS_PORT = 9003
# Mooncake conductor HTTP server (kv_conductor_config.http_server_port) as PyMotor defaults it.
CONDUCTOR_PORT = 13333
# The KV watcher's /metrics (its view of the conductor's registrations; the conductor exports none), on the
# conductor's host address only.
WATCHER_METRICS_PORT = 13334
# Lowest kv_port of the Mooncake transfer engine per hardware type, derived: Ascend's AscendDirectTransport picks
# random ports in [20000, 20000 + NPUs per host x 1000) (reference ascend.md), so kv_port (kv_port + i for each NPU of
# the pod) starts above that range: 28000 on A2, 36000 on A3.
ASCEND_DIRECT_PORT_BASE = 20000
ASCEND_DIRECT_PORTS_PER_NPU = 1000
KV_PORT_FLOOR = {hw: ASCEND_DIRECT_PORT_BASE + npus * ASCEND_DIRECT_PORTS_PER_NPU for hw, npus in HARDWARE_NPUS.items()}

# --------------------------------------------------------------------------------------------------
# Paths and PyMotor defaults.
# motor_deploy_config.weight_mount_path default (PyMotor's deployer mounts the weights there).
WEIGHT_MOUNT_PATH = "/mnt/weight"
# kv_cache_pool_config.default_kv_lease_ttl default in ms (PyMotor's kv_pool / Mooncake master lease).
KV_LEASE_TTL = 11000
# Root of the config directories (CONFIGMAP_PATH) on the hosts, when motor_config_root is not set.
CONFIG_ROOT = "/etc/pymotor"
# Where PyMotor reads its packaged conf inside the image.
CONFIG_PATH = "/usr/local/Ascend/pyMotor/conf"
# MOTOR_LOG_ROOT_PATH default inside the containers (the host's log directory is mounted there).
CONTAINER_LOG_PATH = "/root/ascend/log"

# --------------------------------------------------------------------------------------------------
# Container labels (the hosts' Docker is the only state: the next run reads them back).
JOB_LABEL = "io.pymotor.job"
ROLE_LABEL = "io.pymotor.role"
CONTAINER_LABEL = "io.pymotor.container"
PORTS_LABEL = "io.pymotor.ports"  # every port the container binds, so a precheck never blames its own containers
HASH_LABEL = "io.pymotor.config-hash"  # must equal plugins/module_utils/motor_start.py HASH_LABEL (host side)
PARTS_LABEL = "io.pymotor.config-parts"  # which part of the hash changed: the reason a container restarts
PLACEMENT_LABEL = "io.pymotor.placement"  # NPUs and ports: the next plan keeps the container where it is

# --------------------------------------------------------------------------------------------------
# The job_id rule: PyMotor uses job_id as the Kubernetes namespace of a job, an RFC 1123 DNS label (1-63 lowercase
# letters, digits and '-'); here it prefixes container names, label values and the config and log directories.
JOB_ID_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
JOB_ID_PATH = "motor_deploy_config.job_id"


class Problem(NamedTuple):
    """One problem: where, what, and how to fix it; ``str()`` is the one format ``<path>: <what> (<hint>)``."""

    path: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        if self.hint:
            return f"{self.path}: {self.message} ({self.hint})"
        return f"{self.path}: {self.message}"


def format_problem(problem) -> str:
    """A problem (or a (path, message, hint) triple) in the one format."""
    return str(Problem(*problem))


class ProblemsError(Exception):
    """Problems that stop a phase; ``problems`` lists every one of them, ``str()`` one per line."""

    def __init__(self, problems, warnings=None):
        self.problems = list(problems)
        self.warnings = list(warnings or [])
        super().__init__(str(self))

    def __str__(self):
        return "\n".join(format_problem(p) for p in self.problems)


def job_id_problem(job_id, shown=None):
    """The problem with a job_id (None when it follows the rule). ``shown``: how to show the value."""
    if isinstance(job_id, str) and JOB_ID_RE.match(job_id):
        return None
    return Problem(JOB_ID_PATH, f"{shown or repr(job_id)} cannot prefix container names: not a DNS label",
                   "use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit")


def problem_lines(problems) -> list:
    """Every problem once, in the one format, in order."""
    return list(dict.fromkeys(p if isinstance(p, str) else format_problem(p) for p in problems))


def failure_text(problems, warnings=()) -> str:
    """The message of a phase that stops: every problem once, numbered, one per line in the one format, then the
    warnings after a blank line."""
    lines = ["%d. %s" % (number, text) for number, text in enumerate(problem_lines(problems), start=1)]
    if warnings:
        lines += ["", "warnings:"] + [str(w) for w in warnings]
    return "\n".join(lines)
