# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The NPU prechecks of a deploy (no I/O): health, NPU network, management devices, driver and firmware versions,
judged from what motor_host_probe read on each engine host; the job-wide NPU network (TLS switch, device addresses
of instances that span hosts) across all of them.

Each finding is ``(check, what, fix)``; precheck.py turns them into ``<host>: <check>: <what> (fix: <how>)``.
"""

from __future__ import annotations

import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hccl import HCCL_PORT_RANGE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_reach import reach_findings

# npu-smi's Health column: OK, Warning (a minor alarm, e.g. a temperature or ECC notice; the chip works), Alarm
# (major), Critical. Warning deploys with a warning; anything but OK and Warning is refused.
HEALTH_OK = "OK"
HEALTH_WARNING = "Warning"
# The image label that declares the CANN version of the image (reported next to the host's driver and firmware).
CANN_LABEL = "io.pymotor.cann.version"
RDMA_DEVICE = "/dev/infiniband"
NETWORK_FIX = ("configure the device in /etc/hccn.conf (address_<id>, netmask_<id>) and apply it with hccn_tool "
               "-i <id> -ip -s address <ip> netmask <mask>, or leave the NPU out with motor_npu_ids and re-plan")


def version_key(text) -> tuple:
    """Numbers of a version (``24.1.rc3.b020`` -> (24, 1, 3, 20)); an ``rc`` sorts below the release of its number."""
    parts = []
    for token in re.findall(r"[A-Za-z]+|\d+", str(text or "")):
        if token.isdigit():
            parts.append(int(token))
        elif token.lower() == "rc" and len(parts) == 2:
            parts.append(-1)  # 24.1.rc3 < 24.1.0
    return tuple(parts)


def planned_npus(containers: list) -> list:
    return list(dict.fromkeys(n for c in containers for n in c.get("npu_ids") or []))


def health_findings(npus: list, probe: dict) -> tuple:
    """(problems, warnings) of the planned NPUs' presence and health."""
    problems, warnings = [], []
    health_of = probe.get("npu_health") or {}
    npu_error = probe.get("npu_error")
    for npu in npus:
        health = health_of.get(str(npu), "absent")
        if npu not in (probe.get("npu_devices") or []) or (health == "absent" and not npu_error):
            problems.append(("NPU %s" % npu, "/dev/davinci%s is not listed by npu-smi info" % npu,
                             "check the driver with npu-smi info, or set motor_npu_ids for this host and re-plan"))
        elif npu_error:
            problems.append(("NPU %s health" % npu, npu_error, "install the Ascend driver (npu-smi) on this host"))
        elif health == HEALTH_WARNING:
            warnings.append(("NPU %s health" % npu, "npu-smi info reports Warning; deploying anyway",
                             "see npu-smi info -t health -i <card> for the alarm"))
        elif health != HEALTH_OK:
            problems.append(("NPU %s health" % npu, "npu-smi info reports %s" % health,
                             "repair the NPU (npu-smi info -t health -i <card> names the alarm), or leave it out with "
                             "motor_npu_ids and re-plan"))
    return problems, warnings


def spod_findings(npus: list, probe: dict, hardware_type) -> list:
    """On an A3 host, each planned NPU (device) has a super device id: upstream's hccl_tools.py reads
    ``npu-smi info -t spod-info -i <card> -c <chip>`` at every engine start for the rank table's super_device_id and
    fails the start without one. A probe without ``npu_spod`` (an older probe's result) judges nothing."""
    if hardware_type != "800I_A3" or "npu_spod" not in probe or probe.get("npu_error"):
        return []
    spod = probe.get("npu_spod") or {}
    out = []
    for npu in npus:
        entry = spod.get(str(npu)) or {}
        if not entry.get("sdid"):
            out.append(("NPU %s super pod" % npu,
                        "npu-smi info -t spod-info -i %s -c %s gives no SDID (%s)"
                        % (int(npu) // 2, int(npu) % 2, entry.get("error") or "not read: npu-smi info -m lists one "
                           "die per NPU"),
                        "upstream's hccl_tools.py needs it at every engine start on A3: update the NPU driver and "
                        "firmware until npu-smi answers it (a host that is no A3: its real motor_hardware_type in the inventory)"))
    return out


def network_findings(npus: list, probe: dict) -> list:
    """Each planned NPU has a device address (upstream's hccl_tools.py reads ``hccn_tool -i N -ip -g`` at engine
    start and gives up after 10 x 3 s) and its link is up."""
    out = []
    links = probe.get("links") or {}
    network = probe.get("npu_network") or {}
    for npu in npus:
        entry = network.get(str(npu)) or {}
        if not entry.get("ip"):
            said = entry.get("error") or "not read"
            out.append(("NPU %s address" % npu, "hccn_tool -i %s -ip -g has no device IP (%s)" % (npu, said),
                        NETWORK_FIX))
        link = links.get(str(npu), "not read")
        if link != "UP":
            out.append(("NPU %s link" % npu, "hccn_tool -i %s -link -g says %s" % (npu, link),
                        "check the NPU port's cabling and switch port (hccn_tool -i %s -lldp -g), and /etc/hccn.conf"
                        % npu))
    return out


def device_findings(containers: list, probe: dict) -> list:
    """Every device node a planned container gets besides its /dev/davinciN exists on the host."""
    nodes = probe.get("device_nodes")
    if not isinstance(nodes, dict):
        return []
    wanted = dict.fromkeys(d.split(":", 1)[0] for c in containers for d in c.get("devices") or []
                           if not re.match(r"/dev/davinci\d+:", d))
    out = []
    for path in wanted:
        if not nodes.get(path):
            fix = ("install the RDMA (RoCE) driver of the NPU NICs, or use the KV pool over another protocol"
                   if path == RDMA_DEVICE else
                   "install (or reload) the Ascend NPU driver: npu-smi info must list every NPU")
            out.append(("device %s" % path, "%s is missing" % path, fix))
    return out


def _in_range(version: str, bounds: str) -> bool | None:
    """Whether ``version`` lies in ``[lo,hi]`` (the driver's compatible_version_fw); None when not a range."""
    match = re.fullmatch(r"\[\s*([^,\]]+)\s*,\s*([^\]]+)\]", str(bounds or "").strip())
    if not match or not version:
        return None
    key = version_key(version)[:3]
    return version_key(match.group(1))[:3] <= key <= version_key(match.group(2))[:3]


def version_findings(probe: dict, settings: dict, image_labels: dict) -> tuple:
    """(problems, warnings): the driver against motor_service_min_driver_version (the oldest driver the image's
    CANN supports), the firmware against the driver's own compatible range, and the image's declared CANN version
    next to them."""
    versions = probe.get("versions")
    if not isinstance(versions, dict):
        return [], []
    driver = (versions.get("driver") or {}).get("Version") or ""
    firmware = (versions.get("firmware") or {}).get("Version") or ""
    problems, warnings = [], []
    minimum = str(settings.get("min_driver_version") or "")
    cann = str((image_labels or {}).get(CANN_LABEL) or "")
    if not driver:
        problems.append(("driver version", "no Version in the driver's version.info",
                         "install the Ascend NPU driver (its version.info is next to its lib64)"))
    elif minimum and version_key(driver) < version_key(minimum):
        problems.append(("driver version", "driver %s is older than %s, the oldest the image's CANN%s supports"
                         % (driver, minimum, " " + cann if cann else ""),
                         "upgrade the Ascend driver and firmware to %s or newer, or use an image built for this "
                         "driver's CANN" % minimum))
    elif cann and not minimum:
        warnings.append(("driver version", "the image declares CANN %s; the host has driver %s, firmware %s"
                         % (cann, driver, firmware or "unknown"),
                         "check Huawei's CANN/HDK compatibility table and set motor_service_min_driver_version"))
    fit = _in_range(firmware, (versions.get("driver") or {}).get("compatible_version_fw"))
    if fit is False:
        warnings.append(("firmware version", "firmware %s is outside the driver %s's compatible range %s"
                         % (firmware, driver, versions["driver"]["compatible_version_fw"]),
                         "upgrade the firmware and the driver from the same Ascend HDK release"))
    return problems, warnings


def _port_set(text: str) -> set:
    out = set()
    for item in str(text or "").split(","):
        lo, dummy, hi = item.strip().partition("-")
        if lo.isdigit():
            out.update(range(int(lo), int(hi if hi.isdigit() else lo) + 1))
    return out


def port_ranges_text(ports) -> str:
    """Ports as the kernel writes ip_local_reserved_ports: sorted, runs merged into lo-hi, comma-separated."""
    runs = []
    for port in sorted(set(ports)):
        if runs and port == runs[-1][1] + 1:
            runs[-1][1] = port
        else:
            runs.append([port, port])
    return ",".join(str(lo) if lo == hi else "%s-%s" % (lo, hi) for lo, hi in runs)


RESERVED_PORTS_KEY = "net.ipv4.ip_local_reserved_ports"


def reserve_ports_command(ports, reserved_text) -> str:
    """The one command that reserves ``ports`` and keeps what is reserved already: ``sysctl -w`` replaces the whole
    list, so the new value is the union. ``reserved_text`` None (the host's list was not read): a command that reads
    it first and appends."""
    if reserved_text is None:
        return ('current=$(sysctl -n %s); sysctl -w %s="${current:+$current,}%s"'
                % (RESERVED_PORTS_KEY, RESERVED_PORTS_KEY, port_ranges_text(ports)))
    return "sysctl -w %s=%s" % (RESERVED_PORTS_KEY, port_ranges_text(_port_set(reserved_text) | set(ports)))


def hccl_port_findings(containers: list, probe: dict) -> list:
    """At most one warning per host: the HCCL ranges (port_map.hccl) inside the kernel's ephemeral range and not
    reserved there - an outgoing connection may hold one of their ports when HCCL binds (CANN's HCCL_IF_BASE_PORT
    notes: reserve them). The fix is one sysctl line for every range of the host, keeping what is reserved already."""
    local = probe.get("local_ports")
    bounds = (local or {}).get("range") if isinstance(local, dict) else None
    if not bounds or len(bounds) != 2 or not all(str(b).isdigit() for b in bounds):
        return []
    lo, hi = int(bounds[0]), int(bounds[1])
    reserved_text = local.get("reserved")
    reserved = _port_set(reserved_text)
    needed, named = set(), []
    for cont in containers:
        base = (cont.get("port_map") or {}).get("hccl")
        if base is None:
            continue
        hccl = [p for p in range(base, base + HCCL_PORT_RANGE) if lo <= p <= hi and p not in reserved]
        if hccl:
            needed.update(hccl)
            named.append("%s-%s (%s)" % (min(hccl), max(hccl), cont["name"]))
    if not needed:
        return []
    command = reserve_ports_command(needed, None if reserved_text is None else str(reserved_text).strip())
    return [("HCCL ports", "%s lie in the ephemeral port range %s-%s and are not reserved" % (", ".join(named), lo, hi),
             "reserve them, keeping what is reserved already: %s (and the same value in /etc/sysctl.d/ to keep it "
             "after a reboot)" % command)]


def job_network_findings(plan: dict, probes: dict, check_links) -> dict:
    """host -> [(check, what, fix)] of the job-wide NPU network: the TLS switch of every planned NPU on every host is
    the same (hccn_tool -i N -tls -g; HCCL links between devices with different switches fail), and the device
    addresses of the hosts an instance spans, or that its prefill and decode instances share, are distinct, and
    the device pings of the reach step (npu_reach.py) answered."""
    out = {}
    if not check_links:
        return out
    for host, found in reach_findings(probes).items():
        out.setdefault(host, []).extend(found)
    containers = [c for c in plan.get("containers") or [] if c.get("npu_ids")]
    seen = {}  # tls value -> [(host, npu)]
    for cont in containers:
        network = ((probes or {}).get(cont["host"]) or {}).get("npu_network") or {}
        for npu in cont["npu_ids"]:
            tls = (network.get(str(npu)) or {}).get("tls")
            if tls:
                seen.setdefault(tls, []).append((cont["host"], npu))
    if len(seen) > 1:
        common = max(seen, key=lambda v: (len(seen[v]), v))
        for value, where in sorted(seen.items()):
            if value == common:
                continue
            for host, npu in where:
                out.setdefault(host, []).append((
                    "NPU %s TLS" % npu, "hccn_tool -i %s -tls -g says tls switch[%s], most planned NPUs of the job "
                    "have [%s]" % (npu, value, common),
                    "set the same switch on every NPU: hccn_tool -i %s -tls -s enable %s" % (npu, common)))
    hosts = sorted({c["host"] for c in containers})
    if len(hosts) > 1:
        owner = {}
        for cont in containers:
            network = ((probes or {}).get(cont["host"]) or {}).get("npu_network") or {}
            for npu in cont["npu_ids"]:
                ip = (network.get(str(npu)) or {}).get("ip")
                if not ip:
                    continue
                first = owner.setdefault(ip, (cont["host"], npu))
                if first[0] != cont["host"]:
                    out.setdefault(cont["host"], []).append((
                        "NPU %s address" % npu, "device IP %s is also NPU %s's on %s: KV transfer between the hosts "
                        "cannot reach both" % (ip, first[1], first[0]), NETWORK_FIX))
    return out
