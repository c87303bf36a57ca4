"""Controller stand-in (python3 -m motor.controller.main --config <user_config>).

Node managers register (POST /controller/register) and heartbeat (POST /controller/heartbeat).
Registrations are grouped by job_name, pods keyed by pod_ip (a second pod with the same pod_ip is
ignored, like PyMotor). When single_<x>_instance_pod_num pods of a job arrived, the instance is
assembled: every pod whose node manager answers its status request stays (one that does not is dropped, as
upstream's _filter_abnormal_endpoints does, and the instance waits for pods again), then every pod gets POST
/node-manager/start. Once all its pods report healthy engines, the
instance is pushed to the coordinator (POST /instances/refresh, ``{"event": "add", "instances": [it]}``). When a
pod's heartbeats stop for instance_heartbeat_timeout seconds the controller asks every node manager of the instance
(upstream's _check_node_managers_status): all answer ``{"status": true}`` -> the heartbeats are refreshed and the
instance stays; else it is taken out (``"del"``). A pod that restarted registers again and, as upstream
(instance_assembler.py register -> -1), is answered ``{"error": "Instance already registered"}`` while its instance
is assembled; its heartbeats (new boot id) are refused like upstream's for an instance id it does not have. Such a
pod's node manager has no endpoint, answers normal, and the instance stays, stranded (the healers repair it).

Re-sending is upstream's, no more (motor/controller/core/event_pusher.py): an event that fails to reach the
coordinator is logged and dropped (``_event_consumer``, no retry); every coordinator_heartbeat_interval seconds
(event_config, default 10) ``_coordinator_heartbeat_detector`` reads the coordinator's /readiness and, when it says
not ready (or did not answer twice after a first success), queues a ``"set"`` event with every ready instance,
which ``_event_consumer`` SKIPS unless some instance has role ``prefill``. So a restarted coordinator of a PD-hybrid
job (union instances only) never learns its instances again from this controller; a controller restart does
(node managers register again, each instance is added anew).
"""

from __future__ import annotations

import argparse
import itertools
import os
import threading
import time

from motor_sim.common import (
    controller_port,
    configure_tls,
    coordinator_ports,
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

COMPONENT = "controller"


class Job:
    def __init__(self, name: str, role: str, pods_needed: int):
        self.name, self.role, self.pods_needed = name, role, pods_needed
        self.pods: dict[str, dict] = {}  # pod_ip -> RegisterMsg (insertion order = node rank)
        self.instance_id: int | None = None
        self.healthy: dict[str, bool] = {}
        self.last_seen: dict[str, float] = {}
        self.boot_ids: dict[str, str] = {}
        self.dropped: set[str] = set()  # pod_ips dropped while assembling (their node manager did not answer)
        self.started = False  # assembled: start commands sent (upstream: in the InstanceManager)

    def endpoints(self) -> list[dict]:
        """Endpoints with global DP ranks: node_rank * dp_local + local_rank."""
        out = []
        for node_rank, pod in enumerate(self.pods.values()):
            dp_local = pod["parallel_config"]["dp_local"]
            for ep in pod["endpoints"]:
                out.append({"dp_rank": node_rank * dp_local + ep["local_rank"], "ip": ep["ip"],
                            "port": ep["business_port"], "mgmt_port": ep["mgmt_port"], "pod_ip": pod["pod_ip"]})
        return out

    def active(self) -> bool:
        return self.instance_id is not None and all(self.healthy.get(ip) for ip in self.pods)

    def describe(self) -> dict:
        model = next(iter(self.pods.values()))["model_name"]
        return {"id": self.instance_id, "role": self.role, "job_name": self.name, "model_name": model,
                "endpoints": self.endpoints()}


class Controller:
    def __init__(self, user_config: dict):
        self.user_config = user_config
        api = section(user_config, "motor_controller_config", "api_config")
        self.port = controller_port(user_config)
        self.obs_port = int(api.get("observability_api_port") or 1027)
        inst = section(user_config, "motor_controller_config", "instance_config")
        self.heartbeat_timeout = float(inst.get("instance_heartbeat_timeout") or 10)
        self.coordinator = (f"{scheme('mgmt')}://{os.environ.get('COORDINATOR_SERVICE', '127.0.0.1')}:"
                            f"{coordinator_ports(user_config)[1]}")
        self.jobs: dict[str, Job] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.version = 0  # bumped on every change of the active instance set
        events = section(user_config, "motor_controller_config", "event_config")
        self.coordinator_heartbeat_interval = float(events.get("coordinator_heartbeat_interval") or 10)
        self.reset = threading.Event()  # upstream's is_coordinator_reset: a "set" event is queued

    def register(self, msg: dict, _handler) -> tuple:
        with self.lock:
            job = self.jobs.get(msg["job_name"])
            if job is None:
                job = self.jobs[msg["job_name"]] = Job(msg["job_name"], msg["role"],
                                                       instance_pods(self.user_config, msg["role"]))
            if job.started:  # upstream: RegisterStatus.ASSEMBLED -> -1 (instance_assembler.py register)
                log(COMPONENT, f"Instance {job.name} already registered, no need to register again.")
                return 200, {"error": "Instance already registered"}
            if msg["pod_ip"] in job.pods:
                log(COMPONENT, "duplicate pod ignored", job_name=job.name, pod_ip=msg["pod_ip"])
                return 200, {"status": "duplicate", "job_name": job.name}
            job.pods[msg["pod_ip"]] = msg
            job.dropped.discard(msg["pod_ip"])
            job.last_seen[msg["pod_ip"]] = time.monotonic()
            job.boot_ids[msg["pod_ip"]] = msg.get("boot_id", "")
            log(COMPONENT, "pod registered", job_name=job.name, role=job.role, pods=len(job.pods),
                needed=job.pods_needed)
            ready = job.instance_id is None and len(job.pods) == job.pods_needed
            if ready:
                job.instance_id = next(self.ids)
        if ready:
            threading.Thread(target=self.assemble, args=(job,), daemon=True).start()
        return 200, {"status": "registered", "job_name": job.name}

    def drop_unreachable(self, job: Job) -> bool:
        """Upstream's _filter_abnormal_endpoints before an instance assembles: a pod whose node manager does not
        answer GET /node-manager/status is dropped from it (the instance waits for pods again). True when all
        answered."""
        dead = [pod for pod in job.pods.values()
                if http_json("GET", f"{scheme('mgmt')}://{pod['pod_ip']}:{pod['nm_port']}/node-manager/status",
                             timeout=5)[0] == 0]  # upstream's SafeHTTPSClient: 5 s
        if not dead:
            return True
        with self.lock:
            for pod in dead:
                log(COMPONENT, f"Node manager {pod['pod_ip']}:{pod['nm_port']} is not alive for instance "
                               f"{job.name}(id:{job.instance_id})")
                for table in (job.pods, job.last_seen, job.boot_ids, job.healthy):
                    table.pop(pod["pod_ip"], None)
                job.dropped.add(pod["pod_ip"])
            job.instance_id = None
        return False

    def assemble(self, job: Job) -> None:
        """Send StartCmd to every pod of the instance (node_rank = registration order)."""
        if not self.drop_unreachable(job):
            return
        with self.lock:
            job.started = True
        pods = list(job.pods.values())
        log(COMPONENT, "instance assembled", instance_id=job.instance_id, job_name=job.name, role=job.role,
            pods=[p["pod_ip"] for p in pods])
        endpoints = job.endpoints()
        for node_rank, pod in enumerate(pods):
            cmd = {"instance_id": job.instance_id, "role": job.role, "node_rank": node_rank,
                   "master_dp_ip": pods[0]["pod_ip"],
                   "dp_ranks": [e["dp_rank"] for e in endpoints if e["pod_ip"] == pod["pod_ip"]],
                   "ranktable": {"server_list": [{"server_id": p["host_ip"], "pod_ip": p["pod_ip"]} for p in pods]}}
            url = f"{scheme('mgmt')}://{pod['pod_ip']}:{pod['nm_port']}/node-manager/start"
            while True:
                status, body = http_json("POST", url, cmd)
                log(COMPONENT, "start command sent", url=url, status=status, response=body)
                if status == 200:
                    break
                time.sleep(1)

    def heartbeat(self, msg: dict, _handler) -> tuple:
        with self.lock:
            job = self.jobs.get(msg.get("job_name", ""))
            if job is not None and msg.get("pod_ip") in job.dropped:  # upstream: 503, and a reregister that fails
                return 404, {"detail": "pod dropped while the instance assembled"}
            if job is None or msg.get("pod_ip") not in job.pods:
                return 404, {"detail": "pod not registered"}
            if msg.get("boot_id", "") != job.boot_ids.get(msg["pod_ip"], ""):
                # a restarted pod: upstream's node manager sends heartbeats only after a start command, with that
                # command's instance id; before one it has none (503, and its reregister fails the para check)
                return 404, {"detail": "pod restarted and not started: dropped from heartbeats"}
            was_active = job.active()
            job.last_seen[msg["pod_ip"]] = time.monotonic()
            job.healthy[msg["pod_ip"]] = bool(msg.get("status"))
            if job.active() != was_active:
                self.version += 1
                log(COMPONENT, "instance state changed", instance_id=job.instance_id, active=job.active())
        return 200, {"status": "ok"}

    @staticmethod
    def node_manager_normal(pod: dict) -> bool:
        status, body = http_json("GET", f"{scheme('mgmt')}://{pod['pod_ip']}:{pod['nm_port']}/node-manager/status",
                                 timeout=5)
        return status == 200 and isinstance(body, dict) and body.get("status") is True

    def expire_stale_pods(self) -> None:
        """Upstream's heartbeat timeout (instance_manager.py _handle_inactive): ask every node manager of the
        instance; all normal -> refresh the heartbeats, else take the instance out."""
        now = time.monotonic()
        with self.lock:
            stale = {job.name: ([ip for ip, seen in job.last_seen.items() if now - seen > self.heartbeat_timeout],
                                list(job.pods.values())) for job in self.jobs.values()}
        for name, (ips, pods) in stale.items():
            if not ips:
                continue
            normal = all(self.node_manager_normal(pod) for pod in pods)
            with self.lock:
                job = self.jobs.get(name)
                if job is None:
                    continue
                if normal:
                    log(COMPONENT, f"All node managers report normal status for instance {name}(id:{job.instance_id})",
                        pods=ips)
                    for ip in ips:
                        job.last_seen[ip] = time.monotonic()
                    continue
                log(COMPONENT, "heartbeat timeout: instance removed", job_name=name, instance_id=job.instance_id,
                    pods=ips)
                del self.jobs[name]
                self.version += 1

    def active_instances(self) -> list[dict]:
        with self.lock:
            return [job.describe() for job in self.jobs.values() if job.active()]

    def push_loop(self) -> None:
        """Upstream's EventPusher.update + _event_consumer: an "add" when an instance becomes active, a "del" when
        an instance that was added goes, each sent once (a failed send is logged and dropped); a "set" queued by the
        heartbeat detector is sent only when some added instance has role prefill."""
        added: dict = {}  # instance id -> describe(), upstream's EventPusher.instances
        while True:
            time.sleep(1)
            self.expire_stale_pods()
            current = {i["id"]: i for i in self.active_instances()}
            events = [("add", [inst]) for iid, inst in current.items() if iid not in added]
            events += [("del", [inst]) for iid, inst in added.items() if iid not in current]
            added = current
            if self.reset.is_set():
                self.reset.clear()
                if any(inst["role"] == "prefill" for inst in added.values()):
                    events.append(("set", list(added.values())))
                else:
                    log(COMPONENT, "SET event skipped: requires at least one prefill instance, "
                                   "current instances: prefill=False")
            for event, instances in events:
                status, body = http_json("POST", f"{self.coordinator}/instances/refresh",
                                         {"event": event, "instances": instances})
                log(COMPONENT, "instances pushed to coordinator", url=self.coordinator, event=event, status=status,
                    instances=[(i["role"], i["id"]) for i in instances], response=body)
                if status != 200:
                    log(COMPONENT, "Failed to send instance refresh event", event=event)

    def heartbeat_detector(self) -> None:
        """Upstream's _coordinator_heartbeat_detector: every coordinator_heartbeat_interval s GET /readiness; not
        ready, or no answer twice in a row after a first success, queues a "set" event."""
        first_success, losses = False, 0
        while True:
            status, body = http_json("GET", f"{self.coordinator}/readiness?status=normal", timeout=5)
            if status == 200:
                first_success, losses = True, 0
                if not (isinstance(body, dict) and body.get("ready")):
                    self.reset.set()
            elif first_success:
                losses += 1
                if losses >= 2:
                    log(COMPONENT, "Coordinator heartbeat lost. Possible restart detected.")
                    self.reset.set()
                    losses = 0
            time.sleep(self.coordinator_heartbeat_interval)

    def routes(self) -> dict:
        ok = lambda *_: (200, {"status": "ok"})  # noqa: E731
        return {("POST", "/controller/register"): self.register, ("POST", "/controller/heartbeat"): self.heartbeat,
                ("GET", "/controller/instances"): lambda *_: (200, {"instances": self.active_instances()}),
                ("GET", "/startup"): ok, ("GET", "/readiness"): ok, ("GET", "/liveness"): ok}

    def obs_routes(self) -> dict:
        text = lambda *_: (200, f"motor_controller_instances {len(self.active_instances())}\n")  # noqa: E731
        # upstream serves only /observability/metrics there (controller_api.py:478, the coordinator's proxy)
        return {("GET", "/metrics"): text, ("GET", "/observability/metrics"): text}


def main() -> None:
    install_fault_knobs(COMPONENT)
    log_received(COMPONENT)
    parser = argparse.ArgumentParser(prog="motor.controller.main")
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    user_config = load_user_config(args.config)
    configure_tls(COMPONENT, user_config)
    controller = Controller(user_config)
    serve(COMPONENT, controller.port, controller.routes(), tls="mgmt")
    serve(f"{COMPONENT}-obs", controller.obs_port, controller.obs_routes())
    threading.Thread(target=controller.push_loop, daemon=True).start()
    threading.Thread(target=controller.heartbeat_detector, daemon=True).start()
    wait_forever()


if __name__ == "__main__":
    main()
