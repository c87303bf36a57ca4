# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What pymotor.ascend.motor_host_probe reads on a host, with the Python standard library only: its action plugin
runs it as a plain script (no AnsiballZ, no Ansible module_utils to import on the host; plugin_utils/host_script.py),
the module file through AnsiballZ where a connection cannot pipeline."""

from __future__ import annotations

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
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import (
    DockerClient,
    DockerError,
    DockerUnavailable,
)
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_npu_smi import parse_npu_smi

LISTEN = "0A"
# hccn_tool queries at once (read-only; 3 per NPU: 48 on an A3 host one after the other took seconds)
QUERY_THREADS = 8


# The fields of a container's inspection that verify reads (plugin_utils/operations/verify.py observed_from_probes).
INSPECTED = ("Id", "Name", "Image", "RestartCount", "State")


def read_docker(params, job_id, image):
    out = {"can_talk_to_docker": False, "host_info": {}, "images": [], "containers": []}
    try:
        client = DockerClient.from_params(params)
        out["host_info"] = {"ServerVersion": client.get_json("/version").get("Version", "")}
        # docker run --init needs the engine's docker-init: its commit ("N/A" when dockerd cannot run it)
        out["host_info"]["InitVersion"] = (client.get_json("/info").get("InitCommit") or {}).get("ID")
        out["can_talk_to_docker"] = True
        found = client.inspect_image(image) if image else None
        out["images"] = [{"Id": found["Id"], "Labels": (found.get("Config") or {}).get("Labels") or {}}] if found else []
        out["containers"] = client.job_containers(job_id)
        if params.get("inspect"):  # verify's discovery: state, image and restarts of each, in the same run
            # only what verify judges: a whole inspection carries the container's environment (secrets) and its
            # config to the controller, for every container of every host
            out["inspections"] = [dict((key, found.get(key)) for key in INSPECTED)
                                  for found in (client.inspect_container(row["Id"]) for row in out["containers"])
                                  if found is not None]  # None: removed between the list and the inspection
    except DockerUnavailable as exc:
        out["msg"] = str(exc)
    except (DockerError, KeyError, TypeError, AttributeError) as exc:  # an engine that answers badly is reported
        out["can_talk_to_docker"] = False                               # like one that does not answer
        out["msg"] = "Docker API error: %s" % str(exc)
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


def _each(work, items):
    """[work(item) for item in items], the items at the same time (each waits on a tool process), in their order."""
    items = list(items)
    if len(items) < 2:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(QUERY_THREADS, len(items))) as pool:
        return list(pool.map(work, items))


def two_dies_per_npu(mapping_out):
    """Whether ``npu-smi info -m`` lists a second Ascend die (chip 1 with a logic id) on some NPU: an A3 module (an A2
    NPU's chip 1 is its MCU, without a logic id)."""
    for line in mapping_out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1] == "1" and fields[2].isdigit():
            return True
    return False


def parse_spod(text):
    """The super device id (SDID) in ``npu-smi info -t spod-info -i N -c C`` output, '' when there is none. Upstream's
    hccl_tools.py takes the value of its first line (``SDID : 123``) for the rank table's super_device_id."""
    match = re.search(r"^\s*SDID\s*:\s*(\S+)", text or "", re.MULTILINE)
    return match.group(1) if match else ""


def npu_spod(tool, devices):
    """Device id -> its SDID, or the tool's error, from ``npu-smi info -t spod-info -i <id // 2> -c <id % 2>`` (the
    card and chip upstream's hccl_tools.py asks on A3, at every engine start, for the rank table)."""
    def spod(device):
        rc, out, err = _run([tool, "info", "-t", "spod-info", "-i", str(device // 2), "-c", str(device % 2)])
        sdid = parse_spod(out) if rc == 0 else ""
        return {"sdid": sdid} if sdid else {"sdid": "", "error": (out + err).strip() or "rc %d" % rc}

    return dict(zip([str(d) for d in devices], _each(spod, devices)))


def npu_health(devices=()):
    """(health per NPU id, error, super device ids): nothing to read on a host without NPU devices or npu-smi; the
    super device ids (``npu_spod``) only on a host whose NPUs hold two dies (A3), else {}."""
    tool = shutil.which("npu-smi", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/local/bin")
    if not tool:
        return {}, "npu-smi not found", {}
    rc, mapping_out, err = _run([tool, "info", "-m"])
    if rc != 0:
        return {}, "npu-smi info -m failed: %s" % (mapping_out + err).strip(), {}
    rc, info_out, err = _run([tool, "info"])
    if rc != 0:
        return {}, "npu-smi info failed: %s" % (info_out + err).strip(), {}
    spod = npu_spod(tool, devices) if two_dies_per_npu(mapping_out) else {}
    return parse_npu_smi(mapping_out, info_out), "", spod


def parse_topo(text):
    """NPU (device) id -> its CPU affinity (``144-167``) from ``npu-smi info -t topo`` (the NPU x NPU matrix and its
    last column, ``CPU Affinity``); {} when there is no such column."""
    lines = (text or "").splitlines()
    if not any("CPU Affinity" in line for line in lines):
        return {}
    out = {}
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and re.match(r"^NPU(\d+)$", fields[0]) and re.match(r"^\d+(-\d+)?(,\d+(-\d+)?)*$", fields[-1]):
            out[fields[0][3:]] = fields[-1]
    return out


def npu_topo():
    """(NPU id -> CPU affinity, error) from ``npu-smi info -t topo`` (read-only)."""
    tool = shutil.which("npu-smi", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/local/bin")
    if not tool:
        return {}, "npu-smi not found"
    rc, out, err = _run([tool, "info", "-t", "topo"])
    if rc != 0:
        return {}, "npu-smi info -t topo failed: %s" % (out + err).strip()
    return parse_topo(out), ""


def link_states(npu_ids, hccn_tool):
    def link(npu):
        if not os.path.exists(hccn_tool):
            return "hccn_tool not found"
        rc, out, err = _run([hccn_tool, "-i", str(npu), "-link", "-g"])
        match = re.search(r"link status:\s*(\w+)", out)
        return match.group(1) if rc == 0 and match else (out + err).strip() or "rc %d" % rc

    return dict(zip([str(npu) for npu in npu_ids], _each(link, npu_ids)))


def parse_ip(out):
    """The device address in ``hccn_tool -i N -ip -g`` output (``ipaddr:10.10.0.10``), '' when there is none."""
    match = re.search(r"ipaddr\s*:\s*([0-9A-Fa-f:.]+)", out)
    return match.group(1) if match else ""


def parse_tls(out):
    """The TLS switch (``'0'``/``'1'``) in ``hccn_tool -i N -tls -g`` output (``... tls switch[0] ...``), or ''."""
    match = re.search(r"tls switch\s*\[\s*(\d+)\s*\]", out)
    return match.group(1) if match else ""


def npu_network(npu_ids, hccn_tool):
    """NPU id -> {ip, tls} as hccn_tool reports them (read-only ``-g`` queries); the tool's error when it fails."""
    def network(npu):
        if not os.path.exists(hccn_tool):
            return {"ip": "", "tls": "", "error": "hccn_tool not found"}
        entry = {}
        rc, text, err = _run([hccn_tool, "-i", str(npu), "-ip", "-g"])
        entry["ip"] = parse_ip(text) if rc == 0 else ""
        if rc != 0 or not entry["ip"]:
            entry["error"] = (text + err).strip() or "rc %d" % rc
        rc, text, err = _run([hccn_tool, "-i", str(npu), "-tls", "-g"])
        entry["tls"] = parse_tls(text) if rc == 0 else ""
        return entry

    return dict(zip([str(npu) for npu in npu_ids], _each(network, npu_ids)))


def parse_version_info(text):
    """key -> value of a ``version.info`` file (``Version=24.1.0.3`` lines)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def driver_versions(driver_dir):
    """The driver's and the firmware's version.info (next to the driver directory), each key -> value ({} absent)."""
    base = os.path.dirname(driver_dir.rstrip("/")) or "/"
    return {"driver": parse_version_info(_read(os.path.join(driver_dir, "version.info"))),
            "firmware": parse_version_info(_read(os.path.join(base, "firmware", "version.info")))}


# The NPU management devices every engine container gets besides its /dev/davinciN, and the RDMA devices of a KV
# pool over rdma: whether they exist is read on every host with NPUs.
DEVICE_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc", "/dev/infiniband")


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


def probe(params, check_mode=False, diff=False):
    """The module's result for validated params (HOST_PROBE_ARGUMENT_SPEC in motor_arguments); read-only, so the
    same in check mode, and nothing to diff."""
    result = read_docker(params, params["job_id"], params["image"])
    interfaces, default_interface = read_interfaces()
    devices = sorted(int(p[len("/dev/davinci"):]) for p in glob.glob("/dev/davinci[0-9]*")
                     if p[len("/dev/davinci"):].isdigit())
    # the NPU tools' queries (read-only): npu-smi's beside hccn_tool's, which run QUERY_THREADS at a time
    links_on = bool(params["links"] and devices)
    (health, npu_error, spod), (topo, topo_error), (links, network) = _each(lambda read: read(), [
        lambda: npu_health(devices) if devices else ({}, "", {}),
        lambda: npu_topo() if devices else ({}, ""),
        lambda: (link_states(devices, params["hccn_tool"]), npu_network(devices, params["hccn_tool"]))
        if links_on else ({}, {}),
    ])
    result.update(
        changed=False,
        euid=os.geteuid(),  # the precheck skips what only root can read when this is not 0 (no become)
        npu_devices=devices,
        npu_health=health,
        npu_error=npu_error,
        npu_spod=spod,
        listening=listening_ports(),
        links=links,
        npu_network=network,
        versions=driver_versions(params["driver_dir"]) if devices else {},
        npu_topo={"cpus": topo, "online": _read("/sys/devices/system/cpu/online").strip(), "error": topo_error}
        if devices else {},
        device_nodes=dict((path, os.path.exists(path)) for path in DEVICE_NODES) if devices else {},
        local_ports={"range": _read("/proc/sys/net/ipv4/ip_local_port_range").split(),
                     "reserved": _read("/proc/sys/net/ipv4/ip_local_reserved_ports").strip()},
        paths=dict((path, os.path.exists(path)) for path in params["paths"]),
        models=model_states(params["model_dirs"]),
        free_mb=free_mb(params["disk_path"]),
        interfaces=interfaces,
        default_interface=default_interface,
    )
    return result
