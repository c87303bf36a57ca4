# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Deployment plan for PyMotor on bare metal: hosts, NPUs and ports of every container.

``build_plan(config, hosts, previous=None)`` is pure (no I/O, no Ansible objects) and deterministic.

Input
-----
``config``
    the output of ``motor_config`` (see docs/design.md).
``hosts``
    ``{inventory_hostname: vars}`` in inventory order.  Per host, all optional except the address:

    ``motor_host_ip`` (or ``ansible_host``)  IPv4/IPv6 address; also POD_IP/HOST_IP of its containers.
    ``motor_nic``              interface for HCCL/GLOO/TP sockets (default ``eth0``).
    ``motor_npu_ids``          NPU ids usable on the host (list of ints, or "0-7" / "0,2,4-7");
                               default all ids of the hardware type (0-7 A2, 0-15 A3).
    ``motor_reserved_ports``   ports (ints or "lo-hi" ranges) the plan must never use.
    ``motor_hardware_type``    ``800I_A2`` / ``800I_A3``; default the config's hardware_type.  Hosts of
                               another type get no engine container.
    ``group_names``            Ansible group names; ``motor_engine_hosts`` / ``motor_control_hosts`` decide
                               the role of the host.  A host without ``group_names`` counts as both.
    ``motor_var_names``        names of the host's variables that start with ``motor_`` (the motor_plan role
                               passes them): a name that is not one of the above but close to one is a typo
                               (``motor_npu_id``) and a problem, instead of being silently ignored.
    ``None`` values count as absent.
``previous`` (optional)
    the current placement, ``{container name: {"host": ..., "npu_ids": [...], "port_map": {...}}}`` as the plan
    emits it (``placement_of(plan)``; other keys are ignored): see "Sticky placement" below.  ``None`` or ``{}``
    gives the plan without it.

Output (plain JSON-serialisable dict)
------
``containers``  list sorted by (tier, name with numbers compared numerically); see README/design.md.
``hosts``       per host: ip, nic, hardware_type, engine/control flags, npu_ids, used/free NPU ids,
                reserved ports, every port bound, container names.
``instances``   per engine instance: role, index, job_name, pods (host, container, npu_ids, dp_ranks).
``controller`` / ``coordinator`` / ``kv_pool`` / ``kv_conductor`` / ``kv_events``: final addresses.
``job_id``, ``mode``, ``hardware_type``, ``image``, ``affinity``, ``warnings``.

Rules
-----
* Engines only on engine hosts; control-plane containers only on control hosts (first engine host, with
  a warning, when there is none).  controller + coordinator on the first control host, kv_conductor on
  control host ``1 % n``, kv_pool on control host ``2 % n``.
* Engine placement is first-fit in inventory order, instance by instance (roles prefill, decode, union):
  the pods of one instance go to distinct hosts, each pod gets a contiguous block of NPU ids (lowest
  start first), starting on an even id on A3 when the count is even (die pairs).
* With KV-cache affinity the Coordinator registers every prefill (union) DP rank ``r`` at
  ``<event port> + r`` from its own single config, so all publishing engines share one event base port
  and two publishing pods whose global DP ranks overlap are never put on one host.
* Ports: every bound port is unique per host, outside ``motor_reserved_ports`` and in 1024..65535.
  Preferred values are the user's own settings or PyMotor's defaults (controller remapped to
  2026/2027, node managers 3026+ for prefill and 4026+ for decode/union, ``kv_port`` at least 28000 on
  A2 / 36000 on A3); when taken, the next free value is used.  Ports that peers of one instance must
  agree on (``data_parallel_rpc_port``, ``kv_port``) are the same on all pods of the instance.
  The plan checks this invariant at the end and raises ``MotorPlanError`` if it does not hold.

Sticky placement (``previous``: scale / reconfigure without moving running containers)
* An engine instance keeps the hosts and NPUs ``previous`` gives its pods when every pod's entry is usable:
  an engine host of the config's hardware type, the pod's NPU count, a contiguous block (even start on A3
  for even counts) of free ids from ``motor_npu_ids``, pods on distinct hosts, no publishing rank clash.
  Such instances are reserved (roles, then instances in order) before any other is placed first fit;
  otherwise the whole instance is placed as new.  Unusable entries are ignored, never an error.
* Containers that stay on their host (kept engine pods; control-plane containers on the same host) take
  their previous ports first, each where still in range, not reserved, free and not below the current
  preferred value (a raised setting wins); instance-wide ports only when equal on all pods.  The KV-event
  (replay) base most previous publishing pods had is kept when free for every rank.  Everything else is
  allocated as above.  An unchanged container so comes out identical but for the instance counts.
* If the kept containers leave no room (placement or ports fail), the plan is built without ``previous``
  and gets a ``previous: ...`` warning; errors of the config or inventory itself are raised as usual.
"""

from __future__ import annotations

import bisect
import difflib
import gc
import ipaddress
import json
import re
from typing import Any, NamedTuple

ENGINE_GROUP = "motor_engine_hosts"
CONTROL_GROUP = "motor_control_hosts"
ENGINE_ROLES = ("prefill", "decode", "union")
ROLE_LETTER = {"prefill": "p", "decode": "d", "union": "u"}
NPUS_PER_HOST = {"800I_A2": 8, "800I_A3": 16}
KV_PORT_FLOOR = {"800I_A2": 28000, "800I_A3": 36000}
# motor_deploy_config keys per engine role: (instances, pods per instance, NPUs per pod)
DEPLOY_KEYS = {
    "prefill": ("p_instances_num", "single_p_instance_pod_num", "p_pod_npu_num"),
    "decode": ("d_instances_num", "single_d_instance_pod_num", "d_pod_npu_num"),
    "union": ("hybrid_instances_num", "single_hybrid_instance_pod_num", "hybrid_pod_npu_num"),
}
ENV_SECTION = {
    "common": "motor_common_env",
    "controller": "motor_controller_env",
    "coordinator": "motor_coordinator_env",
    "prefill": "motor_engine_prefill_env",
    "decode": "motor_engine_decode_env",
    "union": "motor_engine_union_env",
    "kv_pool": "motor_kv_cache_pool_env",
    "kv_conductor": "motor_kv_conductor_env",
}

PORT_MIN = 1024
PORT_MAX = 65535
COORDINATOR_INFER_PORT = 1025
COORDINATOR_MGMT_PORT = 1026
COORDINATOR_OBS_PORT = 1027
METASERVER_BASE_PORT = 12000
NUM_WORKERS = 4
CONTROLLER_API_PORT = 2026
CONTROLLER_OBS_PORT = 2027
NODE_MANAGER_PORT = {"prefill": 3026, "decode": 4026, "union": 4026}
ENGINE_BASE_PORT = 10000
DP_RPC_PORT = 9000
KV_EVENTS_PORT = 5557
KV_POOL_PORT = 50088
KV_POOL_METRICS_PORT = 9003
CONDUCTOR_PORT = 13333

CONFIG_PATH = "/usr/local/Ascend/pyMotor/conf"
CONFIGMAP_ROOT = "/etc/pymotor"
ENGINE_SHM_SIZE = "4g"
CONTROL_SHM_SIZE = "1g"
MANAGER_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
TIER_KV_POOL = 0
TIER_CONTROL = 1
TIER_ENGINE = 2

# environment variables the plan sets itself (env.json cannot override them)
WIRING_ENV = (
    "ROLE", "JOB_NAME", "POD_IP", "HOST_IP", "CONTROLLER_SERVICE", "COORDINATOR_SERVICE",
    "KV_CONDUCTOR_SERVICE", "KVP_MASTER_SERVICE", "KV_POOL_PORT", "KV_POOL_EVICTION_HIGH_WATERMARK_RATIO",
    "KV_POOL_EVICTION_RATIO", "DEFAULT_KV_LEASE_TTL", "CONFIGMAP_PATH", "CONFIG_PATH",
    "ASCEND_RUNTIME_OPTIONS", "HCCL_IF_IP", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
    "HCCL_SOCKET_IFNAME", "PYTHONHASHSEED",
)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_NIC_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# The per-host inventory variables the plan reads (see the module docstring).
HOST_VARS = ("motor_host_ip", "motor_nic", "motor_npu_ids", "motor_reserved_ports", "motor_hardware_type")


def misspelt_host_vars(names) -> list:
    """(name, the host variable it is close to) for each name that is not a host variable of the plan but looks
    like one; other motor_* variables (role settings, motor_image...) are far from all of them."""
    out = []
    for name in sorted(set(names or [])):
        if name in HOST_VARS:
            continue
        close = difflib.get_close_matches(str(name), HOST_VARS, n=1, cutoff=0.8)
        if close:
            out.append((str(name), close[0]))
    return out


_ENDPOINT_RE = re.compile(r"^(?P<prefix>.*):(?P<port>\d+)$")
_MOONCAKE_STORE_CONNECTORS = ("mooncakeconnectorstorev1",)


class Problem(NamedTuple):
    """One problem: where, what, and how to fix it."""

    path: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        if self.hint:
            return f"{self.path}: {self.message} ({self.hint})"
        return f"{self.path}: {self.message}"


class MotorPlanError(Exception):
    """The plan cannot be built; ``problems`` lists every reason, ``str()`` one per line."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


# --------------------------------------------------------------------------------------------------
# small helpers


def _copy(value):
    """Deep copy of JSON data (C speed: the plan copies the user_config once per container)."""
    return json.loads(json.dumps(value))


def _natural_key(text: str):
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _as_int(value):
    """int for ints and digit strings, else None (bools are not ints here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _kind(value) -> str:
    """The YAML/JSON kind of a value: Ansible hands over its own subclasses of dict, list, str, int..."""
    for types, name in ((bool, "a boolean"), (dict, "a mapping"), ((list, tuple), "a list"), (str, "a string"),
                        (int, "an integer"), (float, "a number")):
        if isinstance(value, types):
            return name
    return "null" if value is None else type(value).__name__


def truthy(value) -> bool:
    """A setting's truth as Ansible's ``bool`` filter reads it ("1", "true", "yes", "on" in any case)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _env_str(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _compress(numbers) -> str:
    """[0,1,2,3,8] -> '0-3,8'."""
    nums = sorted(set(numbers))
    if not nums:
        return "-"
    out = []
    start = prev = nums[0]
    for n in nums[1:]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        start = prev = n
    out.append(f"{start}-{prev}" if prev > start else f"{start}")
    return ",".join(out)


def _parse_int_list(value, path, what, problems, lo, hi):
    """Parse ints / 'a-b' ranges given as a list or a comma separated string into [(lo, hi)]."""
    items = value
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        items = [value]
    if not isinstance(items, (list, tuple)):
        problems.append(Problem(path, f"must be a list of {what}, got {_kind(value)}",
                                f"e.g. [1, 2] or \"{lo}-{lo + 3}\""))
        return None
    ranges = []
    for idx, item in enumerate(items):
        parts = [item]
        if isinstance(item, str):
            parts = [p.strip() for p in item.split(",") if p.strip()]
        for part in parts:
            n = _as_int(part)
            if n is not None:
                rng = (n, n)
            elif isinstance(part, str) and re.fullmatch(r"\d+\s*-\s*\d+", part):
                a, b = (int(x) for x in part.split("-"))
                rng = (a, b)
            else:
                problems.append(Problem(f"{path}[{idx}]", f"{part!r} is not a {what[:-1]} or a range",
                                        f"use an integer or \"lo-hi\" between {lo} and {hi}"))
                continue
            if rng[0] > rng[1] or rng[0] < lo or rng[1] > hi:
                problems.append(Problem(f"{path}[{idx}]", f"{part!r} is outside {lo}..{hi} or reversed",
                                        f"use values between {lo} and {hi}"))
                continue
            ranges.append(rng)
    return ranges


def _merge_ranges(ranges):
    merged = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _dig(data, *keys):
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _obj(value):
    """``value`` when it is a mapping, else an empty one (the planner never trusts a section's type)."""
    return value if isinstance(value, dict) else {}


def _user_set(mapping, key, path):
    """``path`` when the user_config sets ``key`` in ``mapping`` (the port search starts from it), else None."""
    return path if isinstance(mapping, dict) and _as_int(mapping.get(key)) else None


def _room_below(hosts, preferred, length):
    """True when ``length`` ports starting below ``preferred`` are free on every host."""
    start = PORT_MIN
    while start < preferred and start + length - 1 <= PORT_MAX:
        blocked = [nxt for nxt in (h.blocker(start, length) for h in hosts) if nxt is not None]
        if not blocked:
            return True
        start = max(blocked)
    return False


def _ensure(data, *keys):
    for key in keys:
        nxt = data.get(key)
        if not isinstance(nxt, dict):
            nxt = {}
            data[key] = nxt
        data = nxt
    return data


def _endpoint_port(endpoint):
    """('tcp://*', 5557) for 'tcp://*:5557' when the endpoint binds a TCP port, else None."""
    if not isinstance(endpoint, str) or not endpoint.startswith("tcp://"):
        return None
    if "*" not in endpoint and "::" not in endpoint:
        return None  # vLLM connects instead of binding
    match = _ENDPOINT_RE.match(endpoint)
    if not match:
        return None
    return match.group("prefix"), int(match.group("port"))


# --------------------------------------------------------------------------------------------------
# hosts


class _Host:
    __slots__ = ("name", "index", "ip", "nic", "hw", "npu_ids", "free", "reserved", "reserved_lo",
                 "engine", "control", "ports", "event_ranks")

    def __init__(self, name, index):
        self.name = name
        self.index = index
        self.ip = ""
        self.nic = "eth0"
        self.hw = ""
        self.npu_ids = []
        self.free = {}
        self.reserved = []
        self.reserved_lo = []
        self.engine = False
        self.control = False
        self.ports = {}
        self.event_ranks = set()

    # ports -----------------------------------------------------------------------------------
    def blocker(self, start, length):
        """None when start..start+length-1 is free, else the next start worth trying."""
        end = start + length - 1
        if start < PORT_MIN:
            return PORT_MIN
        if end > PORT_MAX:
            return PORT_MAX + 1
        if self.reserved:
            i = bisect.bisect_right(self.reserved_lo, end) - 1
            # any reserved interval that overlaps [start, end]: scan back while hi >= start
            while i >= 0 and self.reserved[i][1] >= start:
                if self.reserved[i][0] <= end:
                    return self.reserved[i][1] + 1
                i -= 1
        for port in range(end, start - 1, -1):
            if port in self.ports:
                return port + 1
        return None

    def is_reserved(self, port):
        if not self.reserved:
            return False
        i = bisect.bisect_right(self.reserved_lo, port) - 1
        return i >= 0 and self.reserved[i][1] >= port

    def take(self, start, length, owner):
        for port in range(start, start + length):
            self.ports[port] = owner

    def alloc(self, preferred, length, owner):
        """Lowest free range of ``length`` ports starting at or above ``preferred``; None if none."""
        start = max(preferred, PORT_MIN)
        while start + length - 1 <= PORT_MAX:
            nxt = self.blocker(start, length)
            if nxt is None:
                self.take(start, length, owner)
                return start
            start = nxt
        return None

    # NPUs ------------------------------------------------------------------------------------
    def find_block(self, count, align):
        """Lowest start id of ``count`` consecutive free NPU ids (start % align == 0), else None."""
        run = 0
        start = prev = None
        for npu in self.npu_ids:
            if self.free[npu] and run and npu == prev + 1:
                run += 1
            elif self.free[npu] and npu % align == 0:
                start, run = npu, 1
            else:
                run = 0
            prev = npu
            if run == count:
                return start
        return None


def _parse_hosts(hosts, hw_default, problems, warnings):
    if not isinstance(hosts, dict) or not hosts:
        problems.append(Problem("hosts", "must be a non-empty mapping of inventory hostname to host variables",
                                f"put hosts in the {ENGINE_GROUP} and {CONTROL_GROUP} groups"))
        return []
    parsed = []
    seen_ip = {}
    for index, (name, hvars) in enumerate(hosts.items()):
        path = f"hosts.{name}"
        if hvars is None:
            hvars = {}
        if not isinstance(hvars, dict):
            problems.append(Problem(path, f"must be a mapping of host variables, got {_kind(hvars)}", ""))
            continue
        host = _Host(str(name), index)
        # address
        raw_ip = hvars.get("motor_host_ip")
        ip_key = "motor_host_ip"
        if raw_ip in (None, ""):
            raw_ip = hvars.get("ansible_host")
            ip_key = "ansible_host"
        if raw_ip in (None, ""):
            problems.append(Problem(f"{path}.motor_host_ip", "missing",
                                    "set motor_host_ip (or ansible_host) to the host's IP address"))
        else:
            try:
                host.ip = str(ipaddress.ip_address(str(raw_ip).strip()))
            except ValueError:
                problems.append(Problem(f"{path}.{ip_key}", f"{raw_ip!r} is not an IP address",
                                        "set motor_host_ip to the address other hosts reach this one on"))
        if host.ip:
            if host.ip in seen_ip:
                problems.append(Problem(f"{path}.motor_host_ip", f"{host.ip} is also the address of host {seen_ip[host.ip]}",
                                        "list each machine once; put it in both groups if it has both roles"))
            else:
                seen_ip[host.ip] = host.name
        # nic
        nic = hvars.get("motor_nic")
        if nic in (None, ""):
            nic = "eth0"
        if not isinstance(nic, str) or not _NIC_RE.match(nic):
            problems.append(Problem(f"{path}.motor_nic", f"{nic!r} is not a network interface name",
                                    "e.g. eth0 or enp189s0f0"))
        else:
            host.nic = nic
        # groups
        groups = hvars.get("group_names")
        if groups is None:
            host.engine = host.control = True
        elif not isinstance(groups, (list, tuple)):
            problems.append(Problem(f"{path}.group_names", "must be a list of group names", ""))
        else:
            host.engine = ENGINE_GROUP in groups
            host.control = CONTROL_GROUP in groups
        # hardware type
        hw = hvars.get("motor_hardware_type")
        if hw in (None, ""):
            hw = hw_default
        if hw not in NPUS_PER_HOST:
            problems.append(Problem(f"{path}.motor_hardware_type", f"{hw!r} is not supported",
                                    "use " + " or ".join(sorted(NPUS_PER_HOST))))
            hw = hw_default
        host.hw = hw
        max_npus = NPUS_PER_HOST.get(hw, 16)
        # NPUs
        raw_ids = hvars.get("motor_npu_ids")
        if raw_ids is None:
            ids = list(range(max_npus))
        else:
            ranges = _parse_int_list(raw_ids, f"{path}.motor_npu_ids", "NPU ids", problems, 0, max_npus - 1)
            ids = []
            for lo, hi in ranges or []:
                ids.extend(range(lo, hi + 1))
            if len(set(ids)) != len(ids):
                problems.append(Problem(f"{path}.motor_npu_ids", "lists an NPU id twice", "list each id once"))
            ids = sorted(set(ids))
        host.npu_ids = ids
        host.free = {npu: True for npu in ids}
        # reserved ports
        raw_res = hvars.get("motor_reserved_ports")
        if raw_res not in (None, "", []):
            ranges = _parse_int_list(raw_res, f"{path}.motor_reserved_ports", "ports", problems, 1, PORT_MAX)
            host.reserved = _merge_ranges(ranges or [])
            host.reserved_lo = [rng[0] for rng in host.reserved]
        for name, meant in misspelt_host_vars(hvars.get("motor_var_names")):
            problems.append(Problem(f"{path}.{name}", "is not a host variable of the plan, so it would be ignored",
                                    f"did you mean {meant}? (the plan reads {', '.join(HOST_VARS)})"))
        if host.engine and hw != hw_default:
            warnings.append(str(Problem(f"{path}.motor_hardware_type",
                                        f"{hw} host gets no engine container: the config's hardware_type is {hw_default}",
                                        "remove it from motor_engine_hosts or change hardware_type")))
        parsed.append(host)
    return parsed


# --------------------------------------------------------------------------------------------------
# the planner


class _Planner:  # pylint: disable=too-many-instance-attributes
    def __init__(self, config, hosts, previous=None):
        self.problems = []
        self.warnings = []
        self.config = config
        self._check_config()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.hw = config["hardware_type"]
        self.job_id = str(config["job_id"])
        self.user_config = config["user_config"]
        self.hosts = _parse_hosts(hosts, self.hw, self.problems, self.warnings)
        if self.problems:
            raise MotorPlanError(self.problems)
        self.engine_hosts = [h for h in self.hosts if h.engine and h.hw == self.hw]
        self.control_hosts = [h for h in self.hosts if h.control]
        self.engines = {}
        for role in ENGINE_ROLES:
            eng = (config.get("engines") or {}).get(role)
            if eng:
                self.engines[role] = self._engine_spec(role, eng)
        if self.problems:
            raise MotorPlanError(self.problems)
        self.affinity = bool(config.get("affinity"))
        self.kv_pool = config.get("kv_pool") or {}
        self.pool_on = bool(self.kv_pool.get("enabled"))
        self.kv_conductor = config.get("kv_conductor") or {}
        self.conductor_on = bool(self.kv_conductor.get("enabled"))
        self.events_role = None
        kv_events = config.get("kv_events")
        if self.affinity and isinstance(kv_events, dict) and kv_events.get("role") in self.engines:
            if self.engines[kv_events["role"]]["events"]:
                self.events_role = kv_events["role"]
        self.containers = []
        self.pods = []  # engine pods in placement order
        self.shared_ports = {}
        self.control = {}
        self._kv_warned = set()
        self._env_warned = set()
        self._host_index = {h.name: h for h in self.hosts}
        # the current placement (sticky scale / reconfigure): name -> {host, npu_ids, port_map}
        self.previous = previous if isinstance(previous, dict) else {}
        self.kept = set()  # (role, instance) of the engine instances kept where previous puts them

    # validation of the motor_config output --------------------------------------------------
    def _check_config(self):
        cfg = self.config
        if not isinstance(cfg, dict) or not isinstance(cfg.get("user_config"), dict) or "engines" not in cfg:
            self.problems.append(Problem("config", "is not the output of pymotor.ascend.motor_config",
                                         "pass motor_config(user_config, env_config) to motor_plan"))
            return
        hw = cfg.get("hardware_type")
        if hw not in NPUS_PER_HOST:
            self.problems.append(Problem("motor_deploy_config.hardware_type",
                                         f"{hw!r} is not supported by the bare-metal planner",
                                         "use " + " or ".join(sorted(NPUS_PER_HOST))))
        job_id = cfg.get("job_id")
        if not isinstance(job_id, str) or not _NAME_RE.match(job_id) or len(job_id) > 40:
            self.problems.append(Problem("motor_deploy_config.job_id",
                                         f"{job_id!r} cannot prefix container names",
                                         "use letters, digits, '-', '_' or '.', start with a letter or digit, at most 40"))
        if not isinstance(cfg.get("engines"), dict) or not any(r in (cfg.get("engines") or {}) for r in ENGINE_ROLES):
            self.problems.append(Problem("config.engines", "no engine role (prefill, decode or union) is defined",
                                         "run motor_config on a complete user_config"))

    def _engine_spec(self, role, eng):
        keys = DEPLOY_KEYS[role]
        spec = {"role": role}
        for field, key in (("count", keys[0]), ("pods", keys[1]), ("npus", keys[2])):
            value = _as_int(eng.get({"npus": "npus_per_pod"}.get(field, field)))
            if value is None or value < 1:
                self.problems.append(Problem(f"motor_deploy_config.{key}", f"must be a positive integer, got {value!r}",
                                             "fix the user_config and re-run motor_config"))
                value = 1
            spec[field] = value
        max_npus = NPUS_PER_HOST.get(self.config["hardware_type"], 16)
        if spec["npus"] > max_npus:
            self.problems.append(Problem(f"motor_deploy_config.{keys[2]}",
                                         f"{spec['npus']} NPUs per pod do not fit on one {self.config['hardware_type']} host ({max_npus} NPUs)",
                                         "use more pods per instance with fewer NPUs each"))
        if self.config["hardware_type"] == "800I_A3" and spec["npus"] > 1 and spec["npus"] % 2:
            self.warnings.append(str(Problem(f"motor_deploy_config.{keys[2]}",
                                             f"{spec['npus']} NPUs per pod on 800I_A3 splits a die pair",
                                             "use 1 or an even count")))
        dp = _as_int(eng.get("dp")) or 1
        dpl = _as_int(eng.get("dp_local_per_pod")) or max(1, dp // spec["pods"])
        spec["dp"] = dp
        spec["dpl"] = dpl
        spec["section"] = eng.get("section") or f"motor_engine_{role}_config"
        section = _obj(self.config["user_config"].get(spec["section"]))
        engine_config = _obj(section.get("engine_config"))
        spec["events"] = self._events_of(engine_config)
        spec["kv"] = self._kv_port_of(engine_config)
        spec["job_names"] = [f"{self.config['job_id']}-{ROLE_LETTER[role]}{i}" for i in range(spec["count"])]
        return spec

    @staticmethod
    def _events_of(engine_config):
        kec = engine_config.get("kv_events_config")
        if not isinstance(kec, dict) or not truthy(kec.get("enable_kv_cache_events")):
            return None
        if str(kec.get("publisher", "zmq")).lower() == "null":
            return None
        endpoint = _endpoint_port(kec.get("endpoint", f"tcp://*:{KV_EVENTS_PORT}"))
        if endpoint is None:
            return None
        replay = _endpoint_port(kec.get("replay_endpoint"))
        return {"endpoint": endpoint, "replay": replay}

    @staticmethod
    def _kv_port_of(engine_config):
        """Where the Mooncake transport's kv_port lives: (path inside engine_config, value) or None."""
        ktc = engine_config.get("kv_transfer_config")
        if not isinstance(ktc, dict):
            return None
        target = ktc
        path = ("kv_transfer_config",)
        if str(ktc.get("kv_connector", "")).lower() == "multiconnector":
            connectors = _dig(ktc, "kv_connector_extra_config", "connectors")
            if not isinstance(connectors, list) or not connectors or not isinstance(connectors[0], dict):
                return None
            target = connectors[0]
            path = ("kv_transfer_config", "kv_connector_extra_config", "connectors", 0)
        name = str(target.get("kv_connector", "")).lower()
        binds = "kv_port" in target or (name.startswith("mooncake") and name not in _MOONCAKE_STORE_CONNECTORS)
        if not binds:
            return None
        return {"path": path, "value": target.get("kv_port")}

    # placement ------------------------------------------------------------------------------
    def place_engines(self):
        need = {role: spec["count"] * spec["pods"] * spec["npus"] for role, spec in self.engines.items()}
        total_need = sum(need.values())
        available = sum(len(h.npu_ids) for h in self.engine_hosts)
        if not self.engine_hosts:
            self.problems.append(Problem("hosts", f"no {self.hw} host in group {ENGINE_GROUP}",
                                         f"add the NPU servers to {ENGINE_GROUP}" + self._availability()))
            return
        for role, spec in self.engines.items():
            keys = DEPLOY_KEYS[role]
            if spec["pods"] > len(self.engine_hosts):
                self.problems.append(Problem(
                    f"motor_deploy_config.{keys[1]}",
                    f"each {role} instance needs {spec['pods']} pods on distinct hosts, "
                    f"but only {len(self.engine_hosts)} {self.hw} engine hosts exist",
                    f"add engine hosts or use fewer pods with more NPUs each{self._availability()}"))
        if total_need > available and not self.problems:
            self.problems.append(Problem("motor_deploy_config", self._shortage_message(total_need, available),
                                         f"add engine hosts, list more motor_npu_ids, or lower the counts{self._availability()}"))
        if self.problems:
            return
        self._keep_previous_placement()
        nxt = {}
        for role, spec in self.engines.items():
            for inst in range(spec["count"]):
                if (role, inst) in self.kept:
                    continue
                if not self._place_instance(role, spec, inst, nxt):
                    keys = DEPLOY_KEYS[role]
                    why = self._shortage_message(total_need, available)
                    self.problems.append(Problem(
                        f"motor_deploy_config.{keys[0]}",
                        f"cannot place {role} instance {inst} ({spec['pods']} pods x {spec['npus']} contiguous NPUs on "
                        f"distinct hosts{', no two publishing pods with the same DP ranks on one host' if role == self.events_role else ''}): {why}",
                        f"add engine hosts, free NPUs, or lower the counts{self._availability()}"))
                    return

    def _shortage_message(self, total_need, available):
        parts = ", ".join(f"{role} {s['count']} x {s['pods']} pods x {s['npus']}" for role, s in self.engines.items())
        return (f"{self.hw} engine hosts need {total_need} NPUs ({parts}), available {available} NPUs "
                f"on {len(self.engine_hosts)} hosts")

    def _availability(self):
        by_hw = {}
        for host in self.hosts:
            if host.engine:
                npus, count = by_hw.get(host.hw, (0, 0))
                by_hw[host.hw] = (npus + len(host.npu_ids), count + 1)
        if not by_hw:
            return f"; no host is in {ENGINE_GROUP}"
        return "; in " + ENGINE_GROUP + ": " + ", ".join(
            f"{hw}: {npus} NPUs on {count} hosts" for hw, (npus, count) in sorted(by_hw.items()))

    def _place_instance(self, role, spec, inst, nxt):
        count = spec["npus"]
        align = 2 if self.hw == "800I_A3" and count % 2 == 0 else 1
        n_hosts = len(self.engine_hosts)
        skip = nxt.setdefault(count, list(range(n_hosts + 1)))

        def find(i):
            root = i
            while skip[root] != root:
                root = skip[root]
            while skip[i] != root:
                skip[i], i = root, skip[i]
            return root

        publishing = role == self.events_role
        chosen = []
        taken = set()
        resume = 0  # hosts before it are dead for this size or taken by this instance ...
        conflict_min = None  # ... except those skipped for a DP-rank clash, which a later pod may use
        job_name = spec["job_names"][inst]
        while len(chosen) < spec["pods"]:
            pod = len(chosen)
            ranks = self._ranks(spec, pod)
            idx = find(resume if conflict_min is None else min(resume, conflict_min))
            found = None
            while idx < n_hosts:
                host = self.engine_hosts[idx]
                start = host.find_block(count, align)
                if start is None:
                    skip[idx] = idx + 1  # never fits this size again: NPUs are only ever taken
                elif idx in taken:
                    pass
                elif publishing and any(r in host.event_ranks for r in ranks):
                    conflict_min = idx if conflict_min is None else min(conflict_min, idx)
                else:
                    found = (host, start)
                    break
                idx = find(idx + 1)
            if found is None:
                return False
            host, start = found
            taken.add(idx)
            resume = idx + 1
            npus = list(range(start, start + count))
            for npu in npus:
                host.free[npu] = False
            if publishing:
                host.event_ranks.update(ranks)
            chosen.append(found)
            self._add_pod(role, inst, pod, host, npus, ranks, job_name)
        return True

    def _pod_name(self, role, inst, pod):
        return f"{self.job_id}-{ROLE_LETTER[role]}{inst}-{pod}"

    def _add_pod(self, role, inst, pod, host, npus, ranks, job_name):
        self.pods.append({
            "role": role, "instance": inst, "pod": pod, "host": host, "npu_ids": npus,
            "dp_ranks": ranks, "job_name": job_name, "name": self._pod_name(role, inst, pod),
        })

    def _previous_entry(self, name, host=None):
        """The previous entry of container ``name`` (a dict), only when it was on ``host`` if given."""
        entry = self.previous.get(name)
        if not isinstance(entry, dict):
            return None
        if host is not None and entry.get("host") != host.name:
            return None
        return entry

    def _previous_port(self, name, key, host):
        """port_map[key] of the previous entry of ``name`` when it was on ``host``, else None."""
        entry = self._previous_entry(name, host)
        port_map = entry.get("port_map") if entry is not None else None
        return _as_int(port_map.get(key)) if isinstance(port_map, dict) else None

    def _previous_slot(self, name, count, align, engine_hosts):
        """(host, npu_ids) where ``previous`` puts pod ``name`` when that is still a valid block, else None."""
        entry = self._previous_entry(name)
        if entry is None or not isinstance(entry.get("host"), str):
            return None
        host = engine_hosts.get(entry["host"])
        raw = entry.get("npu_ids")
        if host is None or not isinstance(raw, list) or len(raw) != count:
            return None
        npus = [_as_int(n) for n in raw]
        if None in npus:
            return None
        npus.sort()
        if npus != list(range(npus[0], npus[0] + count)) or npus[0] % align:
            return None
        if not all(host.free.get(n) for n in npus):
            return None
        return host, npus

    def _keep_previous_placement(self):
        """Reserve, before any first fit, every instance whose pods can all stay where ``previous`` puts them."""
        if not self.previous:
            return
        engine_hosts = {h.name: h for h in self.engine_hosts}
        for role, spec in self.engines.items():
            count = spec["npus"]
            align = 2 if self.hw == "800I_A3" and count % 2 == 0 else 1
            publishing = role == self.events_role
            for inst in range(spec["count"]):
                slots = []
                for pod in range(spec["pods"]):
                    slot = self._previous_slot(self._pod_name(role, inst, pod), count, align, engine_hosts)
                    if slot is None or any(slot[0] is s[0] for s in slots):
                        break
                    if publishing and any(r in slot[0].event_ranks for r in self._ranks(spec, pod)):
                        break
                    slots.append(slot)
                if len(slots) != spec["pods"]:
                    continue
                self.kept.add((role, inst))
                for pod, (host, npus) in enumerate(slots):
                    ranks = self._ranks(spec, pod)
                    for npu in npus:
                        host.free[npu] = False
                    if publishing:
                        host.event_ranks.update(ranks)
                    self._add_pod(role, inst, pod, host, npus, ranks, spec["job_names"][inst])

    @staticmethod
    def _ranks(spec, pod):
        return list(range(pod * spec["dpl"], (pod + 1) * spec["dpl"]))

    def place_control(self):
        hosts = self.control_hosts
        if not hosts:
            if not self.engine_hosts:
                return
            hosts = [self.engine_hosts[0]]
            self.warnings.append(str(Problem("hosts", f"no host in {CONTROL_GROUP}",
                                             f"control-plane containers go to the first engine host {hosts[0].name}")))
        n = len(hosts)
        self.control = {"controller": hosts[0], "coordinator": hosts[0]}
        if self.conductor_on:
            self.control["kv_conductor"] = hosts[1 % n]
        if self.pool_on:
            self.control["kv_pool"] = hosts[2 % n]

    # ports ----------------------------------------------------------------------------------
    def _fail_port(self, host, what, source=None, preferred=None, hosts=None, length=1):
        """No free range from ``preferred`` up: blame the user_config value when a lower one would fit, else the
        host's reservations."""
        if source is not None and _room_below(hosts or [host], preferred, length):
            self.problems.append(Problem(source, f"no free TCP port for {what} from {preferred} up to {PORT_MAX} "
                                                 f"on host {host.name}: the ports above are taken or reserved",
                                         "use a lower port: the plan searches only upwards from it"))
            return
        self.problems.append(Problem(f"hosts.{host.name}.motor_reserved_ports",
                                     f"no free TCP port left for {what} in {PORT_MIN}..{PORT_MAX}",
                                     "reserve fewer ports or spread the containers over more hosts"))

    def _alloc(self, host, preferred, length, owner, what, source=None):
        port = host.alloc(preferred, length, owner)
        if port is None:
            self._fail_port(host, what, source, preferred, length=length)
            return preferred
        return port

    def _alloc_common(self, hosts, preferred, length, owner, what, source=None):
        """Lowest port range free on every host in ``hosts``; ``owner`` maps host -> container name."""
        start = max(preferred, PORT_MIN)
        while start + length - 1 <= PORT_MAX:
            moved = False
            for host in hosts:
                nxt = host.blocker(start, length)
                if nxt is not None:
                    start = nxt
                    moved = True
                    break
            if not moved:
                for host in hosts:
                    host.take(start, length, owner[host.name])
                return start
        self._fail_port(hosts[0], what, source, preferred, hosts, length)
        return preferred

    def assign_ports(self):
        ports = self.shared_ports
        pool_host = self.control.get("kv_pool")
        if pool_host is not None:
            metrics = _as_int(self.kv_pool.get("metrics_port")) or KV_POOL_METRICS_PORT
            if pool_host.is_reserved(metrics) or metrics in pool_host.ports:
                self.problems.append(Problem(f"hosts.{pool_host.name}.motor_reserved_ports",
                                             f"mooncake_master (kv_pool) always binds its metrics port {metrics} on this host",
                                             "do not reserve it, or list another host first in motor_control_hosts"))
            else:
                pool_host.take(metrics, 1, self._control_name("kv_pool"))
            ports["kv_pool_metrics"] = metrics
        control_ports = self._control_port_specs()
        if self.previous:
            self._keep_previous_ports(control_ports)
        self._assign_event_base()
        # control plane, coordinator first so that it keeps PyMotor's 1025/1026/1027 when possible
        for label, host, owner, preferred, length, _key, warn, source in control_ports:
            if label not in ports:
                what = "worker metaserver" if label == "coordinator_metaserver" else label
                ports[label] = self._alloc(host, preferred, length, owner, what, source)
            if warn:
                self._warn_moved(label, preferred, ports[label])
        for role in self.engines:  # records the raised-kv_port warnings, in role order
            self._engine_port_prefs(role, warn=True)
        # engines, instance by instance (the instances kept in place first)
        for (role, _inst), pods in self._pods_by_instance().items():
            self._assign_instance_ports(role, pods)

    def _control_port_specs(self):
        """(label, host, container, preferred, length, port_map key, warn when moved, user_config path when the user
        set the port, else None) per control-plane port.

        In allocation order; also records the coordinator's worker count (and a disabled metaserver as 0).
        """
        ports = self.shared_ports
        uc = self.user_config
        specs = []
        coord = self.control["coordinator"]
        cname = self._control_name("coordinator")
        api = _obj(_dig(uc, "motor_coordinator_config", "api_config"))
        workers = _obj(_dig(uc, "motor_coordinator_config", "inference_workers_config"))
        for key, default, label, pm_key in (("coordinator_api_infer_port", COORDINATOR_INFER_PORT, "coordinator_infer", "infer"),
                                            ("coordinator_api_mgmt_port", COORDINATOR_MGMT_PORT, "coordinator_mgmt", "mgmt"),
                                            ("coordinator_obs_port", COORDINATOR_OBS_PORT, "coordinator_obs", "obs")):
            specs.append((label, coord, cname, _as_int(api.get(key)) or default, 1, pm_key, True,
                          _user_set(api, key, f"motor_coordinator_config.api_config.{key}")))
        num_workers = _as_int(workers.get("num_workers")) or NUM_WORKERS
        meta_pref = _as_int(workers.get("worker_metaserver_base_port"))
        meta_pref = METASERVER_BASE_PORT if meta_pref is None else meta_pref
        if meta_pref > 0:
            specs.append(("coordinator_metaserver", coord, cname, meta_pref, num_workers, "metaserver", False,
                          _user_set(workers, "worker_metaserver_base_port",
                                    "motor_coordinator_config.inference_workers_config.worker_metaserver_base_port")))
        else:
            ports["coordinator_metaserver"] = 0
        ports["coordinator_num_workers"] = num_workers
        ctrl = self.control["controller"]
        capi = _obj(_dig(uc, "motor_controller_config", "api_config"))
        for key, default, label, pm_key in (("controller_api_port", CONTROLLER_API_PORT, "controller_api", "api"),
                                            ("observability_api_port", CONTROLLER_OBS_PORT, "controller_obs", "obs")):
            specs.append((label, ctrl, self._control_name("controller"), _as_int(capi.get(key)) or default, 1, pm_key, True,
                          _user_set(capi, key, f"motor_controller_config.api_config.{key}")))
        if "kv_pool" in self.control:
            specs.append(("kv_pool", self.control["kv_pool"], self._control_name("kv_pool"),
                          _as_int(self.kv_pool.get("port")) or KV_POOL_PORT, 1, "master", True,
                          "kv_cache_pool_config.port"))
        if "kv_conductor" in self.control:
            specs.append(("kv_conductor", self.control["kv_conductor"], self._control_name("kv_conductor"),
                          _as_int(self.kv_conductor.get("http_server_port")) or CONDUCTOR_PORT, 1, "http", True,
                          "kv_conductor_config.http_server_port"))
        return specs

    def _pods_by_instance(self):
        by_instance = {}
        for pod in self.pods:
            by_instance.setdefault((pod["role"], pod["instance"]), []).append(pod)
        return by_instance

    @staticmethod
    def _keep_port(hosts, port, length, preferred, owners):
        """Take ``port`` .. ``port + length - 1`` on every host when free there and not below ``preferred``.

        Returns the port, or None (nothing taken) when it cannot be kept.
        """
        if port is None or port < preferred or any(h.blocker(port, length) is not None for h in hosts):
            return None
        for host in hosts:
            host.take(port, length, owners[host.name])
        return port

    def _keep_previous_ports(self, control_ports):
        """Before any other port: the previous ports of the containers that stay on their host, where still valid.

        A previous port is kept when it is in range, not reserved, not taken by a container handled before and
        not below the current preferred value (a raised setting wins); otherwise it is allocated as usual.
        """
        ports = self.shared_ports
        for label, host, owner, preferred, length, key, _warn, _source in control_ports:
            port = self._keep_port([host], self._previous_port(owner, key, host), length, preferred, {host.name: owner})
            if port is not None:
                ports[label] = port
        for (role, inst), pods in self._pods_by_instance().items():
            if (role, inst) not in self.kept:
                continue
            spec = self.engines[role]
            prefs = self._engine_port_prefs(role)
            hosts = [p["host"] for p in pods]
            owners = {p["host"].name: p["name"] for p in pods}
            common = [("dp_rpc", "dp_rpc", prefs["dp_rpc"], 1)]
            if spec["kv"] is not None:
                common.append(("kv_port", "kv", prefs["kv"], spec["npus"]))
            for label, key, preferred, length in common:
                values = {self._previous_port(p["name"], key, p["host"]) for p in pods}
                port = self._keep_port(hosts, values.pop(), length, preferred, owners) if len(values) == 1 else None
                if port is not None:
                    for pod in pods:
                        pod[label] = port
            own_events = prefs["own_events"]
            for pod in pods:
                host, name = pod["host"], pod["name"]
                for label, preferred, length in (("node_manager", prefs["node_manager"], 1),
                                                 ("engine_base", prefs["engine_base"], 2 * spec["dpl"])):
                    port = self._keep_port([host], self._previous_port(name, label, host), length, preferred,
                                           {host.name: name})
                    if port is not None:
                        pod[label] = port
                if own_events is None:
                    continue
                first = pod["dp_ranks"][0]
                events = [("kv_events", own_events["endpoint"])]
                if own_events["replay"] is not None:
                    events.append(("kv_events_replay", own_events["replay"]))
                for label, (_prefix, preferred) in events:
                    base = self._previous_port(name, label, host)
                    port = self._keep_port([host], None if base is None else base + first, spec["dpl"],
                                           preferred + first, {host.name: name})
                    if port is not None:
                        pod[label] = port - first

    def _engine_port_prefs(self, role, warn=False):
        """Preferred ports of an engine role; ``warn`` records the raised-kv_port warning (once per role).

        ``prefs["sources"]`` maps each port to the user_config path that set it (None when not set by the user):
        the port error names that key when no port fits from it upwards.
        """
        spec = self.engines[role]
        section = _obj(self.user_config.get(spec["section"]))
        engine_config = _obj(section.get("engine_config"))
        nm_cfg = _obj(section.get("motor_nodemanger_config"))
        nm_path = f"{spec['section']}.motor_nodemanger_config"
        prefs = {
            "dp_rpc": _as_int(engine_config.get("data_parallel_rpc_port")) or DP_RPC_PORT,
            "kv": None,
            "node_manager": _as_int(_dig(nm_cfg, "api_config", "node_manager_port")) or NODE_MANAGER_PORT[role],
            "engine_base": _as_int(_dig(nm_cfg, "endpoint_config", "base_port")) or ENGINE_BASE_PORT,
            "own_events": spec["events"] if role != self.events_role else None,
            "sources": {
                "dp_rpc": _user_set(engine_config, "data_parallel_rpc_port",
                                    f"{spec['section']}.engine_config.data_parallel_rpc_port"),
                "kv": None,
                "node_manager": _user_set(_dig(nm_cfg, "api_config"), "node_manager_port",
                                          f"{nm_path}.api_config.node_manager_port"),
                "engine_base": _user_set(_dig(nm_cfg, "endpoint_config"), "base_port",
                                         f"{nm_path}.endpoint_config.base_port"),
            },
        }
        if spec["kv"] is not None:
            floor = KV_PORT_FLOOR[self.hw]
            pref = _as_int(spec["kv"]["value"])
            kv_path = f"{spec['section']}.engine_config.{_dotted(spec['kv']['path'])}.kv_port"
            if pref is None or pref < floor:
                if warn and pref is not None and role not in self._kv_warned:
                    self._kv_warned.add(role)
                    self.warnings.append(str(Problem(
                        kv_path,
                        f"{pref} is below {floor}, where the bare-metal plan starts kv_port on {self.hw}; planned from {floor}",
                        f"set kv_port to {floor} or more to silence this")))
                pref = floor
            else:
                prefs["sources"]["kv"] = kv_path
            prefs["kv"] = pref
        return prefs

    def _warn_moved(self, label, preferred, got):
        if got != preferred:
            self.warnings.append(str(Problem(f"plan.ports.{label}", f"{preferred} is taken or reserved, using {got}",
                                             "clients must use the port shown in the plan")))

    def _assign_event_base(self):
        """One event (and replay) base port for the publishing role, free for all its ranks on all hosts."""
        if self.events_role is None:
            return
        spec = self.engines[self.events_role]
        prefix, base = spec["events"]["endpoint"]
        kv_events = self.config.get("kv_events") or {}
        base = _as_int(kv_events.get("endpoint_port")) or base
        ranks_by_host = [(h, sorted(h.event_ranks)) for h in self.hosts if h.event_ranks]
        kept = self._previous_event_base("kv_events", ranks_by_host, base, None)
        base = kept if kept is not None else self._free_base(ranks_by_host, base, None)
        self.shared_ports["kv_events"] = base
        self.shared_ports["kv_events_prefix"] = prefix
        replay = spec["events"]["replay"]
        if replay is not None:
            rbase = _as_int(kv_events.get("replay_port")) or replay[1]
            kept = self._previous_event_base("kv_events_replay", ranks_by_host, rbase, base)
            rbase = kept if kept is not None else self._free_base(ranks_by_host, rbase, base)
            self.shared_ports["kv_events_replay"] = rbase
            self.shared_ports["kv_events_replay_prefix"] = replay[0]
        for pod in self.pods:
            if pod["role"] != self.events_role:
                continue
            host = pod["host"]
            for rank in pod["dp_ranks"]:
                host.take(base + rank, 1, pod["name"])
                if replay is not None:
                    host.take(self.shared_ports["kv_events_replay"] + rank, 1, pod["name"])

    def _previous_event_base(self, key, ranks_by_host, preferred, other):
        """The base most previous publishing pods had (ties: the lowest) when still free for every rank, else None."""
        if not self.previous:
            return None
        pattern = re.compile(rf"{re.escape(self.job_id)}-{ROLE_LETTER[self.events_role]}\d+-\d+")
        votes = {}
        for name, entry in self.previous.items():
            port_map = entry.get("port_map") if isinstance(entry, dict) else None
            if isinstance(name, str) and pattern.fullmatch(name) and isinstance(port_map, dict):
                value = _as_int(port_map.get(key))
                if value is not None:
                    votes[value] = votes.get(value, 0) + 1
        if not votes:
            return None
        base = min(votes, key=lambda v: (-votes[v], v))
        if base < preferred:
            return None
        for host, ranks in ranks_by_host:
            rank_set = set(ranks)
            for rank in ranks:
                port = base + rank
                if port < PORT_MIN or port > PORT_MAX or host.is_reserved(port) or port in host.ports:
                    return None
                if other is not None and (port - other) in rank_set:
                    return None
        return base

    def _free_base(self, ranks_by_host, base, other):
        base = max(base, 1)
        while True:
            bumped = False
            for host, ranks in ranks_by_host:
                rank_set = set(ranks) if other is not None else None
                for rank in ranks:
                    port = base + rank
                    if port > PORT_MAX:
                        self._fail_port(host, "KV event ports")
                        return base
                    clash = port < PORT_MIN or host.is_reserved(port) or port in host.ports
                    if not clash and other is not None:
                        clash = (port - other) in rank_set
                    if clash:
                        base = max(base + 1, PORT_MIN - rank) if port < PORT_MIN else base + 1
                        bumped = True
                        break
                if bumped:
                    break
            if not bumped:
                return base

    def _assign_instance_ports(self, role, pods):
        """The ports of one instance that ``_keep_previous_ports`` did not keep (all of them for a new one)."""
        spec = self.engines[role]
        prefs = self._engine_port_prefs(role)
        sources = prefs["sources"]
        hosts = [p["host"] for p in pods]
        owners = {p["host"].name: p["name"] for p in pods}
        if "dp_rpc" not in pods[0]:
            dp_rpc = self._alloc_common(hosts, prefs["dp_rpc"], 1, owners, "data_parallel_rpc_port", sources["dp_rpc"])
            for pod in pods:
                pod["dp_rpc"] = dp_rpc
        if "kv_port" not in pods[0]:
            kv_port = None
            if spec["kv"] is not None:
                kv_port = self._alloc_common(hosts, prefs["kv"], spec["npus"], owners, "kv_port", sources["kv"])
            for pod in pods:
                pod["kv_port"] = kv_port
        own_events = prefs["own_events"]
        for pod in pods:
            host = pod["host"]
            name = pod["name"]
            if "node_manager" not in pod:
                pod["node_manager"] = self._alloc(host, prefs["node_manager"], 1, name, "node_manager_port",
                                                  sources["node_manager"])
            if "engine_base" not in pod:
                pod["engine_base"] = self._alloc(host, prefs["engine_base"], 2 * spec["dpl"], name, "engine base_port",
                                                 sources["engine_base"])
            first = pod["dp_ranks"][0]
            if role == self.events_role:
                pod["kv_events"] = self.shared_ports["kv_events"]
                pod["kv_events_replay"] = self.shared_ports.get("kv_events_replay")
            elif own_events is not None:
                if "kv_events" not in pod:
                    start = self._alloc(host, own_events["endpoint"][1] + first, spec["dpl"], name, "kv events")
                    pod["kv_events"] = start - first
                if own_events["replay"] is None:
                    pod["kv_events_replay"] = None
                elif "kv_events_replay" not in pod:
                    start = self._alloc(host, own_events["replay"][1] + first, spec["dpl"], name, "kv events replay")
                    pod["kv_events_replay"] = start - first
            else:
                pod["kv_events"] = None
                pod["kv_events_replay"] = None

    # containers -----------------------------------------------------------------------------
    def _control_name(self, role):
        return f"{self.job_id}-{role.replace('_', '-')}"

    def _shared_user_config(self):
        uc = _copy(self.user_config)
        ports = self.shared_ports
        capi = _ensure(uc, "motor_controller_config", "api_config")
        capi["controller_api_port"] = ports["controller_api"]
        capi["observability_api_port"] = ports["controller_obs"]
        coord = _ensure(uc, "motor_coordinator_config")
        api = _ensure(coord, "api_config")
        api["coordinator_api_infer_port"] = ports["coordinator_infer"]
        api["coordinator_api_mgmt_port"] = ports["coordinator_mgmt"]
        api["coordinator_obs_port"] = ports["coordinator_obs"]
        _ensure(coord, "inference_workers_config")["worker_metaserver_base_port"] = ports["coordinator_metaserver"]
        if "kv_pool" in ports:
            _ensure(uc, "kv_cache_pool_config")["port"] = ports["kv_pool"]
        if "kv_conductor" in ports:
            _ensure(uc, "kv_conductor_config")["http_server_port"] = ports["kv_conductor"]
        if self.events_role is not None:
            endpoint = f"{ports['kv_events_prefix']}:{ports['kv_events']}"
            replay = None
            if "kv_events_replay" in ports:
                replay = f"{ports['kv_events_replay_prefix']}:{ports['kv_events_replay']}"
            kec = _ensure(uc, self.engines[self.events_role]["section"], "engine_config", "kv_events_config")
            kec["endpoint"] = endpoint
            if replay is not None:
                kec["replay_endpoint"] = replay
            pkec = coord.get("prefill_kv_event_config")
            if isinstance(pkec, dict) or self.affinity:
                pkec = _ensure(coord, "prefill_kv_event_config")
                pkec["endpoint"] = endpoint
                if replay is not None:
                    pkec["replay_endpoint"] = replay
                if "kv_conductor" in ports:
                    pkec["http_server_port"] = ports["kv_conductor"]
        return uc

    def _env(self, role, host, name, job_name, extra):
        env_all = self.config.get("env") or {}
        env = {k: _env_str(v) for k, v in (env_all.get(role) or env_all.get("common") or {}).items()}
        ctrl_ip = self.control["controller"].ip
        coord_ip = self.control["coordinator"].ip
        wiring = {
            "ROLE": role,
            "JOB_NAME": job_name,
            "POD_IP": host.ip,
            "HOST_IP": host.ip,
            "CONTROLLER_SERVICE": ctrl_ip,
            "COORDINATOR_SERVICE": coord_ip,
            "CONFIGMAP_PATH": f"{CONFIGMAP_ROOT}/{self.job_id}/{name}",
            "CONFIG_PATH": CONFIG_PATH,
            "ASCEND_RUNTIME_OPTIONS": "NODRV",
            "HCCL_IF_IP": host.ip,
            "GLOO_SOCKET_IFNAME": host.nic,
            "TP_SOCKET_IFNAME": host.nic,
            "HCCL_SOCKET_IFNAME": host.nic,
        }
        wiring.update(extra)
        env_config = self.config.get("env_config") or {}
        sections = [ENV_SECTION[role]] + (["motor_engine_prefill_env"] if role == "union" else []) + ["motor_common_env"]
        for key, value in wiring.items():
            if key in env and env[key] != value:
                section = next((s for s in sections if key in (env_config.get(s) or {})), ENV_SECTION[role])
                msg = str(Problem(f"env_config.{section}.{key}", "is set by the deployment plan; the env.json value is ignored",
                                  "remove it from env.json"))
                if msg not in self._env_warned:
                    self._env_warned.add(msg)
                    self.warnings.append(msg)
        env.update(wiring)
        return {k: env[k] for k in sorted(env)}

    def build_containers(self):
        # serialised once, parsed once per container: every container owns its copy
        shared = json.dumps(self._shared_user_config())
        ports = self.shared_ports
        pool_ip = self.control["kv_pool"].ip if "kv_pool" in self.control else None
        conductor_ip = self.control["kv_conductor"].ip if "kv_conductor" in self.control else None
        managers = [f"{d}:{d}:rwm" for d in MANAGER_DEVICES]
        ipc_host = "host" if self.pool_on else None

        def control(role, tier, port_map, extra, ipc_mode=None, needs_weights=False):
            host = self.control[role]
            name = self._control_name(role)
            job_name = name
            plist = []
            for key, value in port_map.items():
                if key == "metaserver" and value:
                    plist.extend(range(value, value + ports["coordinator_num_workers"]))
                elif value:
                    plist.append(value)
            self.containers.append({
                "name": name, "host": host.name, "ip": host.ip, "role": role, "job_name": job_name,
                "instance": None, "pod": None, "tier": tier, "npu_ids": [], "devices": [],
                "dp_ranks": [], "endpoints": [],
                "env": self._env(role, host, name, job_name, extra),
                "ports": sorted(plist), "port_map": port_map,
                "user_config": json.loads(shared),
                "shm_size": None if ipc_mode == "host" else CONTROL_SHM_SIZE,
                "ipc_mode": ipc_mode, "mounts_profile": "control", "needs_weights": needs_weights,
                "configmap_path": f"{CONFIGMAP_ROOT}/{self.job_id}/{name}",
            })

        control("controller", TIER_CONTROL, {"api": ports["controller_api"], "obs": ports["controller_obs"]}, {})
        coord_extra = {}
        if self.affinity and conductor_ip is not None:
            coord_extra["KV_CONDUCTOR_SERVICE"] = conductor_ip
        elif conductor_ip is not None:
            self.warnings.append(str(Problem("kv_conductor_config.http_server_port",
                                             "the KV conductor is deployed but scheduler_type is not kv_cache_affinity",
                                             "set scheduler_type to kv_cache_affinity or remove http_server_port")))
        control("coordinator", TIER_CONTROL,
                {"infer": ports["coordinator_infer"], "mgmt": ports["coordinator_mgmt"], "obs": ports["coordinator_obs"],
                 "metaserver": ports["coordinator_metaserver"]},
                coord_extra, needs_weights=bool(coord_extra))
        if conductor_ip is not None:
            control("kv_conductor", TIER_CONTROL, {"http": ports["kv_conductor"]},
                    {"KVP_MASTER_SERVICE": pool_ip} if pool_ip else {})
        if pool_ip is not None:
            control("kv_pool", TIER_KV_POOL, {"master": ports["kv_pool"], "metrics": ports["kv_pool_metrics"]}, {
                "KVP_MASTER_SERVICE": pool_ip,
                "KV_POOL_PORT": str(ports["kv_pool"]),
                "KV_POOL_EVICTION_HIGH_WATERMARK_RATIO": _env_str(self.kv_pool.get("eviction_high_watermark_ratio", "")),
                "KV_POOL_EVICTION_RATIO": _env_str(self.kv_pool.get("eviction_ratio", "")),
                "DEFAULT_KV_LEASE_TTL": _env_str(self.kv_pool.get("default_kv_lease_ttl", 11000)),
            }, ipc_mode=ipc_host)
        engine_extra = {"KVP_MASTER_SERVICE": pool_ip, "PYTHONHASHSEED": "0"} if pool_ip else {}
        for pod in self.pods:
            self.containers.append(self._engine_container(pod, shared, managers, engine_extra, ipc_host))
        self.containers.sort(key=lambda c: (c["tier"], _natural_key(c["name"])))

    def _engine_container(self, pod, shared, managers, extra, ipc_mode):
        role = pod["role"]
        spec = self.engines[role]
        host = pod["host"]
        name = pod["name"]
        uc = json.loads(shared)
        section = _ensure(uc, spec["section"])
        nm_cfg = _ensure(section, "motor_nodemanger_config")
        _ensure(nm_cfg, "api_config")["node_manager_port"] = pod["node_manager"]
        _ensure(nm_cfg, "endpoint_config")["base_port"] = pod["engine_base"]
        engine_config = _ensure(section, "engine_config")
        old_rpc = engine_config.get("data_parallel_rpc_port")
        engine_config["data_parallel_rpc_port"] = str(pod["dp_rpc"]) if isinstance(old_rpc, str) else pod["dp_rpc"]
        plist = [pod["node_manager"], pod["dp_rpc"]]
        plist.extend(range(pod["engine_base"], pod["engine_base"] + 2 * spec["dpl"]))
        port_map = {"node_manager": pod["node_manager"], "engine_base": pod["engine_base"], "dp_rpc": pod["dp_rpc"]}
        if pod["kv_port"] is not None:
            target = engine_config
            for key in spec["kv"]["path"]:
                target = target[key]
            old = target.get("kv_port")
            target["kv_port"] = pod["kv_port"] if isinstance(old, int) and not isinstance(old, bool) else str(pod["kv_port"])
            plist.extend(range(pod["kv_port"], pod["kv_port"] + spec["npus"]))
            port_map["kv"] = pod["kv_port"]
        if pod["kv_events"] is not None:
            kec = _ensure(engine_config, "kv_events_config")
            prefix = spec["events"]["endpoint"][0]
            kec["endpoint"] = f"{prefix}:{pod['kv_events']}"
            plist.extend(pod["kv_events"] + r for r in pod["dp_ranks"])
            port_map["kv_events"] = pod["kv_events"]
            if pod["kv_events_replay"] is not None:
                kec["replay_endpoint"] = f"{spec['events']['replay'][0]}:{pod['kv_events_replay']}"
                plist.extend(pod["kv_events_replay"] + r for r in pod["dp_ranks"])
                port_map["kv_events_replay"] = pod["kv_events_replay"]
        endpoints = [
            {"dp_rank": rank, "local_index": i, "service_port": pod["engine_base"] + 2 * i,
             "mgmt_port": pod["engine_base"] + 2 * i + 1}
            for i, rank in enumerate(pod["dp_ranks"])
        ]
        return {
            "name": name, "host": host.name, "ip": host.ip, "role": role, "job_name": pod["job_name"],
            "instance": pod["instance"], "pod": pod["pod"], "tier": TIER_ENGINE, "npu_ids": list(pod["npu_ids"]),
            "devices": [f"/dev/davinci{n}:/dev/davinci{n}:rwm" for n in pod["npu_ids"]] + list(managers),
            "dp_ranks": list(pod["dp_ranks"]), "endpoints": endpoints,
            "env": self._env(role, host, name, pod["job_name"], extra),
            "ports": sorted(plist), "port_map": port_map, "user_config": uc,
            "shm_size": None if ipc_mode == "host" else ENGINE_SHM_SIZE,
            "ipc_mode": ipc_mode, "mounts_profile": "engine", "needs_weights": True,
            "configmap_path": f"{CONFIGMAP_ROOT}/{self.job_id}/{name}",
        }

    # invariant + result ----------------------------------------------------------------------
    def check_invariant(self):
        """Re-check the plan from the containers themselves; a failure here is a bug in the planner."""
        bugs = []
        by_host = {}
        for cont in self.containers:
            by_host.setdefault(cont["host"], []).append(cont)
        for host_name, conts in by_host.items():
            host = self._host_index[host_name]
            ports = [p for c in conts for p in c["ports"]]
            npus = [n for c in conts for n in c["npu_ids"]]
            clean = len(set(ports)) == len(ports) and len(set(npus)) == len(npus)
            clean = clean and (not ports or (min(ports) >= PORT_MIN and max(ports) <= PORT_MAX))
            clean = clean and not (host.reserved and any(host.is_reserved(p) for p in ports))
            clean = clean and set(npus) <= set(host.npu_ids)
            if not clean:
                bugs.extend(self._explain(host, conts))
        pods_hosts = {}
        for pod in self.pods:
            seen_hosts = pods_hosts.setdefault(pod["job_name"], set())
            if pod["host"].name in seen_hosts:
                bugs.append(f"two pods of {pod['job_name']} are on {pod['host'].name}")
            seen_hosts.add(pod["host"].name)
        if bugs:
            raise MotorPlanError([Problem("plan", bug, "this is a bug in motor_plan; please report it") for bug in bugs])

    @staticmethod
    def _explain(host, conts):
        bugs = []
        seen = {}
        npus = {}
        for cont in conts:
            for port in cont["ports"]:
                if port in seen:
                    bugs.append(f"port {port} is bound twice on {host.name} ({seen[port]} and {cont['name']})")
                seen[port] = cont["name"]
                if not PORT_MIN <= port <= PORT_MAX or host.is_reserved(port):
                    bugs.append(f"port {port} of {cont['name']} is reserved or out of range on {host.name}")
            for npu in cont["npu_ids"]:
                if npu in npus:
                    bugs.append(f"NPU {npu} on {host.name} is given to {npus[npu]} and {cont['name']}")
                if npu not in host.npu_ids:
                    bugs.append(f"NPU {npu} of {cont['name']} is not in motor_npu_ids of {host.name}")
                npus[npu] = cont["name"]
        return bugs

    def result(self):
        ports = self.shared_ports
        hosts = {}
        containers_by_host = {}
        for cont in self.containers:
            containers_by_host.setdefault(cont["host"], []).append(cont)
        for host in self.hosts:
            conts = containers_by_host.get(host.name, [])
            used = sorted(n for n in host.npu_ids if not host.free[n])
            hosts[host.name] = {
                "ip": host.ip, "nic": host.nic, "hardware_type": host.hw,
                "engine": host.engine, "control": host.control,
                "npu_ids": list(host.npu_ids), "used_npu_ids": used,
                "free_npu_ids": [n for n in host.npu_ids if host.free[n]],
                "reserved_ports": [[lo, hi] for lo, hi in host.reserved],
                "ports": sorted([p for c in conts for p in c["ports"]]),
                "containers": [c["name"] for c in conts],
            }
        instances = []
        pods_of = {}
        for pod in self.pods:
            pods_of.setdefault((pod["role"], pod["instance"]), []).append(pod)
        for role, spec in self.engines.items():
            for inst in range(spec["count"]):
                pods = pods_of.get((role, inst), [])
                instances.append({
                    "role": role, "instance": inst, "job_name": spec["job_names"][inst],
                    "dp": spec["dp"], "dp_local_per_pod": spec["dpl"], "npus_per_pod": spec["npus"],
                    "pods": [{"pod": p["pod"], "host": p["host"].name, "ip": p["host"].ip, "container": p["name"],
                              "npu_ids": list(p["npu_ids"]), "dp_ranks": list(p["dp_ranks"])} for p in pods],
                })
        coord = self.control["coordinator"]
        ctrl = self.control["controller"]
        plan = {
            "job_id": self.job_id,
            "mode": self.config.get("mode"),
            "hardware_type": self.hw,
            "image": _dig(self.user_config, "motor_deploy_config", "image_name") or "",
            "affinity": self.affinity,
            "controller": {"host": ctrl.name, "ip": ctrl.ip, "api_port": ports["controller_api"],
                           "obs_port": ports["controller_obs"]},
            "coordinator": {
                "host": coord.name, "ip": coord.ip, "infer_port": ports["coordinator_infer"],
                "mgmt_port": ports["coordinator_mgmt"], "obs_port": ports["coordinator_obs"],
                "metaserver_base_port": ports["coordinator_metaserver"],
                "url": f"http://{_url_host(coord.ip)}:{ports['coordinator_infer']}",
            },
            "kv_pool": None,
            "kv_conductor": None,
            "kv_events": None,
            "hosts": hosts,
            "instances": instances,
            "containers": self.containers,
            "warnings": list(self.warnings),
        }
        if "kv_pool" in self.control:
            pool = self.control["kv_pool"]
            plan["kv_pool"] = {"host": pool.name, "ip": pool.ip, "port": ports["kv_pool"],
                               "metrics_port": ports["kv_pool_metrics"]}
        if "kv_conductor" in self.control:
            cond = self.control["kv_conductor"]
            plan["kv_conductor"] = {"host": cond.name, "ip": cond.ip, "port": ports["kv_conductor"]}
        if self.events_role is not None:
            plan["kv_events"] = {"role": self.events_role, "endpoint_port": ports["kv_events"],
                                 "replay_port": ports.get("kv_events_replay")}
        return plan

    def run(self):
        self.place_engines()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.place_control()
        self.assign_ports()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.build_containers()
        self.check_invariant()
        return self.result()


def _dotted(path):
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


def _url_host(ip):
    return f"[{ip}]" if ":" in ip else ip


def build_plan(config: dict, hosts: dict, previous: dict | None = None) -> dict[str, Any]:
    """Place every PyMotor container on hosts, NPUs and ports; raise MotorPlanError when impossible.

    ``previous`` (optional) is the current placement, ``{container name: {"host", "npu_ids", "port_map"}}``
    (other keys are ignored, so a previous plan's containers keyed by name will do; see ``placement_of``):
    containers that can stay keep their host, NPUs and ports.  Unusable entries are ignored.  When keeping
    them leaves no room for the rest, the plan is built as without ``previous``, with a warning.
    """
    # The plan is a large acyclic tree of fresh dicts and lists (one user_config per container): cyclic
    # garbage collections while it grows only re-scan it, which made big plans grow faster than linearly.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if isinstance(previous, dict) and previous:
            try:
                return _Planner(config, hosts, previous).run()
            except MotorPlanError as err:
                if any(p.path == "plan" for p in err.problems):
                    raise  # a planner bug, not a lack of room
                plan = _Planner(config, hosts).run()
                plan["warnings"].append(str(Problem(
                    "previous", f"the running containers cannot all keep their place ({err.problems[0]}); "
                    "planned as for a new deployment, so running containers may move and restart",
                    "add engine hosts or free NPUs / ports to scale without moving containers")))
                return plan
        return _Planner(config, hosts).run()
    finally:
        if gc_was_enabled:
            gc.enable()


def placement_of(plan: dict) -> dict[str, dict]:
    """The ``previous`` input of ``build_plan`` that keeps every container of ``plan`` where it is."""
    return {
        cont["name"]: {"host": cont["host"], "npu_ids": list(cont["npu_ids"]), "port_map": dict(cont["port_map"])}
        for cont in plan.get("containers") or []
    }


# --------------------------------------------------------------------------------------------------
# table


def _strip_dir(path) -> str:
    text = str(path or "")
    return text.rstrip("/") or text


def weight_dir(user_config: dict) -> str:
    """Host directory of the model weights (motor_deploy_config.weight_mount_path, default /mnt/weight)."""
    deploy = (user_config or {}).get("motor_deploy_config") or {}
    return _strip_dir(deploy.get("weight_mount_path") or "/mnt/weight")


def _model_dir(user_config: dict, role: str) -> str:
    if role == "coordinator":
        section = ((user_config.get("motor_coordinator_config") or {}).get("prefill_kv_event_config") or {})
        return _strip_dir(section.get("model_path"))
    return _strip_dir(((user_config.get(f"motor_engine_{role}_config") or {}).get("engine_config") or {}).get("model"))


def model_dirs(source) -> list:
    """The model directories that must exist on a host: of the plan entries given (those that need the weights),
    or of a whole normalized config (every engine role and the coordinator, before anything is planned)."""
    if isinstance(source, dict):
        user_config = source.get("user_config") or {}
        pairs = [(user_config, role) for role in list(source.get("engines") or {}) + ["coordinator"]]
    else:
        pairs = [(c.get("user_config") or {}, c.get("role")) for c in source or [] if c.get("needs_weights")]
    out = []
    for user_config, role in pairs:
        path = _model_dir(user_config, role)
        if path and path not in out:
            out.append(path)
    return out


def plan_table(plan: dict) -> str:
    """The plan as a fixed-width text table: host, ip, container, role, NPUs, ports (one row per container)."""
    header = ("HOST", "IP", "CONTAINER", "ROLE", "TIER", "NPUS", "PORTS")
    rows = []
    order = {name: i for i, name in enumerate(plan.get("hosts") or {})}
    containers = sorted(plan.get("containers") or [],
                        key=lambda c: (order.get(c["host"], len(order)), c["tier"], _natural_key(c["name"])))
    for cont in containers:
        rows.append((cont["host"], cont.get("ip", ""), cont["name"], cont["role"], str(cont["tier"]),
                     _compress(cont.get("npu_ids") or []), _compress(cont.get("ports") or [])))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    coord = plan.get("coordinator") or {}
    summary = [f"job {plan.get('job_id')} ({plan.get('mode')}, {plan.get('hardware_type')}): "
               f"{len(containers)} containers on {len({c['host'] for c in containers})} hosts; "
               f"OpenAI API at {coord.get('url', '?')}"]
    for warning in plan.get("warnings") or []:
        summary.append(f"WARNING: {warning}")
    return "\n".join(lines + summary)
