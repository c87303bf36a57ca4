# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The plan entries: user_config copy with the planned ports, environment, devices and paths."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONFIG_PATH,
    KV_DRIVER_ROLES,
    KV_LEASE_TTL,
    Problem,
    TIER_CONTROL,
    TIER_ENGINE,
    TIER_KV_POOL,
    WATCHER_CONFIG,
    WATCHER_ROLE,
    WATCHER_SCRIPT,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import coordinator_api_keys
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hccl import HCCL_ENV
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import (
    dig,
    ensure,
    env_str,
    from_template,
    json_copy,
    json_template,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import natural_key


ENV_SECTION = {
    "common": "motor_common_env",
    "controller": "motor_controller_env",
    "coordinator": "motor_coordinator_env",
    "prefill": "motor_engine_prefill_env",
    "decode": "motor_engine_decode_env",
    "union": "motor_engine_union_env",
    "kv_pool": "motor_kv_cache_pool_env",
    "kv_conductor": "motor_kv_conductor_env",
    "mf_store": "motor_mf_store_env",
    "kv_watcher": "motor_common_env",
    # every role in one container (plan/single.py): each role's env comes through its shell function
    "single_container": "motor_common_env",  # the collection's own container: the common env (proxies, log paths) only
}


ENGINE_SHM_SIZE = "4g"


CONTROL_SHM_SIZE = "1g"


MANAGER_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
RDMA_DEVICE = "/dev/infiniband"


# environment variables the plan sets itself (env.json cannot override them: they are left out of the shell functions)
WIRING_ENV = (
    "ROLE", "JOB_NAME", "POD_IP", "HOST_IP", "CONTROLLER_SERVICE", "COORDINATOR_SERVICE",
    "KV_CONDUCTOR_SERVICE", "KVP_MASTER_SERVICE", "KV_POOL_PORT", "KV_POOL_EVICTION_HIGH_WATERMARK_RATIO",
    "KV_POOL_EVICTION_RATIO", "DEFAULT_KV_LEASE_TTL", "CONFIGMAP_PATH", "CONFIG_PATH",
    "ASCEND_RUNTIME_OPTIONS", "ASCEND_MF_STORE_URL", "ASCEND_MF_STORE_PORT", "ASCEND_MF_TRANSFER_PROTOCOL",
    "SGLANG_HOST_IP", "DISAGGREGATION_BOOTSTRAP_PORT", HCCL_ENV,
)


# the set_*_env functions PyMotor's generator writes (lib/utils.py set_env_to_shell) -> the role whose env they export
# (common + the role's env.json section; union falls back to the prefill section, as in PyMotor)
SHELL_FUNCTIONS = {
    "set_common_env": "common", "set_controller_env": "controller", "set_coordinator_env": "coordinator",
    "set_prefill_env": "prefill", "set_decode_env": "decode", "set_union_env": "union", "set_encode_env": "encode",
    "set_kv_pool_env": "kv_pool", "set_kv_conductor_env": "kv_conductor", "set_mf_store_env": "mf_store",
}


# where the image keeps PyMotor's deployer tree (startup/, lib/, patch/): the real mooncake_config.py imports lib.utils
IMAGE_DEPLOYER_DIR = "/tmp/motor/examples/deployer"


class ContainerBuilder:
    """The plan entries: per container its user_config copy with the planned ports, env, devices and paths."""

    def _config_dir(self, name):
        """CONFIGMAP_PATH of a container: <config root>/<job_id>/<container>."""
        return f"{self.config_root}/{self.job_id}/{name}"

    def _control_name(self, role):
        return f"{self.job_id}-{role.replace('_', '-')}"

    def _shared_user_config(self):
        uc = json_copy(self.user_config)
        ports = self.shared_ports
        capi = ensure(uc, "motor_controller_config", "api_config")
        capi["controller_api_port"] = ports["controller_api"]
        capi["observability_api_port"] = ports["controller_obs"]
        coord = ensure(uc, "motor_coordinator_config")
        api = ensure(coord, "api_config")
        api["coordinator_api_infer_port"] = ports["coordinator_infer"]
        api["coordinator_api_mgmt_port"] = ports["coordinator_mgmt"]
        api["coordinator_obs_port"] = ports["coordinator_obs"]
        ensure(coord, "inference_workers_config")["worker_metaserver_base_port"] = ports["coordinator_metaserver"]
        if "kv_pool" in ports:
            ensure(uc, "kv_cache_pool_config")["port"] = ports["kv_pool"]
        if "kv_conductor" in ports:
            ensure(uc, "kv_conductor_config")["http_server_port"] = ports["kv_conductor"]
        self.add_etcd_config(uc)
        if self.events_role is not None:
            endpoint = f"{ports['kv_events_prefix']}:{ports['kv_events']}"
            replay = None
            if "kv_events_replay" in ports:
                replay = f"{ports['kv_events_replay_prefix']}:{ports['kv_events_replay']}"
            kec = ensure(uc, self.engines[self.events_role]["section"], "engine_config", "kv_events_config")
            kec["endpoint"] = endpoint
            if replay is not None:
                kec["replay_endpoint"] = replay
            pkec = coord.get("prefill_kv_event_config")
            if isinstance(pkec, dict) or self.affinity:
                pkec = ensure(coord, "prefill_kv_event_config")
                pkec["endpoint"] = endpoint
                if replay is not None:
                    pkec["replay_endpoint"] = replay
                if "kv_conductor" in ports:
                    pkec["http_server_port"] = ports["kv_conductor"]
        return uc

    def _coordinator_user_config(self, shared):
        """The coordinator's user_config: api_key_config.valid_keys in upstream's PBKDF2 form (plain keys on no host)."""
        uc = json.loads(shared)
        keys = dig(self.user_config, "motor_coordinator_config", "api_key_config", "valid_keys")
        if isinstance(keys, list) and keys:
            uc["motor_coordinator_config"]["api_key_config"]["valid_keys"] = coordinator_api_keys(keys, self.job_id)
        return uc

    @staticmethod
    def _without_api_keys(uc):
        """A user_config for any container but the coordinator: without api_key_config, which only the coordinator
        reads (inference_server.py:138, 224-226; the node managers read scheduler_config.deploy_mode only,
        node_manager.py:143), so no API key (not even hashed: upstream accepts the stored form itself as a key,
        inference_server.py:224) is on a host that does not need it."""
        coord = uc.get("motor_coordinator_config")
        if isinstance(coord, dict):
            coord.pop("api_key_config", None)
        return uc

    def shell_env(self):
        """{set_*_env: env} of the job: the bodies of the functions injected into the startup scripts (the same in
        every config directory, like PyMotor's one ConfigMap); the variables the plan wires are left out."""
        env_all = self.config.get("env") or {}
        common = env_all.get("common") or {}
        encode = dict(common)
        encode.update((self.config.get("env_config") or {}).get("motor_engine_encode_env") or {})
        out = {}
        for function, role in SHELL_FUNCTIONS.items():
            if role == "mf_store" and "mf_store" not in self.control:
                continue  # only SGLang jobs start the memfabric store (and only then is mf_store.sh needed)
            body = encode if role == "encode" else (env_all.get(role) or common)
            out[function] = {k: env_str(v) for k, v in sorted(body.items()) if k not in WIRING_ENV}
        # the real kv_conductor.sh runs $CONFIGMAP_PATH/mooncake_config.py, which imports lib.utils from two
        # directories up (not in a config directory, nor in PyMotor's own ConfigMap): the image's deployer tree has it
        conductor = out["set_kv_conductor_env"]
        own = conductor.get("PYTHONPATH")
        conductor["PYTHONPATH"] = IMAGE_DEPLOYER_DIR + (":" + own if own else "${PYTHONPATH:+:$PYTHONPATH}")
        return out

    def _env(self, role, host, name, job_name, extra):
        """The container (Docker) environment: what PyMotor's pod templates set; env.json reaches the container
        through the shell functions only (which run later, so an env.json NIC or PYTHONHASHSEED value wins)."""
        env_all = self.config.get("env") or {}
        env = {k: env_str(v) for k, v in (env_all.get(role) or env_all.get("common") or {}).items()}
        ctrl_ip = self.service_address("controller")  # the VIP with master/standby
        coord_ip = self.service_address("coordinator")
        wiring = {
            "ROLE": role,
            "JOB_NAME": job_name,
            "POD_IP": host.ip,
            "HOST_IP": host.ip,
            "CONTROLLER_SERVICE": ctrl_ip,
            "COORDINATOR_SERVICE": coord_ip,
            "CONFIGMAP_PATH": self._config_dir(name),
            "CONFIG_PATH": CONFIG_PATH,
            "ASCEND_RUNTIME_OPTIONS": "NODRV",
            "HCCL_IF_IP": host.ip,
            "GLOO_SOCKET_IFNAME": host.nic,
            "TP_SOCKET_IFNAME": host.nic,
            "HCCL_SOCKET_IFNAME": host.nic,
        }
        wiring.update(extra)
        overridable = ("HCCL_IF_IP", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "PYTHONHASHSEED")
        defaults = {key: wiring.pop(key) for key in overridable if key in wiring}
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
        defaults.update(wiring)
        return {k: defaults[k] for k in sorted(defaults)}

    def build_containers(self):
        # serialised once, copied once per container (fields.from_template): every container owns its dicts
        with_keys = self._shared_user_config()
        coordinator_config = self._coordinator_user_config(json.dumps(with_keys))
        shared = json_template(self._without_api_keys(with_keys))
        ports = self.shared_ports
        pool_ip = self.control["kv_pool"].ip if "kv_pool" in self.control else None
        conductor_ip = self.control["kv_conductor"].ip if "kv_conductor" in self.control else None
        managers = [f"{d}:{d}:rwm" for d in MANAGER_DEVICES]
        if self.pool_on and str(dig(self.user_config, "kv_cache_pool_config", "protocol") or "").lower() == "rdma":
            managers.append(f"{RDMA_DEVICE}:{RDMA_DEVICE}:rwm")  # upstream's engine template mounts it (RoCE)
        ipc_host = "host" if self.pool_on else None

        def control(role, tier, port_map, extra, ipc_mode=None, needs_weights=False, host=None, name=None):
            host = host or self.control[role]
            name = name or self._control_name(role)
            # both replicas share JOB_NAME: upstream prefixes every etcd key, the master lock too, with it
            # (etcd_client.py:31-32,85-90), so different names would elect two masters
            job_name = self._control_name(role)
            plist = []
            for key, value in port_map.items():
                if key == "metaserver" and value:
                    plist.extend(range(value, value + ports["coordinator_num_workers"]))
                elif value:
                    plist.append(value)
            self.containers.append({
                "name": name, "host": host.name, "ip": host.ip, "role": role, "job_name": job_name,
                "instance": None, "pod": None, "tier": tier, "npu_ids": [], "devices": [],
                "dp_ranks": [], "rank_pool": [], "endpoints": [],
                "env": self._env(role, host, name, job_name, extra),
                "ports": sorted(plist), "port_map": port_map,
                "user_config": coordinator_config if role == "coordinator" else from_template(shared),
                "shm_size": None if ipc_mode == "host" else CONTROL_SHM_SIZE,
                "ipc_mode": ipc_mode, "mounts_profile": "kv" if role in KV_DRIVER_ROLES else "control",
                "needs_weights": needs_weights,
                "configmap_path": self._config_dir(name),
            })

        controller_ports = {"api": ports["controller_api"], "obs": ports["controller_obs"]}
        control("controller", TIER_CONTROL, controller_ports, {})
        if self.twin("controller") is not None:  # master/standby: the second replica, same ports on its own host
            control("controller", TIER_CONTROL, dict(controller_ports), {}, host=self.twin("controller"),
                    name=self.replica_name("controller"))
        coord_extra = {}
        if self.affinity and conductor_ip is not None:
            coord_extra["KV_CONDUCTOR_SERVICE"] = conductor_ip
        elif conductor_ip is not None:
            self.warnings.append(str(Problem("kv_conductor_config.http_server_port",
                                             "the KV conductor is deployed but scheduler_type is not kv_cache_affinity",
                                             "set scheduler_type to kv_cache_affinity or remove http_server_port")))
        coordinator_ports = {"infer": ports["coordinator_infer"], "mgmt": ports["coordinator_mgmt"],
                             "obs": ports["coordinator_obs"], "metaserver": ports["coordinator_metaserver"]}
        control("coordinator", TIER_CONTROL, coordinator_ports, coord_extra, needs_weights=bool(coord_extra))
        if self.twin("coordinator") is not None:
            control("coordinator", TIER_CONTROL, dict(coordinator_ports), dict(coord_extra),
                    needs_weights=bool(coord_extra), host=self.twin("coordinator"), name=self.replica_name("coordinator"))
        if conductor_ip is not None:
            control("kv_conductor", TIER_CONTROL, {"http": ports["kv_conductor"]},
                    {"KVP_MASTER_SERVICE": pool_ip} if pool_ip else {})
            if self.plans_watcher():  # the coordinator registers KV-event ranks
                control(WATCHER_ROLE, TIER_CONTROL, {"metrics": ports["kv_watcher_metrics"]}, {},
                        host=self.control["kv_conductor"])
                self._watcher(self.containers[-1])
        if pool_ip is not None:
            control("kv_pool", TIER_KV_POOL, {"master": ports["kv_pool"], "metrics": ports["kv_pool_metrics"]}, {
                "KVP_MASTER_SERVICE": pool_ip,
                "KV_POOL_PORT": str(ports["kv_pool"]),
                "KV_POOL_EVICTION_HIGH_WATERMARK_RATIO": env_str(self.kv_pool.get("eviction_high_watermark_ratio", "")),
                "KV_POOL_EVICTION_RATIO": env_str(self.kv_pool.get("eviction_ratio", "")),
                "DEFAULT_KV_LEASE_TTL": env_str(self.kv_pool.get("default_kv_lease_ttl", KV_LEASE_TTL)),
            }, ipc_mode=ipc_host)
        engine_extra = {"KVP_MASTER_SERVICE": pool_ip, "PYTHONHASHSEED": "0"} if pool_ip else {}
        for pod in self.pods:
            self.containers.append(self._engine_container(pod, shared, managers, engine_extra, ipc_host))
        shell_env = self.shell_env()
        for cont in self.containers:
            cont["shell_env"] = shell_env
            # PyMotor's deployer makes boot.sh patch vLLM's MultiConnector when the KV pool and the conductor are on
            cont["kv_patch"] = bool(pool_ip and conductor_ip) and cont["tier"] == TIER_ENGINE
        self.containers.sort(key=lambda c: (c["tier"], natural_key(c["name"])))

    @staticmethod
    def _watcher(entry):
        """The KV registration watcher: python3 from the job's image runs the collection's script from its config
        directory (the deploy writes the script and its config there: ``reconcile/specs.py`` ``own_files``)."""
        path = entry["configmap_path"]
        entry["command"] = ["python3", "-u", f"{path}/{WATCHER_SCRIPT}", f"{path}/{WATCHER_CONFIG}"]

    def _listed(self, run):
        """The ints of ``run`` (a ``range``) as a list made once per plan: the pods of an instance share their rank
        pool and its event and replay ports (hundreds at fleet size) and most other port runs, so their lists copy
        references instead of making new ints. The rank pool's list is the plan's own: the containers and the
        instance entries of one instance list the same (read-only) list, 256 ranks at 1024 A3 hosts."""
        listed = self._runs.get(run)
        if listed is None:
            listed = self._runs[run] = list(run)
        return listed

    def _engine_container(self, pod, shared, managers, extra, ipc_mode):
        role = pod["role"]
        spec = self.engines[role]
        host = pod["host"]
        name = pod["name"]
        uc = from_template(shared)
        section = ensure(uc, spec["section"])
        nm_cfg = ensure(section, "motor_nodemanger_config")
        ensure(nm_cfg, "api_config")["node_manager_port"] = pod["node_manager"]
        ensure(nm_cfg, "endpoint_config")["base_port"] = pod["engine_base"]
        engine_config = ensure(section, "engine_config")
        old_rpc = engine_config.get("data_parallel_rpc_port")
        engine_config["data_parallel_rpc_port"] = str(pod["dp_rpc"]) if isinstance(old_rpc, str) else pod["dp_rpc"]
        plist = [pod["node_manager"], pod["dp_rpc"]]
        plist.extend(self._listed(range(pod["engine_base"], pod["engine_base"] + 2 * spec["dpl"])))
        port_map = {"node_manager": pod["node_manager"], "engine_base": pod["engine_base"], "dp_rpc": pod["dp_rpc"]}
        if pod["kv_port"] is not None:
            target = engine_config
            for key in spec["kv"]["path"]:
                target = target[key]
            old = target.get("kv_port")
            target["kv_port"] = pod["kv_port"] if isinstance(old, int) and not isinstance(old, bool) else str(pod["kv_port"])
            plist.extend(self._listed(range(pod["kv_port"], pod["kv_port"] + spec["npus"])))
            port_map["kv"] = pod["kv_port"]
        if pod["kv_events"] is not None:
            kec = ensure(engine_config, "kv_events_config")
            prefix = spec["events"]["endpoint"][0]
            kec["endpoint"] = f"{prefix}:{pod['kv_events']}"
            pool = pod["rank_pool"]  # a range: base + any rank of the instance
            plist.extend(self._listed(range(pod["kv_events"] + pool.start, pod["kv_events"] + pool.stop)))
            port_map["kv_events"] = pod["kv_events"]
            if pod["kv_events_replay"] is not None:
                kec["replay_endpoint"] = f"{spec['events']['replay'][0]}:{pod['kv_events_replay']}"
                plist.extend(self._listed(range(pod["kv_events_replay"] + pool.start, pod["kv_events_replay"] + pool.stop)))
                port_map["kv_events_replay"] = pod["kv_events_replay"]
        hccl_ports, hccl_map, hccl_env = self.hccl_of(pod)
        plist.extend(self._listed(hccl_ports))
        port_map.update(hccl_map)
        endpoints = [
            {"dp_rank": rank, "local_index": i, "service_port": pod["engine_base"] + 2 * i,
             "mgmt_port": pod["engine_base"] + 2 * i + 1}
            for i, rank in enumerate(pod["dp_ranks"])
        ]
        return {
            "name": name, "host": host.name, "ip": host.ip, "role": role, "job_name": pod["job_name"],
            "instance": pod["instance"], "pod": pod["pod"], "tier": TIER_ENGINE, "npu_ids": list(pod["npu_ids"]),
            "devices": [f"/dev/davinci{n}:/dev/davinci{n}:rwm" for n in pod["npu_ids"]] + list(managers),
            "dp_ranks": list(pod["dp_ranks"]), "rank_pool": self._listed(pod["rank_pool"]), "endpoints": endpoints,
            "env": self._env(role, host, name, pod["job_name"], dict(extra, **hccl_env)),
            "ports": sorted(plist), "port_map": port_map, "user_config": uc,
            "shm_size": None if ipc_mode == "host" else ENGINE_SHM_SIZE,
            "ipc_mode": ipc_mode, "mounts_profile": "engine", "needs_weights": True,
            "configmap_path": self._config_dir(name),
        }
