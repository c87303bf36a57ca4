# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The SGLang part of a plan (``engine_type: "sglang"``), as PyMotor's deployer wires it.

- ``mf_store`` (memfabric config store, ``ROLE=mf_store``) on the first control host, port MF_STORE_PORT;
  the engines get ASCEND_MF_STORE_URL, ASCEND_MF_TRANSFER_PROTOCOL (device_rdma on 800I_A2, else sdma) and
  SGLANG_HOST_IP; the coordinator gets DISAGGREGATION_BOOTSTRAP_PORT.
- each pod's ``base_gpu_id`` is 0: a pod's container gets only its own NPUs, and the CANN runtime numbers a
  container's devices from 0 (logical ids, as upstream's ``_calc_visible_device_ids`` for vLLM);
- the prefill engines bind ``disaggregation_bootstrap_port``: one value for every prefill pod (the coordinator
  knows one), so at most one prefill pod per host;
- SGLang takes no vLLM data_parallel_rpc_port and serves one endpoint per pod unless enable_multi_endpoints.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    MF_STORE_PORT,
    MF_TRANSFER_PROTOCOL,
    MF_TRANSFER_PROTOCOL_DEFAULT,
    Problem,
    SGLANG_BOOTSTRAP_PORT,
    TIER_CONTROL,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.containers import CONTROL_SHM_SIZE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int, dig, ensure, truthy, user_set
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import natural_key


class SGLangPlan:
    """Mixin of the Planner: the SGLang additions to engine specs, control placement, ports and containers."""

    def _sglang_spec(self, spec, eng):
        """Mark an SGLang engine spec; one server (one endpoint) per pod unless enable_multi_endpoints."""
        spec["sglang"] = eng.get("engine_type") == "sglang"
        if spec["sglang"]:
            section = self.user_config.get(spec["section"]) or {}
            multi = section.get("enable_multi_endpoints", dig(section, "engine_config", "enable_multi_endpoints"))
            if not truthy(multi):
                spec["dpl"] = 1

    def place_control(self):
        super().place_control()
        if self.config.get("sglang") is not None and self.control:
            self.control["mf_store"] = self.control["controller"]

    def _control_port_specs(self):
        specs = super()._control_port_specs()
        if "mf_store" in self.control:
            specs.append(("mf_store", self.control["mf_store"], self._control_name("mf_store"), MF_STORE_PORT, 1,
                          "store", True, None))
        return specs

    def assign_ports(self):
        super().assign_ports()
        pods = [p for p in self.pods if p["role"] in ("prefill", "union") and self.engines[p["role"]]["sglang"]]
        if not pods:
            return
        by_host = {}
        for pod in pods:
            by_host.setdefault(pod["host"].name, []).append(pod["name"])
        crowded = {host: names for host, names in by_host.items() if len(names) > 1}
        if crowded:
            host, names = sorted(crowded.items())[0]
            self.problems.append(Problem(
                "motor_deploy_config.%s" % ("p_instances_num" if pods[0]["role"] == "prefill" else
                                            "hybrid_instances_num"),
                "engine_type sglang: %s on host %s would bind the one disaggregation_bootstrap_port the coordinator "
                "knows" % (" and ".join(names), host),
                "at most one SGLang prefill pod per host: add engine hosts or lower the instance count"))
            return
        section = self.engines[pods[0]["role"]]["section"]
        preferred = as_int((self.config.get("sglang") or {}).get("bootstrap_port")) or SGLANG_BOOTSTRAP_PORT
        owners = {p["host"].name: p["name"] for p in pods}
        self.shared_ports["sglang_bootstrap"] = self._alloc_common(
            [p["host"] for p in pods], preferred, 1, owners, "disaggregation_bootstrap_port",
            user_set(dig(self.user_config, section, "engine_config"), "disaggregation_bootstrap_port",
                     f"{section}.engine_config.disaggregation_bootstrap_port"))

    def build_containers(self):
        super().build_containers()
        if "mf_store" not in self.control:
            return
        ports = self.shared_ports
        store = self.control["mf_store"]
        url = f"tcp://{store.ip}:{ports['mf_store']}"
        protocol = MF_TRANSFER_PROTOCOL.get(self.hw, MF_TRANSFER_PROTOCOL_DEFAULT)
        bootstrap = ports.get("sglang_bootstrap")
        for cont in self.containers:
            extra = {}
            if cont["role"] in self.engines and self.engines[cont["role"]]["sglang"]:
                extra = {"ASCEND_MF_STORE_URL": url, "ASCEND_MF_TRANSFER_PROTOCOL": protocol,
                         "SGLANG_HOST_IP": cont["ip"]}
                self._pin_sglang(cont, bootstrap)
            elif cont["role"] == "coordinator" and bootstrap is not None:
                extra = {"DISAGGREGATION_BOOTSTRAP_PORT": str(bootstrap)}
            if extra:
                cont["env"] = dict(sorted({**cont["env"], **extra}.items()))
        name = self._control_name("mf_store")
        env = self._env("mf_store", store, name, name, {"ASCEND_MF_STORE_PORT": str(ports["mf_store"])})
        self.containers.append({
            "name": name, "host": store.name, "ip": store.ip, "role": "mf_store", "job_name": name,
            "instance": None, "pod": None, "tier": TIER_CONTROL, "npu_ids": [], "devices": [],
            "dp_ranks": [], "endpoints": [], "env": env, "ports": [ports["mf_store"]],
            "port_map": {"store": ports["mf_store"]}, "user_config": self._shared_user_config(),
            "shm_size": CONTROL_SHM_SIZE, "ipc_mode": None, "mounts_profile": "control", "needs_weights": False,
            "configmap_path": self._config_dir(name), "shell_env": self.shell_env(), "kv_patch": False,
        })
        self.containers.sort(key=lambda c: (c["tier"], natural_key(c["name"])))

    def _pin_sglang(self, cont, bootstrap):
        """SGLang's engine_config of a pod: base_gpu_id 0 (the first of its container's NPUs, logical ids), no vLLM dp
        rpc port, the bootstrap port."""
        spec = self.engines[cont["role"]]
        engine_config = ensure(cont["user_config"], spec["section"], "engine_config")
        engine_config["base_gpu_id"] = 0
        engine_config.pop("data_parallel_rpc_port", None)
        if bootstrap is not None:
            for role in self.engines:  # the prefill's own key, and the decode's where the user set it
                other = ensure(cont["user_config"], self.engines[role]["section"], "engine_config")
                if role in ("prefill", "union") or "disaggregation_bootstrap_port" in other:
                    other["disaggregation_bootstrap_port"] = bootstrap
            if cont["role"] in ("prefill", "union"):
                cont["ports"] = sorted(set(cont["ports"]) | {bootstrap})
                cont["port_map"]["bootstrap"] = bootstrap
