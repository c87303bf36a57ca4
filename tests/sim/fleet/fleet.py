#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A simulated fleet of Ascend hosts for benchmarks and tests at scale (tests/sim/fleet/README.md, bench/README.md).

One process serves every host: a Docker Engine API per host on its own unix socket (the fake of the unit tests,
tests/unit/plugins/module_utils/docker_fake.py) and, for every container the deploy starts, an HTTP listener on each
port of its ``io.pymotor.ports`` label, bound on the host's own loopback address (127.<net>.x.y). Ansible reaches a
host with connection ``local`` and the host's own interpreter wrapper (``<state>/hosts/<host>/python``, running
hostpy.py): the collection's host scripts and modules run unchanged and talk to that host's socket (DOCKER_HOST).

    fleet.py prepare --state DIR --hosts N [--hardware 800I_A3]      # files, inventory (DIR/inventory.yml)
    fleet.py serve --state DIR [--plan motor_plan.json]               # serve until SIGTERM; DIR/ready when up
    fleet.py set --state DIR HOST MODE [--seconds S]                  # up | refuse | blackhole | slow

Modes: ``refuse`` (the Docker socket is gone and the host's containers' ports are closed: connections are refused),
``blackhole`` (connections are accepted and never answered), ``slow`` (containers started from now on open their
ports S seconds after the start), ``up`` (normal; containers of the host answer again)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit" / "plugins" / "module_utils"))
import docker_fake  # noqa: E402  pylint: disable=wrong-import-position

PORTS_LABEL = "io.pymotor.ports"
IMAGE = "local/pymotor-fleet:1"
IMAGE_ID = "sha256:" + "f1ee7" * 12 + "0000"
STARTUP_IN_IMAGE = "/tmp/motor/examples/deployer/startup"
NPU_ARGS = {"info -m": "info-m.txt", "info": "info.txt", "info -t topo": "topo.txt"}


def host_ip(index: int, net: int = 21) -> str:
    """Engine host ``index`` (0-based) -> 127.<net>.x.y (x from 1); the control host (index -1) is 127.<net>.0.1.
    Fleets served at the same time need different ``net``s (bench/fleet 21, tests/integration 22)."""
    if index < 0:
        return "127.%d.0.1" % net
    return "127.%d.%d.%d" % (net, 1 + index // 250, index % 250 + 1)


def host_names(count: int) -> list[str]:
    return ["npu-%04d" % i for i in range(count)]


# ---------------------------------------------------------------------------------------------------------- prepare
def _npu_smi_outputs(state: Path, hardware: str, devices: int) -> tuple[Path, dict[str, str]]:
    """npu-smi's answers for a healthy host (the DinD sim host's stand-in npu-smi, run once over a fake /dev)."""
    out = state / "npu"
    dev = out / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    for i in range(devices):
        (dev / ("davinci%d" % i)).touch()
    text = (REPO / "tests/sim/host/rootfs/usr/local/lib/pymotor-sim/npu-smi.in").read_text(encoding="utf-8")
    text = text.replace("@HARDWARE@", hardware).replace("ls /dev 2>", "ls \"$FLEET_DEV\" 2>")
    tool = out / "npu-smi.sh"
    tool.write_text(text, encoding="utf-8")
    answers = dict(NPU_ARGS)
    for args, name in NPU_ARGS.items():
        proc = subprocess.run(["sh", str(tool)] + args.split(), env={**os.environ, "FLEET_DEV": str(dev)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        (out / name).write_text(proc.stdout, encoding="utf-8")
    # Per-die queries the host probe makes (spod-info on A3): every NPU/chip pair the stand-in npu-smi answers
    for npu_id in range(devices):
        for chip in (0, 1):
            args = "info -t spod-info -i %d -c %d" % (npu_id, chip)
            proc = subprocess.run(["sh", str(tool)] + args.split(), env={**os.environ, "FLEET_DEV": str(dev)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
            if proc.returncode == 0:
                answers[args] = "spod-%d-%d.txt" % (npu_id, chip)
                (out / answers[args]).write_text(proc.stdout, encoding="utf-8")
    return out, answers


def _executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def prepare(state: Path, count: int, hardware: str = "800I_A3", devices: int = 16, python: str = sys.executable,
            net: int = 21) -> Path:
    """Write the fleet's files under ``state`` (a directory of its own) and return its inventory: ``count`` engine
    hosts and one control host, each with its own address, Docker socket, NPUs and interpreter wrapper."""
    state = state.resolve()
    npu, npu_answers = _npu_smi_outputs(state, hardware, devices)
    driver = state / "ascend" / "driver"
    (driver / "tools").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "tests/sim/host/rootfs/usr/local/Ascend/driver/version.info", driver / "version.info")
    _executable(driver / "tools" / "hccn_tool", "#!/bin/sh\nexit 1\n")
    weights = state / "weight"
    if not weights.exists():
        shutil.copytree(REPO / "tests/sim/host/rootfs/mnt/weight", weights)
    hosts = [(name, host_ip(i, net), "motor_engine_hosts") for i, name in enumerate(host_names(count))]
    hosts.append(("ctl-0", host_ip(-1, net), "motor_control_hosts"))
    table = {}
    groups = {"motor_engine_hosts": {}, "motor_control_hosts": {}}
    for name, ip, group in hosts:
        root = state / "hosts" / name
        (root / "bin").mkdir(parents=True, exist_ok=True)
        ip_json = json.dumps([{"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
                              {"ifname": "sim0", "addr_info": [{"family": "inet", "local": ip}]}])
        _executable(root / "bin" / "ip", "#!/bin/sh\ncat <<'EOF'\n%s\nEOF\n" % ip_json)
        cases = "".join('  "%s") exec cat %s ;;\n' % (args, npu / out) for args, out in npu_answers.items())
        _executable(root / "bin" / "npu-smi", '#!/bin/sh\ncase "$*" in\n%s  *) echo "npu-smi: $*" >&2; exit 1 ;;\n'
                    'esac\n' % cases)
        _executable(root / "python", '#!/bin/sh\nexec %s %s %s "$@"\n' % (python, HERE / "hostpy.py", root))
        (root / "host.json").write_text(json.dumps({
            "name": name, "ip": ip, "devices": devices if group == "motor_engine_hosts" else 0,
            "socket": str(root / "docker.sock")}), encoding="utf-8")
        table[name] = {"ip": ip, "root": str(root), "group": group}
        groups[group][name] = {
            "ansible_host": ip, "ansible_connection": "local", "ansible_python_interpreter": str(root / "python"),
            "motor_host_ip": ip, "motor_nic": "sim0", "motor_service_log_root": str(root / "log"),
            "motor_service_startup_cache": str(root / "cache")}
    (state / "fleet.json").write_text(json.dumps({"hosts": table, "hardware": hardware}), encoding="utf-8")
    inventory = {"all": {
        "vars": {"motor_hardware_type": hardware, "motor_service_driver_dir": str(driver),
                 "motor_service_hccn_tool": str(driver / "tools" / "hccn_tool"),
                 "motor_service_engine_mounts": [str(driver)], "motor_service_check_links": False,
                 "motor_config_root": str(state / "etc"), "motor_service_min_free_log_mb": 1},
        "children": {group: {"hosts": members} for group, members in groups.items()}}}
    path = state / "inventory.yml"
    path.write_text(json.dumps(inventory, indent=1), encoding="utf-8")  # JSON is YAML
    return path


def seed_config(state: Path, hosts: int) -> Path:
    """``<state>/config`` (user_config.json, env.json): the seed PD-separation config (KV-cache affinity) on A3 hosts,
    one pod of 16 NPUs per engine host (TP 2: 8 DP ranks per pod) in min(16, hosts/4) prefill and as many decode
    instances (PyMotor allows 16 per role) of hosts/(2 x instances) pods, the fleet's image and weights."""
    seed = REPO / "examples" / "seed_pd_separation"
    user = json.loads((seed / "user_config.json").read_text(encoding="utf-8").replace("/mnt/weight",
                                                                                        str(state / "weight")))
    instances = max(1, min(16, hosts // 4))
    pods = max(1, hosts // (2 * instances))
    user["motor_deploy_config"].update(
        hardware_type="800I_A3", image_name=IMAGE, p_instances_num=instances, d_instances_num=instances,
        single_p_instance_pod_num=pods, single_d_instance_pod_num=pods, p_pod_npu_num=16, d_pod_npu_num=16)
    for role in ("motor_engine_prefill_config", "motor_engine_decode_config"):
        user[role]["engine_config"].update(data_parallel_size=8 * pods, tensor_parallel_size=2)
    out = state / "config"
    out.mkdir(parents=True, exist_ok=True)
    (out / "user_config.json").write_text(json.dumps(user, indent=1), encoding="utf-8")
    shutil.copy(seed / "env.json", out / "env.json")
    return out


# ------------------------------------------------------------------------------------------------------------ serve
class Host:
    """One simulated host: its Docker engine (and socket), its mode and its containers' listeners."""

    def __init__(self, fleet, name, info):
        self.fleet, self.name, self.ip, self.root = fleet, name, info["ip"], Path(info["root"])
        self.socket = self.root / "docker.sock"
        self.mode, self.seconds = "up", 0.0
        self.awake = threading.Event()
        self.awake.set()
        self.engine = docker_fake.Engine()
        self.engine.images[IMAGE] = self.engine.images[IMAGE_ID] = IMAGE_ID
        self.engine.image_files[IMAGE_ID] = {STARTUP_IN_IMAGE: fleet.startup}
        self.engine.on_state = self.changed
        self.engine.gate = self.gate
        self.server = None
        self.listeners = {}  # container name -> [asyncio servers]

    # the Docker API
    def open_socket(self):
        if self.socket.exists():
            self.socket.unlink()
        self.server = docker_fake.unix_engine(self.socket, self.engine)

    def close_socket(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.socket.exists():
            self.socket.unlink()

    def gate(self, _handler):
        if self.mode == "blackhole":
            self.awake.wait()
            return False
        return True

    # the containers' ports
    def changed(self, name, container):
        running = bool(container["State"].get("Running"))
        delay = self.seconds if self.mode == "slow" else 0.0
        ports = self.fleet.http_ports(name, [int(p) for p in (container["Config"]["Labels"].get(PORTS_LABEL) or
                                                                 "").split(",") if p])
        asyncio.run_coroutine_threadsafe(self.fleet.listen(self, name, ports if running else [], delay),
                                         self.fleet.loop).result()

    def set_mode(self, mode, seconds=0.0):
        old, self.mode, self.seconds = self.mode, mode, float(seconds)
        if mode == "blackhole":
            self.awake.clear()
        else:
            self.awake.set()
        if mode == "refuse":
            self.close_socket()
            asyncio.run_coroutine_threadsafe(self.fleet.close_all(self), self.fleet.loop).result()
        elif old == "refuse":
            self.open_socket()
            for name, container in list(self.engine.containers.items()):
                self.changed(name, container)


class Fleet:
    def __init__(self, state: Path, plan: Path | None):
        self.state = state.resolve()
        self.plan_path = plan
        self._plan = (None, None)
        self._index = (None, {})
        top = REPO / "tests/sim/motor_image/startup"
        self.startup = {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}
        info = json.loads((self.state / "fleet.json").read_text(encoding="utf-8"))
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.hosts = {name: Host(self, name, entry) for name, entry in info["hosts"].items()}

    def plan(self):
        """The deploy's plan (motor_plan_output), re-read when the file changes."""
        if self.plan_path is None or not self.plan_path.exists():
            return {}
        stamp = self.plan_path.stat().st_mtime_ns
        if self._plan[0] != stamp:
            self._plan = (stamp, json.loads(self.plan_path.read_text(encoding="utf-8")))
        return self._plan[1]

    def http_ports(self, name, ports):
        """The ports of ``ports`` (a container's label) that get a listener: all of them for the control plane; for
        an engine pod the ones that speak HTTP (node manager, each DP rank's management and service port): with a
        listener on every rank-pool, HCCL and KV port too, 256 A3 hosts need about 25,000 sockets, more than the
        20,000 open files this machine allows a process."""
        plan = self.plan()
        if self._plan[0] != self._index[0]:
            self._index = (self._plan[0], {c["name"]: c for c in plan.get("containers") or []})
        c = self._index[1].get(name)
        if not c or c.get("tier") != 2:
            return ports
        http = {(c.get("port_map") or {}).get("node_manager")}
        for ep in c.get("endpoints") or []:
            http.update((ep.get("mgmt_port"), ep.get("service_port")))
        return [p for p in ports if p in http]

    def services(self):
        """The KV conductor's /services: the KV-event endpoint of every DP rank of every publishing container that
        runs (what the coordinator registered; one port per rank from the plan's base)."""
        plan = self.plan()
        events = plan.get("kv_events") or {}
        running = set()
        for host in self.hosts.values():  # a host that stops answering later stays registered, as with PyMotor
            running.update(n for n, c in host.engine.containers.items() if c["State"].get("Running"))
        out = []
        for c in plan.get("containers") or []:
            if c.get("role") == events.get("role") and c["name"] in running:
                out += [{"Endpoint": "tcp://%s:%d" % (c["ip"], events["endpoint_port"] + r)} for r in c["dp_ranks"]]
        return {"services": out}

    async def answer(self, host, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if host.mode == "blackhole":
                while host.mode == "blackhole":
                    await asyncio.sleep(0.5)
                return
            path = head.split(b" ", 2)[1].decode("latin-1")
            body = self.services() if path.startswith("/services") else {"ready": True, "status": "normal"}
            data = json.dumps(body).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (len(data), data))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, IndexError):
            pass
        finally:
            writer.close()

    async def listen(self, host, name, ports, delay):
        for server in host.listeners.pop(name, []):
            server.close()
        if not ports:
            return
        servers = host.listeners[name] = []

        async def bind():
            for port in ports:
                try:
                    servers.append(await asyncio.start_server(
                        lambda r, w: self.answer(host, r, w), host.ip, port, reuse_address=True, backlog=64))
                except OSError as exc:
                    print("fleet: %s %s cannot bind %s:%d: %s" % (host.name, name, host.ip, port, exc), flush=True)
        if delay:
            self.loop.call_later(delay, lambda: asyncio.ensure_future(bind()))
        else:
            await bind()

    async def close_all(self, host):
        for name in list(host.listeners):
            for server in host.listeners.pop(name):
                server.close()

    def control(self):
        fleet = self

        class Control(socketserver.StreamRequestHandler):
            def handle(self):
                ask = json.loads(self.rfile.readline())
                fleet.hosts[ask["host"]].set_mode(ask["mode"], ask.get("seconds") or 0)
                self.wfile.write(b"ok\n")

        path = self.state / "control.sock"
        if path.exists():
            path.unlink()
        server = docker_fake.UnixServer(str(path), Control)
        docker_fake.serve(server)
        return server

    def serve(self):
        for host in self.hosts.values():
            host.open_socket()
        self.control()
        (self.state / "ready").write_text(str(os.getpid()), encoding="utf-8")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        stop.wait()
        for host in self.hosts.values():  # no server.shutdown() each (up to 0.5 s per host): the threads are daemons
            host.awake.set()
            if host.socket.exists():
                host.socket.unlink()
        (self.state / "ready").unlink()


# ------------------------------------------------------------------------------------------------ control, helpers
def set_mode(state: Path, host: str, mode: str, seconds: float = 0.0) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(state / "control.sock"))
        sock.sendall(json.dumps({"host": host, "mode": mode, "seconds": seconds}).encode() + b"\n")
        if sock.makefile().readline().strip() != "ok":
            raise RuntimeError("the fleet did not take %s %s" % (host, mode))


def start(state: Path, plan: Path | None = None, log: Path | None = None) -> subprocess.Popen:
    """Serve the prepared fleet in a child process; returns once every socket is up."""
    ready = state / "ready"
    if ready.exists():
        ready.unlink()
    argv = [sys.executable, str(Path(__file__).resolve()), "serve", "--state", str(state)]
    if plan is not None:
        argv += ["--plan", str(plan)]
    out = open(log or os.devnull, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the fleet did not come up (log: %s)" % log)
        time.sleep(0.1)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare")
    prep.add_argument("--state", type=Path, required=True)
    prep.add_argument("--hosts", type=int, required=True)
    prep.add_argument("--hardware", default="800I_A3")
    prep.add_argument("--net", type=int, default=21, help="second octet of the fleet's 127.0.0.0/8 addresses")
    serve = sub.add_parser("serve")
    serve.add_argument("--state", type=Path, required=True)
    serve.add_argument("--plan", type=Path)
    mode = sub.add_parser("set")
    mode.add_argument("--state", type=Path, required=True)
    mode.add_argument("host")
    mode.add_argument("mode", choices=["up", "refuse", "blackhole", "slow"])
    mode.add_argument("--seconds", type=float, default=0.0)
    args = parser.parse_args()
    if args.command == "prepare":
        print(prepare(args.state, args.hosts, args.hardware, net=args.net))
    elif args.command == "serve":
        Fleet(args.state, args.plan).serve()
    else:
        set_mode(args.state, args.host, args.mode, args.seconds)


if __name__ == "__main__":
    main()
