"""NodeManager stand-in (python3 -m motor.node_manager.main in PyMotor).

Registers this pod with the controller, heartbeats every heartbeat_interval_seconds, and on
POST /node-manager/start spawns one engine_server per local DP rank with ASCEND_RT_VISIBLE_DEVICES
(engine_type sglang: one engine_server for the pod, which picks its NPUs from base-gpu-id, unless
enable_multi_endpoints).
An engine that dies takes the node manager (and so the container) down with exit code 1.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import threading
import time
import uuid

from motor_sim import sglang
from motor_sim.common import (
    cfg_get,
    configure_tls,
    controller_port,
    engine_section,
    fail,
    http_json,
    install_fault_knobs,
    instance_pods,
    load_user_config,
    log,
    log_received,
    scheme,
    section,
    serve,
    wait_forever,
)

COMPONENT = "node_manager"


def npu_ids() -> list[int]:
    """Device numbers of the /dev/davinci<N> nodes given to this container."""
    ids = (re.fullmatch(r"/dev/davinci(\d+)", p) for p in glob.glob("/dev/davinci*"))
    return sorted(int(m.group(1)) for m in ids if m)


class NodeManager:
    def __init__(self, user_config: dict):
        self.role = os.environ["ROLE"]
        self.job_name = os.environ["JOB_NAME"]
        self.pod_ip = os.environ["POD_IP"]
        engine = engine_section(user_config, self.role)
        if not engine:
            fail(COMPONENT, f"user_config has no motor_engine_{self.role}_config section")
        self.engine_config = engine.get("engine_config") or {}
        nm = engine.get("motor_nodemanger_config") or section(user_config, "motor_nodemanger_config")
        self.port = int((nm.get("api_config") or {}).get("node_manager_port") or 1026)
        self.base_port = int((nm.get("endpoint_config") or {}).get("base_port") or 10000)
        self.heartbeat_interval = float((nm.get("basic_config") or {}).get("heartbeat_interval_seconds") or 3)
        self.controller = f"{scheme('mgmt')}://{os.environ['CONTROLLER_SERVICE']}:{controller_port(user_config)}"
        self.sglang = engine.get("engine_type") == "sglang"
        self.multi_endpoints = self.sglang and self.engine_config.get("enable_multi_endpoints") is True
        self.model_name = cfg_get(self.engine_config, "served_model_name", "")
        self.dp_local, self.devices_per_rank = self._parallel_plan(user_config)
        self.devices = self._assign_devices()
        self.engines: list[subprocess.Popen] = []
        self.started_instance: str | None = None
        # Identifies this process: a restarted pod keeps its pod_ip, the controller tells it apart by this.
        self.boot_id = uuid.uuid4().hex
        self.lock = threading.Lock()

    def _parallel_plan(self, user_config: dict) -> tuple[int, int]:
        pods = instance_pods(user_config, self.role)
        if self.sglang:
            # PyMotor's SGLangConfigResolver: tp-size/dp-size/pp-size; one server (endpoint) per pod unless
            # engine_config.enable_multi_endpoints, which starts one per local DP rank of tp x pp NPUs
            tp = int(cfg_get(self.engine_config, "tp_size", 1))
            pp = int(cfg_get(self.engine_config, "pp_size", 1))
            dp = int(cfg_get(self.engine_config, "dp_size", 1))
            if not self.multi_endpoints:
                return 1, sglang.engine_npus(self.engine_config)
            if dp % pods:
                fail(COMPONENT, f"dp-size {dp} is not divisible by {pods} pods per instance")
            return dp // pods, tp * pp
        dp = int(cfg_get(self.engine_config, "data_parallel_size", 1))
        per_rank = int(cfg_get(self.engine_config, "tensor_parallel_size", 1)) * int(
            cfg_get(self.engine_config, "pipeline_parallel_size", 1))
        if dp % pods:
            fail(COMPONENT, f"data_parallel_size {dp} is not divisible by {pods} pods per instance")
        return dp // pods, per_rank

    def _assign_devices(self) -> list[list[int]]:
        found = npu_ids()
        need = self.dp_local * self.devices_per_rank
        log(COMPONENT, "NPU devices in container", devices=[f"/dev/davinci{i}" for i in found], need=need)
        if len(found) < need:
            fail(COMPONENT, f"found {len(found)} /dev/davinci* devices, need {need} "
                            f"({self.dp_local} local DP ranks x {self.devices_per_rank} NPUs)")
        k = self.devices_per_rank
        return [found[i * k:(i + 1) * k] for i in range(self.dp_local)]

    def endpoint_ports(self, local_rank: int) -> tuple[int, int]:
        return self.base_port + 2 * local_rank, self.base_port + 2 * local_rank + 1

    def register_message(self) -> dict:
        return {
            "job_name": self.job_name, "model_name": self.model_name, "role": self.role, "pod_ip": self.pod_ip,
            "boot_id": self.boot_id,
            "host_ip": os.environ.get("HOST_IP", self.pod_ip), "nm_port": self.port,
            "device_num": sum(len(d) for d in self.devices),
            "parallel_config": {"dp_local": self.dp_local, "devices_per_rank": self.devices_per_rank},
            "endpoints": [{"local_rank": i, "ip": self.pod_ip, "business_port": self.endpoint_ports(i)[0],
                           "mgmt_port": self.endpoint_ports(i)[1], "devices": self.devices[i]}
                          for i in range(self.dp_local)],
        }

    def register(self) -> None:
        while True:
            status, body = http_json("POST", f"{self.controller}/controller/register", self.register_message())
            if status == 200:
                log(COMPONENT, "registered with controller", controller=self.controller, response=body)
                return
            log(COMPONENT, "controller registration failed, retrying", controller=self.controller,
                status=status, response=body)
            time.sleep(2)

    def heartbeat_loop(self) -> None:
        while True:
            time.sleep(self.heartbeat_interval)
            body = {"job_name": self.job_name, "pod_ip": self.pod_ip, "boot_id": self.boot_id,
                    "status": self.engines_normal()}
            status, _ = http_json("POST", f"{self.controller}/controller/heartbeat", body)
            if status == 404:  # the controller forgot us (restart): register again
                log(COMPONENT, "controller does not know this pod; registering again")
                self.register()

    def engines_normal(self) -> bool:
        if not self.engines:
            return False
        for i in range(self.dp_local):
            status, body = http_json("GET", f"{scheme('mgmt')}://{self.pod_ip}:{self.endpoint_ports(i)[1]}/status",
                                     timeout=1)
            if status != 200 or body.get("status") != "normal":
                return False
        return True

    def start_engines(self, cmd: dict, _handler) -> tuple:
        with self.lock:
            if self.started_instance is not None:
                return 200, {"status": "already started", "instance_id": self.started_instance}
            self.started_instance = str(cmd["instance_id"])
            for i, rank in enumerate(cmd["dp_ranks"]):
                self.engines.append(self._spawn(cmd, i, rank))
        threading.Thread(target=self.watch_engines, daemon=True).start()
        return 200, {"status": "started", "instance_id": self.started_instance}

    def _spawn(self, cmd: dict, local_rank: int, dp_rank: int) -> subprocess.Popen:
        port, mgmt = self.endpoint_ports(local_rank)
        argv = ["engine_server", "--dp-rank", str(dp_rank), "--instance-id", str(cmd["instance_id"]),
                "--role", self.role, "--host", self.pod_ip, "--port", str(port), "--mgmt-port", str(mgmt),
                "--master-dp-ip", cmd["master_dp_ip"], "--node-rank", str(cmd["node_rank"]),
                "--config-path", os.environ["USER_CONFIG_PATH"]]
        env = dict(os.environ)
        if not self.sglang or self.multi_endpoints:  # PyMotor sets it per endpoint only with multi endpoints
            env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(map(str, self.devices[local_rank]))
        log(COMPONENT, "spawning engine", argv=argv, ASCEND_RT_VISIBLE_DEVICES=env.get("ASCEND_RT_VISIBLE_DEVICES"))
        return subprocess.Popen(argv, env=env)

    def watch_engines(self) -> None:
        while True:
            for proc in self.engines:
                code = proc.poll()
                if code is not None:
                    log(COMPONENT, f"ERROR: engine {proc.args[2:4]} exited with {code}; node manager exits")
                    os._exit(1)
            time.sleep(0.5)

    def routes(self) -> dict:
        return {("POST", "/node-manager/start"): self.start_engines,
                ("GET", "/node-manager/status"): lambda *_: (200, {"status": self.engines_normal()})}


def main() -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    for var in ("ROLE", "JOB_NAME", "POD_IP", "CONTROLLER_SERVICE", "USER_CONFIG_PATH"):
        if not os.environ.get(var):
            fail(COMPONENT, f"environment variable {var} is not set")
    user_config = load_user_config()
    configure_tls(COMPONENT, user_config)
    nm = NodeManager(user_config)
    serve(COMPONENT, nm.port, nm.routes(), tls="mgmt")
    nm.register()
    threading.Thread(target=nm.heartbeat_loop, daemon=True).start()
    wait_forever()


if __name__ == "__main__":
    main()
