# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""deploy_mode single_container: the whole job in one container, as upstream PyMotor's deployer runs it.

Upstream (../shared/upstream/pymotor): ``examples/deployer/lib/generator/single_container.py`` makes one pod
``<job_id>-single-container`` with ``ROLE=SINGLE_CONTAINER``; ``startup/boot.sh:16-17`` sources
``roles/all_combine_in_single_container.sh``, which starts the coordinator, the controller, the KV pool master (when
``KVP_MASTER_SERVICE`` is set) and one node manager per prefill and per decode instance (``ROLE=prefill|decode``,
``INDEX=i``, ``JOB_NAME=p<i>|d<i>``), all reading the one user_config. Each node manager moves its ports and devices
by an offset of its own (``motor/config/node_manager.py:141-211``, only with the scheduler's deploy_mode
``pd_disaggregation_single_container``):

- node manager port: prefill ``port_p + i``, decode ``port_d + p_instances * p_dp + i``;
- engine base port: prefill ``base_p + i * d_dp * 2``, decode ``base_d + (p_instances * p_dp + i * d_dp) * 2``
  (upstream's prefill offset steps by the decode DP size);
- devices: prefill ``i * p_world``, decode ``p_instances * p_world + i * d_world``;
- dp_rpc port: the prefill section's ``data_parallel_rpc_port`` + ``i`` (prefill) or ``p_instances + i`` (decode);
  kv_port: the prefill section's + the device offset.

The plan writes the bases into the one user_config so that these offset ports are free on the host, and lists every
one of them on the container; the container gets the NPUs the device offsets reach (p_instances x p_world +
d_instances x d_world, contiguous; upstream's generator gives max(p_pod_npu_num, d_pod_npu_num), which is that many
only when the pod counts are set to it).
"""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONFIG_PATH,
    DEPLOY_KEYS,
    KV_LEASE_TTL,
    Problem,
    TIER_ENGINE,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.containers import ENGINE_SHM_SIZE, MANAGER_DEVICES
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import dig, ensure, env_str

SINGLE_CONTAINER_MODE = "single_container"
SINGLE_SCHEDULER_MODE = "pd_disaggregation_single_container"
SINGLE_ROLE = "single_container"  # the plan's role of the combined container
SINGLE_ENV_ROLE = "SINGLE_CONTAINER"  # upstream's ROLE (lib/constant.py:151, boot.sh:16)
SINGLE_SCRIPT = "all_combine_in_single_container.sh"
# the functions upstream's set_env_to_shell injects into it (examples/deployer/lib/utils.py:250-260): added to the
# single container's config directory only (reconcile/specs.py), so motor_service_env_functions, which is part of
# every container's config hash, stays as it is
SINGLE_FUNCTIONS = ("set_controller_env", "set_coordinator_env", "set_encode_env", "set_prefill_env", "set_decode_env",
                    "set_union_env", "set_kv_pool_env", "set_kv_conductor_env")
SINGLE_ROLES = ("prefill", "decode")  # what the upstream script starts node managers for
WHERE = "upstream motor/config/node_manager.py:141-211"


def is_single_container(user_config) -> bool:
    """Whether the user_config deploys upstream's single-container mode."""
    return dig(user_config, "motor_deploy_config", "deploy_mode") == SINGLE_CONTAINER_MODE


class SingleContainerPlan:
    """The plan of a single_container job: one host, one container, every port the upstream offsets reach."""

    def _single_counts(self):
        """(p_instances, p_dp, p_world, d_instances, d_dp, d_world) or None with problems recorded."""
        if set(self.engines) != set(SINGLE_ROLES):
            self.problems.append(Problem("motor_deploy_config.deploy_mode",
                                         "single_container runs prefill and decode instances only "
                                         "(upstream startup/roles/all_combine_in_single_container.sh:55-69)",
                                         "define p_instances_num and d_instances_num, no union instances"))
            return None
        for role in SINGLE_ROLES:
            spec = self.engines[role]
            if spec["pods"] != 1:
                self.problems.append(Problem(f"motor_deploy_config.{DEPLOY_KEYS[role][1]}",
                                             f"single_container runs every {role} instance in the one container",
                                             "set it to 1"))
        if self.conductor_on or self.events_role is not None:
            self.problems.append(Problem("kv_conductor_config",
                                         "single_container starts no KV conductor "
                                         "(upstream startup/roles/all_combine_in_single_container.sh)",
                                         "remove kv_conductor_config and kv_events_config, or deploy infer_service_set"))
        if self.problems:
            return None
        p, d = self.engines["prefill"], self.engines["decode"]
        if p["count"] > 1 and p["dpl"] * 2 > d["dp"] * 2:
            self.problems.append(Problem(
                "motor_engine_prefill_config.engine_config.data_parallel_size",
                f"prefill instance i binds base_port + i x {d['dp'] * 2} (the decode DP size x 2, {WHERE}) but needs "
                f"{p['dpl'] * 2} ports: the prefill instances' engine ports would overlap",
                "use a prefill data_parallel_size not above the decode one, or one prefill instance"))
            return None
        return p["count"], p["dp"], self._world_size("prefill"), d["count"], d["dp"], self._world_size("decode")

    def _world_size(self, role):
        """Upstream's world_size of a role (dp x tp x pp, motor/config/resolver.py:123-124): the NPUs its node manager
        takes from its device offset (node_manager.py:439-447), whatever the pod NPU count says."""
        eng = self.config["engines"][role]
        return self.engines[role]["dp"] * int(eng.get("tp") or 1) * int(eng.get("pp") or 1)

    def run_single(self):
        counts = self._single_counts()
        if counts is None:
            return
        p_num, p_dp, p_world, d_num, d_dp, d_world = counts
        need = p_num * p_world + d_num * d_world
        host, start = None, None
        for candidate in self.engine_hosts:
            start = candidate.find_block(need, 1)
            if start is not None:
                host = candidate
                break
        if host is None:
            self.problems.append(Problem("motor_deploy_config",
                                         f"single_container needs {need} contiguous free NPUs on one engine host "
                                         f"({p_num} x {p_world} prefill + {d_num} x {d_world} decode)",
                                         "lower the instance counts or add NPUs to one host"))
            return
        npus = [n for n in host.npu_ids if start <= n < start + need]
        name = f"{self.job_id}-single-container"  # upstream's app name (lib/generator/single_container.py:31)
        for npu in npus:
            host.free[npu] = False
        self.control = {"controller": host, "coordinator": host}
        if self.pool_on:
            self.control["kv_pool"] = host
        self.assign_ports()  # the control plane's ports: no pods yet, so only the control roles'
        if self.problems:
            return
        runs = self._single_runs(host, name, counts)
        if self.problems:
            return
        self.containers.append(self._single_container(host, name, npus, counts, runs))

    def _single_runs(self, host, name, counts):
        """{key: first port of the block} for every offset run (allocated as blocks on the host)."""
        p_num, p_dp, _p_world, d_num, d_dp, _d_world = counts
        prefs = {role: self._engine_port_prefs(role) for role in SINGLE_ROLES}
        p_spec, d_spec = self.engines["prefill"], self.engines["decode"]
        runs = {}
        # (key, preferred start of the block, length, offset of the block from the base upstream adds)
        blocks = [
            ("nm_prefill", prefs["prefill"]["node_manager"], p_num, 0),
            ("nm_decode", prefs["decode"]["node_manager"], d_num, p_num * p_dp),
            ("base_prefill", prefs["prefill"]["engine_base"], (p_num - 1) * d_dp * 2 + 2 * p_spec["dpl"], 0),
            ("base_decode", prefs["decode"]["engine_base"], (d_num - 1) * d_dp * 2 + 2 * d_spec["dpl"],
             p_num * p_dp * 2),
            ("dp_rpc", prefs["prefill"]["dp_rpc"], p_num + d_num, 0),
        ]
        if p_spec["kv"] is not None:
            blocks.append(("kv", prefs["prefill"]["kv"], p_num * counts[2] + d_num * counts[5], 0))
        for key, preferred, length, offset in blocks:
            port = self._alloc(host, max(preferred or 0, 1024) + offset, length, name, key.replace("_", " "))
            runs[key] = (port - offset, port, length)
        return runs

    def _single_user_config(self, runs):
        """The one user_config: the control ports (``_shared_user_config``) and the bases the offsets start from."""
        uc = self._shared_user_config()
        for role in SINGLE_ROLES:
            section = ensure(uc, self.engines[role]["section"])
            nm_cfg = ensure(section, "motor_nodemanger_config")
            ensure(nm_cfg, "api_config")["node_manager_port"] = runs["nm_" + role][0]
            ensure(nm_cfg, "endpoint_config")["base_port"] = runs["base_" + role][0]
        engine_config = ensure(uc, self.engines["prefill"]["section"], "engine_config")
        old_rpc = engine_config.get("data_parallel_rpc_port")
        engine_config["data_parallel_rpc_port"] = str(runs["dp_rpc"][0]) if isinstance(old_rpc, str) else runs["dp_rpc"][0]
        if "kv" in runs:
            target = engine_config
            for key in self.engines["prefill"]["kv"]["path"]:
                target = target[key]
            old = target.get("kv_port")
            target["kv_port"] = str(runs["kv"][0]) if isinstance(old, str) else runs["kv"][0]
        return uc

    def _single_endpoints(self, counts, runs):
        """The engine endpoints of every node manager of the container, with upstream's offsets."""
        p_num, p_dp, _p_world, d_num, d_dp, _d_world = counts
        out = []
        for role, num in (("prefill", p_num), ("decode", d_num)):
            spec = self.engines[role]
            for i in range(num):
                offset = i * d_dp * 2 if role == "prefill" else (p_num * p_dp + i * d_dp) * 2
                base = runs["base_" + role][0] + offset
                nm_port = runs["nm_" + role][0] + (i if role == "prefill" else p_num * p_dp + i)
                out.append({"job_name": f"{role[0]}{i}", "role": role, "node_manager_port": nm_port,
                            "endpoints": [{"dp_rank": r, "service_port": base + 2 * r, "mgmt_port": base + 2 * r + 1}
                                          for r in range(spec["dpl"])]})
        return out

    def _single_container(self, host, name, npus, counts, runs):
        ports = self.shared_ports
        plist = [ports["controller_api"], ports["controller_obs"], ports["coordinator_infer"], ports["coordinator_mgmt"],
                 ports["coordinator_obs"]]
        if ports.get("coordinator_metaserver"):
            plist += range(ports["coordinator_metaserver"], ports["coordinator_metaserver"] + ports["coordinator_num_workers"])
        extra = {}
        if "kv_pool" in self.control:
            plist += [ports["kv_pool"], ports["kv_pool_metrics"]]
            extra = {"KVP_MASTER_SERVICE": host.ip, "KV_POOL_PORT": str(ports["kv_pool"]),
                     "KV_POOL_EVICTION_HIGH_WATERMARK_RATIO": env_str(self.kv_pool.get("eviction_high_watermark_ratio", "")),
                     "KV_POOL_EVICTION_RATIO": env_str(self.kv_pool.get("eviction_ratio", "")),
                     "DEFAULT_KV_LEASE_TTL": env_str(self.kv_pool.get("default_kv_lease_ttl", KV_LEASE_TTL)),
                     "PYTHONHASHSEED": "0"}
        node_managers = self._single_endpoints(counts, runs)
        for nm in node_managers:
            plist.append(nm["node_manager_port"])
            for ep in nm["endpoints"]:
                plist += [ep["service_port"], ep["mgmt_port"]]
        plist += range(runs["dp_rpc"][1], runs["dp_rpc"][1] + runs["dp_rpc"][2])
        if "kv" in runs:
            plist += range(runs["kv"][1], runs["kv"][1] + runs["kv"][2])
        port_map = {"controller_api": ports["controller_api"], "controller_obs": ports["controller_obs"],
                    "infer": ports["coordinator_infer"], "mgmt": ports["coordinator_mgmt"], "obs": ports["coordinator_obs"],
                    "metaserver": ports.get("coordinator_metaserver") or 0}
        port_map.update({key: run[0] for key, run in sorted(runs.items())})
        env = self._env(SINGLE_ROLE, host, name, name, extra)
        env["ROLE"] = SINGLE_ENV_ROLE
        managers = [f"{d}:{d}:rwm" for d in MANAGER_DEVICES]
        uc = self._single_user_config(runs)
        self.single_node_managers = node_managers
        return {
            "name": name, "host": host.name, "ip": host.ip, "role": SINGLE_ROLE, "job_name": name,
            "instance": None, "pod": None, "tier": TIER_ENGINE, "npu_ids": list(npus),
            "devices": [f"/dev/davinci{n}:/dev/davinci{n}:rwm" for n in npus] + managers,
            "dp_ranks": [], "rank_pool": [], "endpoints": [], "node_managers": node_managers,
            "env": env, "ports": sorted(plist), "port_map": port_map,
            "user_config": self._coordinator_user_config(json.dumps(uc)),
            "shm_size": None if "kv_pool" in self.control else ENGINE_SHM_SIZE,
            "ipc_mode": "host" if "kv_pool" in self.control else None,
            "mounts_profile": "engine", "needs_weights": True,
            "configmap_path": self._config_dir(name),
            "config_path": CONFIG_PATH,
        }

    def single_instances(self):
        """The plan's instances of a single_container job: upstream's JOB_NAMEs p<i> / d<i>, all in the container."""
        cont = self.containers[0] if self.containers else None
        out = []
        for nm in getattr(self, "single_node_managers", []):
            role = nm["role"]
            spec = self.engines[role]
            out.append({"role": role, "instance": int(nm["job_name"][1:]), "job_name": nm["job_name"],
                        "dp": spec["dp"], "dp_local_per_pod": spec["dpl"], "npus_per_pod": spec["npus"],
                        "pods": [{"pod": 0, "host": cont["host"], "ip": cont["ip"], "container": cont["name"],
                                  "npu_ids": [], "dp_ranks": list(range(spec["dpl"])), "rank_pool": []}]})
        return out


def check_single_scheduler(ctx, uc):
    """The pairing upstream needs: deploy_mode single_container with the scheduler's pd_disaggregation_single_container
    (node_manager.py:145 applies the offsets only then; without them every node manager binds the same ports). A
    missing scheduler mode is filled in with a warning (upstream's newer single_container example leaves it out)."""
    single = is_single_container(uc)
    path = "motor_coordinator_config.scheduler_config.deploy_mode"
    coordinator = uc.get("motor_coordinator_config")
    scheduler = coordinator.get("scheduler_config") if isinstance(coordinator, dict) else None
    mode = scheduler.get("deploy_mode") if isinstance(scheduler, dict) else None
    if single and mode is None and (coordinator is None or isinstance(coordinator, dict)) \
            and (scheduler is None or isinstance(scheduler, dict)):
        coordinator = uc.setdefault("motor_coordinator_config", {})
        coordinator.setdefault("scheduler_config", {})["deploy_mode"] = SINGLE_SCHEDULER_MODE
        ctx.warn(path, f"missing; set to {SINGLE_SCHEDULER_MODE!r}, the one the node managers of one container move "
                       "their ports and devices apart with (upstream motor/config/node_manager.py:145)",
                 f'set it to "{SINGLE_SCHEDULER_MODE}" to silence this')
    elif single and mode != SINGLE_SCHEDULER_MODE:
        ctx.error(path, f"deploy_mode single_container needs {SINGLE_SCHEDULER_MODE!r}, got {mode!r}: only then do the "
                        "node managers of the one container move their ports and devices apart (upstream "
                        "motor/config/node_manager.py:145)", f'set it to "{SINGLE_SCHEDULER_MODE}"')
    elif not single and mode == SINGLE_SCHEDULER_MODE:
        ctx.error(path, f"{SINGLE_SCHEDULER_MODE} needs motor_deploy_config.deploy_mode single_container (every role in "
                        "one container, upstream startup/roles/all_combine_in_single_container.sh)",
                  'set motor_deploy_config.deploy_mode to "single_container", or use "pd_separate"')
