"""NodeManager stand-in (python3 -m motor.node_manager.main in PyMotor).

Registers this pod with the controller, heartbeats every heartbeat_interval_seconds, and on
POST /node-manager/start spawns one engine_server per local DP rank with ASCEND_RT_VISIBLE_DEVICES (logical ids
0..n-1 of the devices the container has, as upstream's _calc_visible_device_ids). Upstream's limits
(motor/node_manager/core/engine_manager.py _register, heartbeat_manager.py, main.py):
- registration: 5 attempts, 2 s wait doubled after each failure (2, 4, 8, 16 s), then the node manager gives up
  (SIGTERM to itself: every module stops);
- engine /status polled every second; failures are ignored for 120 s after start (grace period), then the
  endpoint is abnormal; 5 consecutive abnormal heartbeats (reported successfully) -> suicide: engines killed;
- the main thread then leaves its stdin loop (``input()``; at EOF a 1 s sleep per turn) and exits 255 (main()
  returns -1). With stdin open and silent (docker run -i) input() never returns: the process stays, stopped.
- upstream registers once its API's startup event is set, which uvicorn sets before it binds the port: under load
  the controller can assemble the instance before the port answers, drops this node manager (its status request
  is refused) and the pod never registers again (a reregister needs the endpoints of a start command). The
  stand-in binds first; MOTOR_SIM_NM_BIND_DELAY=<s> registers first and binds s seconds later, in the container's
  first life only (a restart binds at once).
engine_type sglang: one engine_server for the pod, which picks its NPUs from base-gpu-id, unless
enable_multi_endpoints.
An engine that dies takes the node manager (and so the container) down with exit code 1.
"""

from __future__ import annotations

import glob
import os
import re
import signal
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
    once_knob,
    scheme,
    section,
    serve,
)

COMPONENT = "node_manager"
BIND_DELAY_MARKER = "/tmp/motor-sim-bind-delayed"
REGISTER_ATTEMPTS = 5  # engine_manager.py _register: max_retries
REGISTER_FIRST_WAIT = 2  # retry_interval, doubled after each failed attempt
STATUS_GRACE_SECONDS = 120  # heartbeat_manager.py: /status failures ignored this long after start
ABNORMAL_HEARTBEATS = 5  # heartbeat_manager.py: consecutive abnormal heartbeats before the suicide flag
GIVE_UP_EXIT = 255  # main.py: main() returns -1


def npu_ids() -> list[int]:
    """Device numbers of the /dev/davinci<N> nodes given to this container."""
    ids = (re.fullmatch(r"/dev/davinci(\d+)", p) for p in glob.glob("/dev/davinci*"))
    return sorted(int(m.group(1)) for m in ids if m)


def _world_size(engine_config: dict) -> int:
    """Upstream's ConfigResolver world_size (resolver.py:123-124): dp x tp x pp of a vLLM engine_config."""
    size = 1
    for key in ("data_parallel_size", "tensor_parallel_size", "pipeline_parallel_size"):
        size *= int(cfg_get(engine_config, key, 1))
    return size


def single_container_offsets(user_config: dict, role: str) -> dict | None:
    """Upstream's SingleContainerNodemanagerConfig.from_json (motor/config/node_manager.py:141-211): None unless the
    scheduler's deploy_mode is pd_disaggregation_single_container and ROLE and INDEX are set; else this node manager's
    port, base port and device offsets, device count, kv_port, lookup and dp_rpc ports."""
    mode = section(user_config, "motor_coordinator_config", "scheduler_config").get("deploy_mode", "")
    index = os.environ.get("INDEX")
    if mode != "pd_disaggregation_single_container" or not role or index is None:
        return None
    deploy = user_config["motor_deploy_config"]
    p_num = deploy["p_instances_num"]
    prefill = user_config["motor_engine_prefill_config"]["engine_config"]
    decode = user_config["motor_engine_decode_config"]["engine_config"]
    p_dp, d_dp = int(cfg_get(prefill, "data_parallel_size", 1)), int(cfg_get(decode, "data_parallel_size", 1))
    p_world, d_world = _world_size(prefill), _world_size(decode)
    i = int(index)
    if role == "prefill":
        out = {"node_manager_port_offset": i, "base_port_offset": i * d_dp * 2, "device_offset": i * p_world,
               "device_num": p_world}
        lookup_offset = dp_offset = i
    elif role == "decode":
        out = {"node_manager_port_offset": p_num * p_dp + i, "base_port_offset": (p_num * p_dp + i * d_dp) * 2,
               "device_offset": p_num * p_world + i * d_world, "device_num": d_world}
        lookup_offset = dp_offset = p_num + i
    else:
        fail(COMPONENT, f"single container: role {role} is not prefill or decode")
    out["kv_port"] = out["lookup_rpc_port"] = None
    kv = prefill.get("kv_transfer_config") or {}
    if kv:  # upstream reads the first two connectors of a MultiConnector, else the one kv_port
        if kv.get("kv_connector") == "MultiConnector":
            connectors = kv["kv_connector_extra_config"]["connectors"]
            out["kv_port"] = int(connectors[0]["kv_port"]) + out["device_offset"]
            out["lookup_rpc_port"] = int(connectors[1]["lookup_rpc_port"]) + lookup_offset
        else:
            out["kv_port"] = int(kv["kv_port"]) + out["device_offset"]
    out["dp_rpc_port"] = int(cfg_get(prefill, "data_parallel_rpc_port", 9000)) + dp_offset
    return out


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
        # deploy_mode single_container: this node manager's offsets among the others of the container (upstream
        # SingleContainerNodemanagerConfig.from_json, only with the scheduler's pd_disaggregation_single_container)
        self.single = single_container_offsets(user_config, self.role)
        if self.single:
            self.port += self.single["node_manager_port_offset"]
            self.base_port += self.single["base_port_offset"]
            log(COMPONENT, "single container offsets", **self.single)
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
        self.started_at = time.monotonic()
        self.status: list[str] = []
        self.gave_up = threading.Event()

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
        if self.single:  # its devices start at its device offset among the container's (engine_manager.py:205-217)
            offset = self.single["device_offset"]
            if len(found) < offset + self.single["device_num"]:
                fail(COMPONENT, f"found {len(found)} /dev/davinci* devices, need {self.single['device_num']} from "
                                f"offset {offset} (single container)")
            found = found[offset:offset + self.single["device_num"]]
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

    def register(self) -> bool:
        """Upstream's _register: REGISTER_ATTEMPTS tries, then give up (True when registered)."""
        wait = REGISTER_FIRST_WAIT
        for attempt in range(1, REGISTER_ATTEMPTS + 1):
            log(COMPONENT, f"Attempting registration (Attempt {attempt} of {REGISTER_ATTEMPTS})...")
            status, body = http_json("POST", f"{self.controller}/controller/register", self.register_message())
            if status == 200:
                log(COMPONENT, "registered with controller", controller=self.controller, response=body)
                return True
            log(COMPONENT, f"Registration attempt {attempt} failed", controller=self.controller, status=status,
                response=body)
            if attempt < REGISTER_ATTEMPTS:
                time.sleep(wait)
                wait *= 2
        log(COMPONENT, f"ERROR: Failed to register after {REGISTER_ATTEMPTS} attempts.")
        self.give_up("registration failed")
        return False

    def give_up(self, why: str) -> None:
        """Upstream's SIGTERM-to-itself / suicide procedure: every module stops (engines killed); the main thread
        notices at its next stdin-loop turn."""
        log(COMPONENT, f"ERROR: stopping all modules: {why}")
        self.stop_engines()
        self.gave_up.set()

    def stop_engines(self) -> None:
        for proc in self.engines:
            if proc.poll() is None:
                proc.kill()

    def endpoint_statuses(self) -> list[str]:
        """Each endpoint's status as upstream's status loop keeps it: within the grace period a failed /status
        keeps the previous status."""
        within_grace = time.monotonic() - self.started_at < STATUS_GRACE_SECONDS
        statuses = []
        for i in range(self.dp_local):
            previous = self.status[i] if i < len(self.status) else "initial"
            if not self.engines:
                statuses.append(previous)
                continue
            status, body = http_json("GET", f"{scheme('mgmt')}://{self.pod_ip}:{self.endpoint_ports(i)[1]}/status",
                                     timeout=1)
            detected = body.get("status") if status == 200 and isinstance(body, dict) else "abnormal"
            statuses.append(previous if within_grace and detected == "abnormal" else detected)
        self.status = statuses
        return statuses

    def heartbeat_loop(self) -> None:
        abnormal = 0
        while not self.gave_up.is_set():
            time.sleep(self.heartbeat_interval)
            statuses = self.endpoint_statuses()
            body = {"job_name": self.job_name, "pod_ip": self.pod_ip, "boot_id": self.boot_id,
                    "status": all(s == "normal" for s in statuses) and bool(self.engines)}
            status, answer = http_json("POST", f"{self.controller}/controller/heartbeat", body)
            if status == 404 and not self.engines and "dropped" in str((answer or {}).get("detail")):
                # upstream's reregister needs the endpoints of a start command (_gen_reregister_msg): a pod the
                # controller dropped before it started anything logs this on every heartbeat and stays unregistered
                log(COMPONENT, "ERROR: para check fail for reregister, please checklen[endpoints]:0")
                continue
            if status == 404:  # the controller forgot us (restart): register again
                log(COMPONENT, "controller does not know this pod; registering again")
                self.register()
                continue
            if status != 200:  # upstream: an exception while reporting is logged; the count stays
                continue
            if "abnormal" in statuses:
                abnormal += 1
                log(COMPONENT, f"Consecutive abnormal heartbeat count: {abnormal}/{ABNORMAL_HEARTBEATS}")
                if abnormal >= ABNORMAL_HEARTBEATS:
                    self.give_up(f"Reached {ABNORMAL_HEARTBEATS} consecutive abnormal heartbeats")
            else:
                abnormal = 0

    def engines_normal(self) -> bool:
        """GET /node-manager/status: upstream's check_all_endpoints_normal over the endpoints of the start command,
        so True before any start command came (no endpoints)."""
        if not self.engines:
            return True
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

    def visible_devices(self, index: int) -> str:
        """Upstream's _calc_visible_device_ids: logical ids (the container's devices count from 0), local_world_size
        of them per endpoint, wrapping around the device count."""
        size = max(len(npu_ids()), 1)
        k = self.devices_per_rank
        start = index * k % size
        ids = [(start + j) % size for j in range(k)]
        if self.single:  # daemon.py:180-181: shifted by the device offset
            ids = [i + self.single["device_offset"] for i in ids]
        return ",".join(map(str, ids))

    def _spawn(self, cmd: dict, local_rank: int, dp_rank: int) -> subprocess.Popen:
        port, mgmt = self.endpoint_ports(local_rank)
        argv = ["engine_server", "--dp-rank", str(dp_rank), "--instance-id", str(cmd["instance_id"]),
                "--role", self.role, "--host", self.pod_ip, "--port", str(port), "--mgmt-port", str(mgmt),
                "--master-dp-ip", cmd["master_dp_ip"], "--node-rank", str(cmd["node_rank"]),
                "--config-path", os.environ["USER_CONFIG_PATH"]]
        if self.single:  # daemon.py:135-139
            argv += ["--kv-port", str(self.single["kv_port"]), "--dp-rpc-port", str(self.single["dp_rpc_port"])]
            if self.single["lookup_rpc_port"] is not None:
                argv += ["--lookup-rpc-port", str(self.single["lookup_rpc_port"])]
        env = dict(os.environ)
        if not self.sglang or self.multi_endpoints:  # PyMotor sets it per endpoint only with multi endpoints
            env["ASCEND_RT_VISIBLE_DEVICES"] = self.visible_devices(local_rank)
        log(COMPONENT, "spawning engine", argv=argv, ASCEND_RT_VISIBLE_DEVICES=env.get("ASCEND_RT_VISIBLE_DEVICES"))
        return subprocess.Popen(argv, env=env)

    def watch_engines(self) -> None:
        """Logs an engine's exit; upstream notices it only through /status (see heartbeat_loop)."""
        seen = set()
        while not self.gave_up.is_set():
            for proc in self.engines:
                code = proc.poll()
                if code is not None and proc.pid not in seen:
                    seen.add(proc.pid)
                    log(COMPONENT, f"ERROR: engine {proc.args[1:3]} exited with {code}")
            time.sleep(0.5)

    def routes(self) -> dict:
        return {("POST", "/node-manager/start"): self.start_engines,
                ("GET", "/node-manager/status"): lambda *_: (200, {"status": self.engines_normal()})}


def stdin_loop(nm: NodeManager) -> int:
    """Upstream main.py's loop: the give-up flag is checked once per turn, a turn waits for a stdin line (EOF: 1 s)."""
    while True:
        if nm.gave_up.is_set():
            log(COMPONENT, f"exit_code: {GIVE_UP_EXIT - 256}")
            return GIVE_UP_EXIT
        try:
            line = input().strip().lower()
            if line:
                log(COMPONENT, f"Unknown command: {line}")
        except EOFError:
            time.sleep(1)


def main() -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    for var in ("ROLE", "JOB_NAME", "POD_IP", "CONTROLLER_SERVICE", "USER_CONFIG_PATH"):
        if not os.environ.get(var):
            fail(COMPONENT, f"environment variable {var} is not set")
    user_config = load_user_config()
    configure_tls(COMPONENT, user_config)
    nm = NodeManager(user_config)

    def on_term(*_) -> None:  # docker stop: engines go with it (upstream's handler stops every module)
        nm.stop_engines()
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)

    def run() -> None:
        if nm.register():
            nm.heartbeat_loop()
    bind_delay = once_knob("MOTOR_SIM_NM_BIND_DELAY", BIND_DELAY_MARKER)
    if bind_delay:  # upstream's race, made certain: registered before the port is bound (see the module docstring)
        threading.Thread(target=run, daemon=True).start()
        log(COMPONENT, f"MOTOR_SIM_NM_BIND_DELAY={bind_delay}: registering before the port is bound")
        time.sleep(float(bind_delay))
        serve(COMPONENT, nm.port, nm.routes(), tls="mgmt")
    else:
        serve(COMPONENT, nm.port, nm.routes(), tls="mgmt")
        threading.Thread(target=run, daemon=True).start()
    raise SystemExit(stdin_loop(nm))


if __name__ == "__main__":
    main()
