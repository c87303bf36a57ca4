#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read everything a PyMotor deploy needs to know about a host, read-only, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_host_probe
short_description: Read the Docker engine, the job's containers and the Ascend surface of a host in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Read-only. Runs before planning (the containers' labels tell the plan where they run), so it reads the
    whole host rather than what a plan would use - every NPU C(npu-smi) lists and its health, every listening TCP
    port, the link state of every NPU (when asked), the given paths and model directories, the free disk space;
    the precheck then judges the planned NPUs, ports and paths on the controller without another round trip.
  - The Docker part goes through the collection's own Engine API client (Python standard library only, honouring
    O(docker_host) and the TLS options); when the engine does not answer,
    the module still succeeds with RV(can_talk_to_docker=false) and the reason in RV(msg), so that the precheck
    reports it with the host's other problems.
  - The containers are listed as the Engine API lists them (C(GET /containers/json)) (C(Names), C(State),
    C(Status), C(Labels), ...), filtered by the label C(io.pymotor.job).
extends_documentation_fragment:
  - pymotor.ascend.docker
  - pymotor.ascend.read_only
options:
  job_id:
    description: Value of the C(io.pymotor.job) label of the containers to list.
    type: str
    required: true
  image:
    description: Image whose id is returned in RV(images) (empty - no image lookup).
    type: str
    default: ''
  paths:
    description: Paths whose existence is returned in RV(paths).
    type: list
    elements: path
    default: []
  model_dirs:
    description: Model directories checked for a C(config.json) (RV(models)).
    type: list
    elements: path
    default: []
  links:
    description: Read the network link state of every NPU with C(hccn_tool -i <id> -link -g) (RV(links)).
    type: bool
    default: false
  hccn_tool:
    description: Path of C(hccn_tool).
    type: path
    default: /usr/local/Ascend/driver/tools/hccn_tool
  disk_path:
    description: Path whose file system's free space is returned in RV(free_mb) (its nearest existing parent).
    type: path
    default: /var/log
notes:
  - C(npu-smi) is looked up in E(PATH), /usr/local/sbin and /usr/local/bin.
  - The network interfaces (RV(interfaces), RV(default_interface)) come from C(ip -j addr) when C(ip) is installed,
    else from the standard library (C(socket.if_nameindex), the C(SIOCGIFADDR) ioctl for the primary IPv4 address
    only, C(/proc/net/if_inet6)); the default route from C(/proc/net/route). No package is needed on the host.
seealso:
  - module: pymotor.ascend.motor_job_info
"""

EXAMPLES = r"""
- name: Read the host before planning
  pymotor.ascend.motor_host_probe:
    job_id: mindie-motor
    image: pymotor:latest
    paths: [/usr/local/Ascend/driver, /mnt/weight]
    model_dirs: [/mnt/weight/qwen3_8B]
  register: host
"""

RETURN = r"""
can_talk_to_docker:
  description: Whether the Docker engine answered.
  returned: always
  type: bool
  sample: true
msg:
  description: Why the Docker engine could not be read (when RV(can_talk_to_docker) is false).
  returned: when the Docker engine does not answer
  type: str
  sample: 'cannot talk to the Docker engine at unix:///var/run/docker.sock: FileNotFoundError: [Errno 2] No such file or directory'
host_info:
  description: C(ServerVersion) of the Docker engine.
  returned: always
  type: dict
  sample: {ServerVersion: 27.5.1}
images:
  description: C([{Id}]) of O(image) when it is present.
  returned: always
  type: list
  elements: dict
  sample: [{Id: 'sha256:0123abcd'}]
containers:
  description: The containers of the job (running or not), as the Engine API lists them.
  returned: always
  type: list
  elements: dict
  sample: [{Id: 3f2a9c0e1b7d, Names: [/mindie-motor-p0-0], State: running, Status: Up 5 minutes, Labels: {io.pymotor.job: mindie-motor}}]
npu_devices:
  description: Ids of the C(/dev/davinciN) device nodes.
  returned: always
  type: list
  elements: int
  sample: [0, 1, 2, 3, 4, 5, 6, 7]
npu_health:
  description: NPU (device) id to the health C(npu-smi info) reports.
  returned: always
  type: dict
  sample: {'0': OK, '1': OK, '2': Warning}
npu_error:
  description: Why C(npu-smi) could not be read (empty when it could, or when there is no NPU device).
  returned: always
  type: str
  sample: ''
listening:
  description: Every TCP port in LISTEN state (IPv4 and IPv6).
  returned: always
  type: list
  elements: int
  sample: [22, 1025, 2379]
links:
  description: NPU id to its link state (C(UP), C(DOWN), or the tool's error), with O(links).
  returned: always
  type: dict
  sample: {'0': UP, '1': DOWN}
paths:
  description: Path to whether it exists.
  returned: always
  type: dict
  sample: {/usr/local/Ascend/driver: true, /mnt/weight: true}
models:
  description: Model directory to C(ok), C(missing) or C(no config.json).
  returned: always
  type: dict
  sample: {/mnt/weight/qwen3_8B: ok, /mnt/weight/other: no config.json}
free_mb:
  description: Free MiB on the file system of O(disk_path).
  returned: always
  type: int
  sample: 51200
interfaces:
  description:
    - Every network interface of the host (the host's network namespace) with its addresses, C(lo) included.
    - The plan takes C(motor_nic) and C(motor_host_ip) from RV(default_interface) when the inventory does not set
      them; the precheck checks that a set C(motor_nic) is one of these and C(motor_host_ip) one of their addresses.
  returned: always
  type: dict
  sample: {lo: {ipv4: [127.0.0.1], ipv6: ['::1']}, enp189s0f0: {ipv4: [10.20.0.11], ipv6: []}}
default_interface:
  description: The interface of the IPv4 default route (the one with the lowest metric; empty when there is none).
  returned: always
  type: str
  sample: enp189s0f0
"""

import fcntl
import glob
import ipaddress
import json
import os
import re
import shutil
import socket
import struct
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import (
    DOCKER_CONNECTION_ARGS,
    DOCKER_CONNECTION_REQUIRED_TOGETHER,
    DockerClient,
    DockerError,
    DockerUnavailable,
)

LISTEN = "0A"


def read_docker(params, job_id, image):
    out = {"can_talk_to_docker": False, "host_info": {}, "images": [], "containers": []}
    try:
        client = DockerClient.from_params(params)
        out["host_info"] = {"ServerVersion": client.get_json("/version").get("Version", "")}
        out["can_talk_to_docker"] = True
        found = client.inspect_image(image) if image else None
        out["images"] = [{"Id": found["Id"]}] if found else []
        out["containers"] = client.job_containers(job_id)
    except DockerUnavailable as exc:
        out["msg"] = to_native(exc)
    except (DockerError, KeyError, TypeError, AttributeError) as exc:  # an engine that answers badly is reported
        out["can_talk_to_docker"] = False                               # like one that does not answer
        out["msg"] = "Docker API error: %s" % to_native(exc)
    return out


def listening_ports(tables=("/proc/net/tcp", "/proc/net/tcp6")):
    ports = set()
    for name in tables:
        try:
            with open(name) as handle:
                lines = handle.read().splitlines()[1:]
        except (IOError, OSError):
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == LISTEN:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


SIOCGIFADDR = 0x8915


def default_route_interface(route_text):
    """The interface of the IPv4 default route (destination and mask 0, lowest metric) in /proc/net/route text."""
    best = None
    for line in route_text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[1] != "00000000" or fields[7] != "00000000":
            continue
        try:
            flags, metric = int(fields[3], 16), int(fields[6])
        except ValueError:
            continue
        if flags & 1 and (best is None or metric < best[0]):  # RTF_UP
            best = (metric, fields[0])
    return best[1] if best else ""


def parse_ip_json(text):
    """Interface name -> {ipv4, ipv6} from the output of ``ip -j addr``."""
    out = {}
    for link in json.loads(text or "[]"):
        name = link.get("ifname")
        if not name:
            continue
        entry = out.setdefault(name, {"ipv4": [], "ipv6": []})
        for addr in link.get("addr_info") or []:
            family = {"inet": "ipv4", "inet6": "ipv6"}.get(addr.get("family"))
            if family and addr.get("local"):
                entry[family].append(str(ipaddress.ip_address(addr["local"])))
    return out


def parse_if_inet6(text):
    """Interface name -> IPv6 addresses from /proc/net/if_inet6 text."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 6 and len(fields[0]) == 32:
            out.setdefault(fields[5], []).append(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    return out


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def _ioctl_ipv4(name):
    """The primary IPv4 address of an interface (SIOCGIFADDR), or None."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        return socket.inet_ntoa(packed[20:24])
    except (IOError, OSError):
        return None
    finally:
        sock.close()


def read_interfaces(ip_tool=None, route_path="/proc/net/route", inet6_path="/proc/net/if_inet6"):
    """(interfaces, default_interface): every interface with its addresses, and the default route's interface."""
    interfaces = None
    tool = ip_tool if ip_tool is not None else shutil.which("ip", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if tool:
        rc, out, dummy = _run([tool, "-j", "addr", "show"])
        if rc == 0:
            try:
                interfaces = parse_ip_json(out)
            except ValueError:  # an ip without JSON output (older iproute2)
                interfaces = None
    if interfaces is None:
        inet6 = parse_if_inet6(_read(inet6_path))
        interfaces = {}
        for dummy, name in socket.if_nameindex():
            ipv4 = _ioctl_ipv4(name)
            interfaces[name] = {"ipv4": [ipv4] if ipv4 else [], "ipv6": inet6.get(name, [])}
    return interfaces, default_route_interface(_read(route_path))


def _run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def parse_npu_smi(mapping_out, info_out):
    """NPU (device) id -> health from `npu-smi info -m` (NPU/chip -> logic id) and `npu-smi info` (pure)."""
    logic = {}
    for line in mapping_out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit() and fields[2].isdigit():
            logic[(int(fields[0]), int(fields[1]))] = int(fields[2])
    health = {}
    first = re.compile(r"^\|\s*(\d+)\s+\S[^|]*\|\s*([A-Za-z]+)\s*\|")
    second = re.compile(r"^\|\s*(\d+)(?:\s+\d+)?\s*\|\s*[0-9A-Fa-f]{4}:")
    pending = None
    for line in info_out.splitlines():
        match = first.match(line)
        if match and pending is None:
            pending = (int(match.group(1)), match.group(2))
            continue
        match = second.match(line)
        if match and pending is not None:
            npu, state = pending
            health[str(logic.get((npu, int(match.group(1))), npu))] = state
        pending = None
    return health


def npu_health():
    """(health per NPU id, error): nothing to read on a host without NPU devices or npu-smi."""
    tool = shutil.which("npu-smi", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/local/bin")
    if not tool:
        return {}, "npu-smi not found"
    rc, mapping_out, err = _run([tool, "info", "-m"])
    if rc != 0:
        return {}, "npu-smi info -m failed: %s" % (mapping_out + err).strip()
    rc, info_out, err = _run([tool, "info"])
    if rc != 0:
        return {}, "npu-smi info failed: %s" % (info_out + err).strip()
    return parse_npu_smi(mapping_out, info_out), ""


def link_states(npu_ids, hccn_tool):
    links = {}
    for npu in npu_ids:
        if not os.path.exists(hccn_tool):
            links[str(npu)] = "hccn_tool not found"
            continue
        rc, out, err = _run([hccn_tool, "-i", str(npu), "-link", "-g"])
        match = re.search(r"link status:\s*(\w+)", out)
        links[str(npu)] = match.group(1) if rc == 0 and match else (out + err).strip() or "rc %d" % rc
    return links


def model_states(model_dirs):
    models = {}
    for model in model_dirs:
        if not os.path.isdir(model):
            models[model] = "missing"
        elif not os.path.isfile(os.path.join(model, "config.json")):
            models[model] = "no config.json"
        else:
            models[model] = "ok"
    return models


def free_mb(path):
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path or "/").free // (1024 * 1024)


def main():
    argument_spec = dict(DOCKER_CONNECTION_ARGS)
    argument_spec.update(
        job_id=dict(type="str", required=True),
        image=dict(type="str", default=""),
        paths=dict(type="list", elements="path", default=[]),
        model_dirs=dict(type="list", elements="path", default=[]),
        links=dict(type="bool", default=False),
        hccn_tool=dict(type="path", default="/usr/local/Ascend/driver/tools/hccn_tool"),
        disk_path=dict(type="path", default="/var/log"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
    params = module.params
    result = read_docker(params, params["job_id"], params["image"])
    interfaces, default_interface = read_interfaces()
    devices = sorted(int(p[len("/dev/davinci"):]) for p in glob.glob("/dev/davinci[0-9]*")
                     if p[len("/dev/davinci"):].isdigit())
    health, npu_error = npu_health() if devices else ({}, "")
    result.update(
        changed=False,
        npu_devices=devices,
        npu_health=health,
        npu_error=npu_error,
        listening=listening_ports(),
        links=link_states(devices, params["hccn_tool"]) if params["links"] and devices else {},
        paths=dict((path, os.path.exists(path)) for path in params["paths"]),
        models=model_states(params["model_dirs"]),
        free_mb=free_mb(params["disk_path"]),
        interfaces=interfaces,
        default_interface=default_interface,
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
