# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""status.yml: one row per container from docker inspect, and the KV conductor's registrations per publishing pod."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONTAINER_LABEL,
    PORTS_LABEL,
    PUBLISHING_ROLES,
    ROLE_LABEL,
    ROLE_ORDER,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import compress_numbers, natural_key, render_table


def parse_time(text):
    if not text or str(text).startswith("0001-"):
        return None
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?", str(text))
    if not match:
        return None
    stamp = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")
    zone = match.group(2)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        from datetime import timedelta
        stamp -= sign * timedelta(hours=hours, minutes=minutes)
    return stamp.replace(tzinfo=timezone.utc)


def human_duration(seconds) -> str:
    seconds = int(max(0, seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def npus_of(devices) -> str:
    ids = []
    for device in devices or []:
        path = device.get("PathOnHost", "") if isinstance(device, dict) else str(device).split(":", maxsplit=1)[0]
        match = re.search(r"/dev/davinci(\d+)$", path)
        if match:
            ids.append(int(match.group(1)))
    return ",".join(str(i) for i in sorted(ids))


def container_row(host: str, info: dict, now=None) -> dict:
    """One status row from ``docker inspect`` output (as returned by community.docker.docker_container_info)."""
    info = info or {}
    state = info.get("State") or {}
    labels = (info.get("Config") or {}).get("Labels") or {}
    now_dt = parse_time(now) or datetime.now(timezone.utc)
    uptime = ""
    if state.get("Running"):
        started = parse_time(state.get("StartedAt"))
        if started:
            uptime = human_duration((now_dt - started).total_seconds())
    env = dict(str(item).split("=", 1) for item in (info.get("Config") or {}).get("Env") or [] if "=" in str(item))
    status = state.get("Status") or ("running" if state.get("Running") else "unknown")
    if not state.get("Running") and state.get("ExitCode") not in (None, 0):
        status = f"{status}({state.get('ExitCode')})"
    return {
        "host": host,
        "role": labels.get(ROLE_LABEL, ""),
        "container": labels.get(CONTAINER_LABEL) or str(info.get("Name", "")).lstrip("/"),
        "state": status,
        "uptime": uptime,
        "restarts": info.get("RestartCount", 0),
        "ports": labels.get(PORTS_LABEL, ""),
        "npus": npus_of((info.get("HostConfig") or {}).get("Devices")),
        "image": str(info.get("Image", "")),
        # what runs: the image as the container was created from it, and its id (during a roll the same tag may
        # name two images)
        "image_name": image_shown(info),
        "health": str((state.get("Health") or {}).get("Status") or "-"),  # Docker's healthcheck; '-': none
        "ip": env.get("POD_IP", ""),  # host networking: the host's address the plan gave the container
    }


STATUS_COLUMNS = [("host", "HOST"), ("role", "ROLE"), ("container", "CONTAINER"), ("state", "STATE"),
                  ("health", "HEALTH"), ("uptime", "UPTIME"), ("restarts", "RESTARTS"), ("image_name", "IMAGE"),
                  ("ports", "PORTS"), ("npus", "NPUS"), ("npu_health", "NPU HEALTH")]


def npu_health_shown(npus, reading) -> str:
    """The NPU HEALTH cell of a container: ``OK`` when npu-smi reports every planned NPU OK, else ``<id>:<health>``
    of each one that is not (what its host's healer last read, rule ``npu_unhealthy``); ``-`` not read yet; empty
    without NPUs."""
    if not npus:
        return ""
    health = (reading or {}).get("npus") if isinstance(reading, dict) else None
    if not isinstance(health, dict) or not health:
        return "-"
    bad = ["%s:%s" % (npu, state) for npu, state in sorted(health.items(), key=lambda kv: int(kv[0])) if state != "OK"]
    return ",".join(bad) or "OK"


def image_shown(info: dict) -> str:
    """``name:tag (short id)`` of a container's image, from its inspection."""
    name = str(((info or {}).get("Config") or {}).get("Image") or "")
    image_id = str((info or {}).get("Image") or "")
    short = image_id.split(":", 1)[-1][:12]
    if name.startswith("sha256:"):  # created from an id: the id says it all
        name = ""
    if name and short:
        return "%s (%s)" % (name, short)
    return name or short or "-"


def status_rows(per_host: dict, now=None, npu_health=None) -> list:
    """``{host: [inspect, ...]}`` -> rows sorted by role order, then container name. ``npu_health``: ``{host:
    {container: {"npus": {id: health}}}}``, the readings of each host's healer (its state file's ``npu_health``)."""
    rows = []
    for host, infos in (per_host or {}).items():
        readings = ((npu_health or {}).get(host) or {}) if isinstance(npu_health, dict) else {}
        for info in infos or []:
            row = container_row(host, info, now)
            row["npu_health"] = npu_health_shown(row["npus"], readings.get(row["container"]) if isinstance(
                readings, dict) else None)
            rows.append(row)
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r["role"], 9), natural_key(r["container"]), r["host"]))


def conductor_url(rows) -> str:
    """``http://<ip>:<port>`` of the job's KV conductor (its row: host address and its one port), or ''."""
    for row in rows or []:
        if row.get("role") == "kv_conductor" and row.get("ip") and str(row.get("ports") or "").strip():
            return "http://%s:%s" % (row["ip"], str(row["ports"]).split(",", maxsplit=1)[0])
    return ""


REGISTRATION_COLUMNS = [("container", "PUBLISHER"), ("rank", "DP RANK"), ("instance", "INSTANCE"),
                        ("endpoint", "KV-EVENT ENDPOINT")]


def registration_rows(rows, services) -> list:
    """Per registration the conductor lists (``GET /services``), the publishing pod whose address and ports have
    its endpoint; a running publishing pod the conductor lists nothing of gets a row ``not registered``."""
    owner = {}
    for row in rows or []:
        if row.get("role") in PUBLISHING_ROLES and row.get("ip"):
            for port in str(row.get("ports") or "").split(","):
                owner["tcp://%s:%s" % (row["ip"], port.strip())] = row["container"]
    out = []
    for service in (services or {}).get("services") or []:
        if isinstance(service, dict):
            out.append({"container": owner.get(service.get("Endpoint"), "? (no pod of the job)"),
                        "rank": service.get("DPRank"), "instance": service.get("InstanceID"),
                        "endpoint": service.get("Endpoint")})
    listed = {r["container"] for r in out}
    out += [{"container": r["container"], "rank": "-", "instance": "not registered", "endpoint": ""}
            for r in rows or [] if r.get("role") in PUBLISHING_ROLES and r["container"] not in listed]
    return sorted(out, key=lambda r: (natural_key(r["container"]), str(r["rank"])))


def _port_ranges(ports) -> str:
    """'3026,60000,60001,60002' -> '3026,60000-60002' (anything else as it is)."""
    items = [p.strip() for p in str(ports or "").split(",") if p.strip()]
    return compress_numbers(int(p) for p in items) if items and all(p.isdigit() for p in items) else str(ports or "")


def status_table(rows, services=None) -> str:
    """The status table; with ``services`` (the KV conductor's ``GET /services`` answer, or a string saying why it
    could not be read) a second table of its registrations per publishing pod."""
    if not rows:
        return "no container of this job on the hosts"
    shown = [dict(r, ports=_port_ranges(r.get("ports"))) for r in rows]  # an engine binds 32 HCCL ports in a row
    text = render_table(shown, STATUS_COLUMNS)
    if services is None:
        return text
    if not isinstance(services, dict):
        return text + "\n\nKV conductor registrations: %s" % (services or "not read")
    return (text + "\n\nKV conductor registrations (%d):\n" % len((services.get("services") or []))
            + render_table(registration_rows(rows, services), REGISTRATION_COLUMNS))
