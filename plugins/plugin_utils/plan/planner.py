# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Deployment plan for PyMotor on bare metal: hosts, NPUs and ports of every container (the motor_plan filter).

``build_plan(config, hosts, previous=None)`` is pure (no I/O, no Ansible objects) and deterministic; the rules
(placement, ports, sticky placement) are in docs/design.md ("Contract of motor_plan").
"""

from __future__ import annotations

import bisect
import gc
from itertools import chain
from typing import Any

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONFIG_ROOT,
    DEPLOY_KEYS,
    HARDWARE_NPUS,
    KV_EVENTS_PORT,
    NPU_GROUP,
    NPU_GROUP_NAME,
    PLANNED_ENGINE_ROLES,
    PORT_MAX,
    PORT_MIN,
    Problem,
    ProblemsError,
    ROLE_LETTER,
    job_id_problem,
    splits_npu_group,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.containers import ContainerBuilder
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.event_ports import EventPorts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import (
    MOONCAKE_STORE_CONNECTORS,
    as_int,
    dig,
    endpoint_port,
    obj,
    truthy,
    url_host,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hccl import HcclPorts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hosts import parse_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.placement import Placement
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.ports import PortAssignment
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.sglang import SGLangPlan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.single import SingleContainerPlan, is_single_container
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.standby import StandbyPlan


class MotorPlanError(ProblemsError):
    """The plan cannot be built; ``problems`` lists every reason, ``str()`` one per line."""


def build_plan(config: dict, hosts: dict, previous: dict | None = None, config_root: str = CONFIG_ROOT) -> dict[str, Any]:
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
                return Planner(config, hosts, previous, config_root).run()
            except MotorPlanError as err:
                if any(p.path == "plan" for p in err.problems):
                    raise  # a planner bug, not a lack of room
                plan = Planner(config, hosts, None, config_root).run()
                plan["warnings"].append(str(Problem(
                    "previous", f"the running containers cannot all keep their place ({err.problems[0]}); "
                    "planned as for a new deployment, so running containers may move and restart",
                    "add engine hosts or free NPUs / ports to scale without moving containers")))
                return plan
        return Planner(config, hosts, None, config_root).run()
    finally:
        if gc_was_enabled:
            gc.enable()


def placement_of(plan: dict) -> dict[str, dict]:
    """The ``previous`` input of ``build_plan`` that keeps every container of ``plan`` where it is."""
    return {
        cont["name"]: {"host": cont["host"], "npu_ids": list(cont["npu_ids"]), "port_map": dict(cont["port_map"])}
        for cont in plan.get("containers") or []
    }


class Planner(SGLangPlan, SingleContainerPlan, StandbyPlan, Placement, PortAssignment, EventPorts,  # pylint: disable=too-many-instance-attributes
              HcclPorts, ContainerBuilder):
    """One plan: check the config, parse the hosts, place, assign ports, build the containers, check the result."""

    def __init__(self, config, hosts, previous=None, config_root=CONFIG_ROOT):
        self.problems = []
        self.config_root = str(config_root or CONFIG_ROOT).rstrip("/") or CONFIG_ROOT
        self.warnings = []
        self.config = config
        self._check_config()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.hw = config["hardware_type"]
        self.job_id = str(config["job_id"])
        self.user_config = config["user_config"]
        self.hosts = parse_hosts(hosts, self.hw, self.problems, self.warnings)
        if self.problems:
            raise MotorPlanError(self.problems)
        self.engine_hosts = [h for h in self.hosts if h.engine and h.hw == self.hw]
        self.control_hosts = [h for h in self.hosts if h.control]
        self.plan_standby(hosts)
        self.engines = {}
        for role in PLANNED_ENGINE_ROLES:
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
        self._host_ports = {}  # host -> its containers' ports, sorted (check_invariant)
        self._runs = {}  # range -> its ints as a list, made once (ContainerBuilder._listed)
        # the current placement (sticky scale / reconfigure): name -> {host, npu_ids, port_map}
        self.previous = previous if isinstance(previous, dict) else {}
        self.single = is_single_container(self.user_config)
        self.kept = set()  # (role, instance) of the engine instances kept where previous puts them

    def _check_config(self):
        cfg = self.config
        if not isinstance(cfg, dict) or not isinstance(cfg.get("user_config"), dict) or "engines" not in cfg:
            self.problems.append(Problem("config", "is not the output of pymotor.ascend.motor_config",
                                         "pass motor_config(user_config, env_config) to motor_plan"))
            return
        hw = cfg.get("hardware_type")
        if hw not in HARDWARE_NPUS:
            self.problems.append(Problem("motor_deploy_config.hardware_type",
                                         f"{hw!r} is not supported by the bare-metal planner",
                                         "use one of " + ", ".join(HARDWARE_NPUS)))
        bad_job_id = job_id_problem(cfg.get("job_id"))
        if bad_job_id is not None:
            self.problems.append(bad_job_id)
        if not isinstance(cfg.get("engines"), dict) or not any(r in (cfg.get("engines") or {}) for r in PLANNED_ENGINE_ROLES):
            self.problems.append(Problem("config.engines", "no engine role (prefill, decode or union) is defined",
                                         "run motor_config on a complete user_config"))

    def _engine_spec(self, role, eng):
        keys = DEPLOY_KEYS[role]
        spec = {"role": role}
        for field, key in (("count", keys[0]), ("pods", keys[1]), ("npus", keys[2])):
            value = as_int(eng.get({"npus": "npus_per_pod"}.get(field, field)))
            if value is None or value < 1:
                self.problems.append(Problem(f"motor_deploy_config.{key}", f"must be a positive integer, got {value!r}",
                                             "fix the user_config and re-run motor_config"))
                value = 1
            spec[field] = value
        # the engine hosts' own NPU counts (inventory or discovery), not the number the type name ends with
        max_npus = max([HARDWARE_NPUS.get(self.hw, 16)] + [len(h.npu_ids) for h in self.engine_hosts])
        if spec["npus"] > max_npus:
            self.problems.append(Problem(f"motor_deploy_config.{keys[2]}",
                                         f"{spec['npus']} NPUs per pod do not fit on any {self.hw} engine host "
                                         f"(at most {max_npus} NPUs)",
                                         "use more pods per instance with fewer NPUs each, or list the hosts' NPUs "
                                         "in motor_npu_ids"))
        hw = self.config["hardware_type"]
        if splits_npu_group(hw, spec["npus"]):
            self.warnings.append(str(Problem(f"motor_deploy_config.{keys[2]}",
                                             f"{spec['npus']} NPUs per pod on {hw} splits a {NPU_GROUP_NAME[hw]}",
                                             f"use a count that fills whole groups of {NPU_GROUP[hw]} or fits in one")))
        dp = as_int(eng.get("dp")) or 1
        dpl = as_int(eng.get("dp_local_per_pod")) or max(1, dp // spec["pods"])
        spec["dp"] = dp
        spec["dpl"] = dpl
        spec["section"] = eng.get("section") or f"motor_engine_{role}_config"
        self._sglang_spec(spec, eng)
        section = obj(self.config["user_config"].get(spec["section"]))
        engine_config = obj(section.get("engine_config"))
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
        endpoint = endpoint_port(kec.get("endpoint", f"tcp://*:{KV_EVENTS_PORT}"))
        if endpoint is None:
            return None
        replay = endpoint_port(kec.get("replay_endpoint"))
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
            connectors = dig(ktc, "kv_connector_extra_config", "connectors")
            if not isinstance(connectors, list) or not connectors or not isinstance(connectors[0], dict):
                return None
            target = connectors[0]
            path = ("kv_transfer_config", "kv_connector_extra_config", "connectors", 0)
        name = str(target.get("kv_connector", "")).lower()
        binds = "kv_port" in target or (name.startswith("mooncake") and name not in MOONCAKE_STORE_CONNECTORS)
        if not binds:
            return None
        return {"path": path, "value": target.get("kv_port")}

    def check_invariant(self):
        """Re-check the plan from the containers themselves; a failure here is a bug in the planner."""
        bugs = []
        by_host = {}
        for cont in self.containers:
            by_host.setdefault(cont["host"], []).append(cont)
        for host_name, conts in by_host.items():
            host = self._host_index[host_name]
            # loops in C and bisect: a host's ports are mostly rank pools, many more than its containers
            ports = sorted(chain.from_iterable(c["ports"] for c in conts))
            self._host_ports[host_name] = ports  # the plan lists them (result)
            npus = [n for c in conts for n in c["npu_ids"]]
            clean = len(set(ports)) == len(ports) and len(set(npus)) == len(npus)
            clean = clean and (not ports or (ports[0] >= PORT_MIN and ports[-1] <= PORT_MAX))
            clean = clean and not any(bisect.bisect_right(ports, hi) > bisect.bisect_left(ports, lo)
                                      for lo, hi in host.reserved)
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
                "ports": self._host_ports.get(host.name) or sorted(chain.from_iterable(c["ports"] for c in conts)),
                "containers": [c["name"] for c in conts],
            }
        instances = []
        pods_of = {}
        for pod in self.pods:
            pods_of.setdefault((pod["role"], pod["instance"]), []).append(pod)
        for role, spec in ({} if self.single else self.engines).items():
            for inst in range(spec["count"]):
                pods = pods_of.get((role, inst), [])
                instances.append({
                    "role": role, "instance": inst, "job_name": spec["job_names"][inst],
                    "dp": spec["dp"], "dp_local_per_pod": spec["dpl"], "npus_per_pod": spec["npus"],
                    "pods": [{"pod": p["pod"], "host": p["host"].name, "ip": p["host"].ip, "container": p["name"],
                              "npu_ids": list(p["npu_ids"]), "dp_ranks": list(p["dp_ranks"]),
                              "rank_pool": self._listed(p["rank_pool"])} for p in pods],
                })
        if self.single:
            instances = self.single_instances()
        coord = self.control["coordinator"]
        ctrl = self.control["controller"]
        plan = {
            "job_id": self.job_id,
            "mode": self.config.get("mode"),
            "hardware_type": self.hw,
            "image": dig(self.user_config, "motor_deploy_config", "image_name") or "",
            "affinity": self.affinity,
            "controller": {"host": ctrl.name, "ip": self.service_address("controller"), "api_port": ports["controller_api"],
                           "obs_port": ports["controller_obs"]},
            "coordinator": {
                "host": coord.name, "ip": self.service_address("coordinator"), "infer_port": ports["coordinator_infer"],
                "mgmt_port": ports["coordinator_mgmt"], "obs_port": ports["coordinator_obs"],
                "metaserver_base_port": ports["coordinator_metaserver"],
                "url": f"http://{url_host(self.service_address('coordinator'))}:{ports['coordinator_infer']}",
            },
            "kv_pool": None,
            "kv_conductor": None,
            "kv_events": None,
            "hosts": hosts,
            "instances": instances,
            "containers": self.containers,
            "warnings": list(self.warnings),
        }
        standby = self.standby_result()
        if standby is not None:  # only with master/standby: a plan without it stays as it was
            plan["standby"] = standby
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
        if self.single:
            return self._run_single()
        self.place_engines()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.place_control()
        self.assign_ports()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.assign_hccl_ports()
        if self.problems:
            raise MotorPlanError(self.problems)
        self.build_containers()
        self.check_invariant()
        return self.result()

    def _run_single(self):
        """deploy_mode single_container (plan/single.py): one container, the same entry shape as every other."""
        self.split_engine_hosts()
        self.run_single()
        if self.problems:
            raise MotorPlanError(self.problems)
        shell_env = self.shell_env()
        for cont in self.containers:
            cont["shell_env"] = shell_env
            cont["kv_patch"] = False  # no conductor in this mode: PyMotor's deployer patches vLLM only with one
        self.check_invariant()
        return self.result()
