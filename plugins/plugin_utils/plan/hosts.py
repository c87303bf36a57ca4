# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The inventory view of the hosts: address, NIC, groups, hardware type, NPU ids, reserved ports."""

from __future__ import annotations

import bisect
import difflib
import ipaddress
import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONTROL_GROUP,
    ENGINE_GROUP,
    FIXED_NPU_HARDWARE,
    HARDWARE_NPUS,
    PORT_MAX,
    PORT_MIN,
    Problem,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int, kind
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import is_ip


NIC_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


# On an A5 host motor_npu_ids may name ids up to the largest NPU count of a known host type (16), whatever the number
# its type name ends with (issue 36); an 800I A2/A3 has the NPUs of its product.
NPU_ID_CEILING = max(HARDWARE_NPUS.values())
# The per-host inventory variables the plan reads (see the module docstring).
HOST_VARS = ("motor_host_ip", "motor_nic", "motor_npu_ids", "motor_reserved_ports", "motor_hardware_type",
             "motor_host_labels")


def misspelt_host_vars(names) -> list:
    """(name, the host variable it is close to) for each name that is not a host variable of the plan but looks
    like one; other motor_* variables (role settings, motor_image...) are far from all of them."""
    out = []
    for name in sorted(set(names or [])):
        if name in HOST_VARS:
            continue
        close = difflib.get_close_matches(str(name), HOST_VARS, n=1, cutoff=0.8)
        if close:
            out.append((str(name), close[0]))
    return out


def parse_int_list(value, path, what, problems, lo, hi):
    """Parse ints / 'a-b' ranges given as a list or a comma separated string into [(lo, hi)]."""
    items = value
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        items = [value]
    if not isinstance(items, (list, tuple)):
        problems.append(Problem(path, f"must be a list of {what}, got {kind(value)}",
                                f"e.g. [1, 2] or \"{lo}-{lo + 3}\""))
        return None
    ranges = []
    for idx, item in enumerate(items):
        parts = [item]
        if isinstance(item, str):
            parts = [p.strip() for p in item.split(",") if p.strip()]
        for part in parts:
            n = as_int(part)
            if n is not None:
                rng = (n, n)
            elif isinstance(part, str) and re.fullmatch(r"\d+\s*-\s*\d+", part):
                a, b = (int(x) for x in part.split("-"))
                rng = (a, b)
            else:
                problems.append(Problem(f"{path}[{idx}]", f"{part!r} is not a {what[:-1]} or a range",
                                        f"use an integer or \"lo-hi\" between {lo} and {hi}"))
                continue
            if rng[0] > rng[1] or rng[0] < lo or rng[1] > hi:
                problems.append(Problem(f"{path}[{idx}]", f"{part!r} is outside {lo}..{hi} or reversed",
                                        f"use values between {lo} and {hi}"))
                continue
            ranges.append(rng)
    return ranges


def merge_ranges(ranges):
    merged = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


class Host:
    __slots__ = ("name", "index", "ip", "nic", "hw", "npu_ids", "free", "reserved", "reserved_lo",
                 "engine", "control", "ports", "spans", "event_ranks", "labels")

    def __init__(self, name, index):
        self.name = name
        self.index = index
        self.ip = ""
        self.nic = "eth0"
        self.hw = ""
        self.npu_ids = []
        self.free = {}
        self.reserved = []
        self.reserved_lo = []
        self.engine = False
        self.control = False
        self.ports = {}  # port -> container
        self.spans = []  # (lo, hi, container): a KV-event rank pool's ports, taken as one block (take_span)
        self.event_ranks = []  # the rank pools (ranges) of the publishing pods on this host
        self.labels = {}

    # ports -----------------------------------------------------------------------------------
    def blocker(self, start, length):
        """None when start..start+length-1 is free, else the next start worth trying."""
        end = start + length - 1
        if start < PORT_MIN:
            return PORT_MIN
        if end > PORT_MAX:
            return PORT_MAX + 1
        if self.reserved:
            i = bisect.bisect_right(self.reserved_lo, end) - 1
            # any reserved interval that overlaps [start, end]: scan back while hi >= start
            while i >= 0 and self.reserved[i][1] >= start:
                if self.reserved[i][0] <= end:
                    return self.reserved[i][1] + 1
                i -= 1
        for lo, hi, _owner in self.spans:
            if lo <= end and hi >= start:
                return hi + 1
        for port in range(end, start - 1, -1):
            if port in self.ports:
                return port + 1
        return None

    def busy(self, start, end):
        """True when a port of start..end (inclusive, in range) is reserved or taken."""
        if self.reserved:
            i = bisect.bisect_right(self.reserved_lo, end) - 1
            if i >= 0 and self.reserved[i][1] >= start:  # reserved intervals are merged: only this one can overlap
                return True
        if any(lo <= end and hi >= start for lo, hi, _owner in self.spans):
            return True
        if len(self.ports) <= end - start:  # the event-base search asks for whole rank pools: mostly few ports taken
            return any(start <= port <= end for port in self.ports)
        return not self.ports.keys().isdisjoint(range(start, end + 1))

    def owner(self, port):
        """The container that took ``port``, else None."""
        if port in self.ports:
            return self.ports[port]
        return next((owner for lo, hi, owner in self.spans if lo <= port <= hi), None)

    def is_reserved(self, port):
        if not self.reserved:
            return False
        i = bisect.bisect_right(self.reserved_lo, port) - 1
        return i >= 0 and self.reserved[i][1] >= port

    def take(self, start, length, owner):
        self.ports.update(dict.fromkeys(range(start, start + length), owner))

    def take_span(self, start, length, owner):
        """Take start..start+length-1 as one block: a rank pool's ports, many and only ever checked as a block."""
        if length > 0:
            self.spans.append((start, start + length - 1, owner))

    def alloc(self, preferred, length, owner):
        """Lowest free range of ``length`` ports starting at or above ``preferred``; None if none."""
        start = max(preferred, PORT_MIN)
        while start + length - 1 <= PORT_MAX:
            nxt = self.blocker(start, length)
            if nxt is None:
                self.take(start, length, owner)
                return start
            start = nxt
        return None

    # KV-event ranks -------------------------------------------------------------------------
    def shares_rank(self, pool):
        """True when a publishing pod on this host may get a DP rank of ``pool`` (a range) too."""
        return any(r.start < pool.stop and pool.start < r.stop for r in self.event_ranks)

    def rank_spans(self):
        """The DP ranks of this host's publishing pods as merged inclusive (lo, hi) spans, ascending."""
        return merge_ranges((r.start, r.stop - 1) for r in self.event_ranks if r)

    # NPUs ------------------------------------------------------------------------------------
    def find_block(self, count, align):
        """Lowest start id of ``count`` consecutive free NPU ids (start % align == 0), else None."""
        run = 0
        start = prev = None
        for npu in self.npu_ids:
            if self.free[npu] and run and npu == prev + 1:
                run += 1
            elif self.free[npu] and npu % align == 0:
                start, run = npu, 1
            else:
                run = 0
            prev = npu
            if run == count:
                return start
        return None


def parse_hosts(hosts, hw_default, problems, warnings, job_type_known=True):
    if not isinstance(hosts, dict) or not hosts:
        problems.append(Problem("hosts", "must be a non-empty mapping of inventory hostname to host variables",
                                f"put hosts in the {ENGINE_GROUP} and {CONTROL_GROUP} groups"))
        return []
    parsed = []
    seen_ip = {}
    for index, (name, hvars) in enumerate(hosts.items()):
        path = f"hosts.{name}"
        if hvars is None:
            hvars = {}
        if not isinstance(hvars, dict):
            problems.append(Problem(path, f"must be a mapping of host variables, got {kind(hvars)}", ""))
            continue
        host = Host(str(name), index)
        # address
        raw_ip = hvars.get("motor_host_ip")
        if raw_ip in (None, "") and hvars.get("ansible_host") not in (None, ""):
            raw_ip = hvars.get("ansible_host")
            if not is_ip(raw_ip):  # a DNS name reaches the host, but is not the address PyMotor's components use
                problems.append(Problem(f"{path}.motor_host_ip", f"missing, and ansible_host {raw_ip!r} is a host "
                                        "name, not an IP address",
                                        "set motor_host_ip to the address other hosts reach this one on, or plan "
                                        "with discovery (deploy.yml, or plan.yml -e motor_plan_discover=true), which "
                                        "takes the address of motor_nic or of the default route's interface"))
                raw_ip = None
        elif raw_ip in (None, ""):
            problems.append(Problem(f"{path}.motor_host_ip", "missing",
                                    "set motor_host_ip (or ansible_host) to the host's IP address"))
        if raw_ip not in (None, ""):
            try:
                host.ip = str(ipaddress.ip_address(str(raw_ip).strip()))
            except ValueError:
                problems.append(Problem(f"{path}.motor_host_ip", f"{raw_ip!r} is not an IP address",
                                        "set motor_host_ip to the address other hosts reach this one on"))
        if host.ip:
            if host.ip in seen_ip:
                problems.append(Problem(f"{path}.motor_host_ip", f"{host.ip} is also the address of host {seen_ip[host.ip]}",
                                        "list each machine once; put it in both groups if it has both roles"))
            else:
                seen_ip[host.ip] = host.name
        # nic
        nic = hvars.get("motor_nic")
        if nic in (None, ""):
            nic = "eth0"
        if not isinstance(nic, str) or not NIC_RE.match(nic):
            problems.append(Problem(f"{path}.motor_nic", f"{nic!r} is not a network interface name",
                                    "e.g. eth0 or enp189s0f0"))
        else:
            host.nic = nic
        # groups
        groups = hvars.get("group_names")
        if groups is None:
            host.engine = host.control = True
        elif not isinstance(groups, (list, tuple)):
            problems.append(Problem(f"{path}.group_names", "must be a list of group names", ""))
        else:
            host.engine = ENGINE_GROUP in groups
            host.control = CONTROL_GROUP in groups
        # hardware type
        hw = hvars.get("motor_hardware_type")
        if hw in (None, ""):
            hw = hw_default
        if hw not in HARDWARE_NPUS:
            problems.append(Problem(f"{path}.motor_hardware_type", f"{hw!r} is not supported",
                                    "use one of " + ", ".join(HARDWARE_NPUS)))
            hw = hw_default
        host.hw = hw
        # NPUs: the inventory's motor_npu_ids, else the devices discovery read, else every id of the hardware type
        # (issue 36: a host's NPUs come from the host, not from the number the type name ends with)
        probed = hvars.get("motor_npu_probed")
        if hw in FIXED_NPU_HARDWARE:
            max_npus = HARDWARE_NPUS[hw]
        else:
            max_npus = max(HARDWARE_NPUS.get(hw, 16), NPU_ID_CEILING, len(probed or []))
        raw_ids = hvars.get("motor_npu_ids")
        if raw_ids is None:
            ids = [i for i in probed if i < max_npus] if probed else list(range(HARDWARE_NPUS.get(hw, 16)))
        else:
            ranges = parse_int_list(raw_ids, f"{path}.motor_npu_ids", "NPU ids", problems, 0, max_npus - 1)
            ids = []
            for lo, hi in ranges or []:
                ids.extend(range(lo, hi + 1))
            if len(set(ids)) != len(ids):
                problems.append(Problem(f"{path}.motor_npu_ids", "lists an NPU id twice", "list each id once"))
            ids = sorted(set(ids))
        host.npu_ids = ids
        host.free = {npu: True for npu in ids}
        # reserved ports
        raw_res = hvars.get("motor_reserved_ports")
        if raw_res not in (None, "", []):
            ranges = parse_int_list(raw_res, f"{path}.motor_reserved_ports", "ports", problems, 1, PORT_MAX)
            host.reserved = merge_ranges(ranges or [])
            host.reserved_lo = [rng[0] for rng in host.reserved]
        # labels (the Kubernetes node labels of PyMotor's deployer, e.g. card_type for PD heterogeneous placement)
        labels = hvars.get("motor_host_labels")
        if labels not in (None, "", {}):
            if not isinstance(labels, dict) or not all(isinstance(v, (str, int)) for v in labels.values()):
                problems.append(Problem(f"{path}.motor_host_labels", f"must map label names to values, got {kind(labels)}",
                                        "e.g. {card_type: Ascend950PR}"))
            else:
                host.labels = {str(k): str(v) for k, v in labels.items()}
        for name, meant in misspelt_host_vars(hvars.get("motor_var_names")):
            problems.append(Problem(f"{path}.{name}", "is not a host variable of the plan, so it would be ignored",
                                    f"did you mean {meant}? (the plan reads {', '.join(HOST_VARS)})"))
        # job_type_known false: the configuration gives no valid type, its own error says so (hw_default is only a
        # stand-in then, naming it would be a second, false error)
        if job_type_known and host.engine and hw != hw_default:  # issue 36: refused, where it was a warning and the host stayed idle
            problems.append(Problem(f"{path}.motor_hardware_type",
                                    f"{hw} host in motor_engine_hosts, but the job's hardware_type is {hw_default}",
                                    "correct motor_hardware_type of the host or motor_deploy_config.hardware_type, or "
                                    "remove the host from motor_engine_hosts"))
        parsed.append(host)
    return parsed
