# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Pure logic of the day-2 verbs (verify, status, collect_logs): no I/O, no Ansible objects.

- ``mask_secrets`` / ``mask_text``: hide credentials in rendered configs and log text.
- ``kv_event_shape`` / ``kv_format_verdict``: can the Mooncake conductor (dev/kv-indexer) read the engine's
  KV events? It decodes only the positional-array vLLM format; vLLM PR 42892 switched events to maps.
- ``verify_report``: judge the raw observations of playbooks/verify.yml against the plan.
- ``status_rows`` / ``render_table``: the compact container table of playbooks/status.yml.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import status_ok

MASK = "********"
SECRET_KEY_RE = re.compile(r"(api[_-]?key|password|passwd|secret|token|private[_-]?key|credential|"
                           r"(tls|ssl)[_-]?(key|cert_key|key_file|keyfile)|key_file|keyfile)", re.IGNORECASE)
# Keys that contain a secret-looking word but hold no secret (numbers and sizes of tokens).
NOT_SECRET_KEY_RE = re.compile(r"(max_tokens|_tokens$|tokens_|token_ids|tokenizer|num_.*token|token_budget|"
                               r"max_num_batched_tokens|block_size)", re.IGNORECASE)
_TEXT_SECRET_RE = re.compile(
    r"""(?P<key>["']?[A-Za-z0-9_.-]*(?:api[_-]?key|password|passwd|secret|private[_-]?key|access[_-]?token|"""
    r"""auth[_-]?token|bearer)[A-Za-z0-9_.-]*["']?\s*[:=]\s*)(?P<value>"[^"]*"|'[^']*'|[^\s,}\]]+)""",
    re.IGNORECASE)

# vLLM versions: BlockStored got its `medium` field (read by the conductor at index 6) in about 0.11.0;
# the map-shaped encoding (PR 42892, merged 2026-06-09) is confirmed in 0.26.0.
KV_MEDIUM_SINCE = (0, 11, 0)
KV_MAP_CONFIRMED = (0, 26, 0)


def is_secret_key(key) -> bool:
    text = str(key)
    return bool(SECRET_KEY_RE.search(text)) and not NOT_SECRET_KEY_RE.search(text)


def mask_secrets(value, mask: str = MASK):
    """A deep copy of ``value`` where every value under a secret-looking key is replaced by ``mask``.

    Empty values stay empty (nothing to hide, and it shows that no secret was set)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if is_secret_key(key) and not isinstance(item, (dict, list)) and item not in (None, ""):
                out[key] = mask
            else:
                out[key] = mask_secrets(item, mask)
        return out
    if isinstance(value, list):
        return [mask_secrets(item, mask) for item in value]
    return value


def mask_text(text: str, mask: str = MASK) -> str:
    """Mask ``key: value`` / ``key=value`` / ``"key": "value"`` pairs with a secret-looking key in free text."""
    def repl(match):
        value = match.group("value")
        quote = value[0] if value[:1] in ("'", '"') else ""
        return match.group("key") + quote + mask + quote
    return _TEXT_SECRET_RE.sub(repl, str(text))


def mask_document(text: str, mask: str = MASK) -> str:
    """A JSON document with its secret values masked (re-serialized, indent 2), else ``mask_text``."""
    import json

    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return mask_text(text, mask)
    return json.dumps(mask_secrets(data, mask), indent=2, sort_keys=False) + "\n"


# ------------------------------------------------------------------------------------ KV events

def parse_version(text):
    """``"0.11.0rc2+ascend"`` -> ``(0, 11, 0)``; None when there is no leading number."""
    if text is None:
        return None
    match = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text))
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def kv_event_shape(batch) -> str:
    """Shape of one decoded KV-event batch payload.

    ``array``: ``[ts, [[tag, ...], ...], dp_rank]`` (what the conductor decodes); ``map``: events (or the batch)
    are maps with a ``type`` key (vLLM PR 42892); ``legacy``: array events too short for the conductor
    (no ``medium`` at index 6: vLLM < 0.11, the conductor panics); ``empty``: no event to judge; ``unknown``."""
    if isinstance(batch, dict):
        return "map"
    if not isinstance(batch, (list, tuple)) or len(batch) < 2:
        return "unknown"
    events = batch[1]
    if not isinstance(events, (list, tuple)):
        return "unknown"
    if not events:
        return "empty"
    first = events[0]
    if isinstance(first, dict):
        return "map"
    if isinstance(first, (list, tuple)) and first and isinstance(first[0], (str, bytes)):
        tag = first[0].decode() if isinstance(first[0], bytes) else first[0]
        if tag == "BlockStored" and len(first) < 7:
            return "legacy"
        return "array"
    return "unknown"


def kv_format_verdict(vllm_version=None, shapes=None) -> dict:
    """Can the dev/kv-indexer conductor read the engine's KV events?

    ``vllm_version``: the ``vllm.__version__`` of the image, or None when vLLM is absent (stand-in images).
    ``shapes``: shapes (``kv_event_shape``) of captured batches. A captured shape wins over the version.
    Returns ``{compatible: True|False|None, source, vllm_version, shape, reason}``; None = undetermined."""
    shapes = [s for s in (shapes or []) if s not in ("empty", None)]
    version = parse_version(vllm_version)
    result = {"vllm_version": vllm_version if vllm_version else None, "shape": None,
              "compatible": None, "source": None, "reason": ""}
    if shapes:
        bad = [s for s in ("map", "legacy", "unknown") if s in shapes]
        shape = bad[0] if bad else "array"
        result.update(shape=shape, source="captured event")
        if shape == "array":
            result.update(compatible=True, reason="captured KV events are array-shaped, the format the conductor decodes")
        elif shape == "map":
            result.update(compatible=False, reason=(
                "captured KV events are map-shaped (vLLM PR 42892, 2026-06): the Mooncake dev/kv-indexer conductor only "
                "decodes the positional-array format, rejects every batch ('event at index 0 is not a slice') and "
                "reconnects in a loop, so KV-cache affinity never gets data. Use a vLLM / vLLM-Ascend release from "
                "before the map switch, or a conductor that decodes map-shaped events"))
        elif shape == "legacy":
            result.update(compatible=False, reason=(
                "captured BlockStored events have fewer than 7 fields (no 'medium', vLLM < 0.11): the conductor reads "
                "field 6 and crashes. Use vLLM / vLLM-Ascend 0.11 or newer"))
        else:
            result.update(compatible=False, reason="captured KV events have a shape the conductor cannot decode")
        return result
    if version is None:
        result.update(source="none", reason=(
            "vLLM not found in the image and no KV event captured: the event format could not be checked"))
        return result
    result["source"] = "vllm version"
    if version < KV_MEDIUM_SINCE:
        result.update(compatible=False, reason=(
            f"vLLM {vllm_version} predates the 'medium' field of BlockStored (about 0.11.0): the conductor reads "
            "field 6 and crashes. Use vLLM / vLLM-Ascend 0.11 or newer"))
    elif version >= KV_MAP_CONFIRMED:
        result.update(compatible=False, reason=(
            f"vLLM {vllm_version} publishes map-shaped KV events (PR 42892, in 0.26.0 and later): the Mooncake "
            "dev/kv-indexer conductor only decodes the positional-array format, so KV-cache affinity would silently "
            "never get data. Use a vLLM / vLLM-Ascend release from before the map switch, or a conductor that "
            "decodes map-shaped events"))
    else:
        result.update(compatible=True, reason=(
            f"vLLM {vllm_version} is in the window the conductor reads (>= 0.11 with 'medium', before the map switch "
            "confirmed in 0.26); capture an event to be sure, the first release with PR 42892 is not pinned"))
    return result


# --------------------------------------------------------------------------------------- tables

def render_table(rows, columns) -> str:
    """Fixed-width text table; ``columns`` = list of (key, header)."""
    cells = [[str(header) for _key, header in columns]]
    for row in rows:
        cells.append(["" if row.get(key) is None else str(row.get(key)) for key, _header in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _parse_time(text):
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


def _npus(devices) -> str:
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
    now_dt = _parse_time(now) or datetime.now(timezone.utc)
    uptime = ""
    if state.get("Running"):
        started = _parse_time(state.get("StartedAt"))
        if started:
            uptime = human_duration((now_dt - started).total_seconds())
    status = state.get("Status") or ("running" if state.get("Running") else "unknown")
    if not state.get("Running") and state.get("ExitCode") not in (None, 0):
        status = f"{status}({state.get('ExitCode')})"
    return {
        "host": host,
        "role": labels.get("io.pymotor.role", ""),
        "container": labels.get("io.pymotor.container") or str(info.get("Name", "")).lstrip("/"),
        "state": status,
        "uptime": uptime,
        "restarts": info.get("RestartCount", 0),
        "ports": labels.get("io.pymotor.ports", ""),
        "npus": _npus((info.get("HostConfig") or {}).get("Devices")),
        "image": str(info.get("Image", "")),
    }


ROLE_ORDER = {"kv_pool": 0, "controller": 1, "coordinator": 2, "kv_conductor": 3, "prefill": 4, "decode": 5, "union": 6}
STATUS_COLUMNS = [("host", "HOST"), ("role", "ROLE"), ("container", "CONTAINER"), ("state", "STATE"),
                  ("uptime", "UPTIME"), ("restarts", "RESTARTS"), ("ports", "PORTS"), ("npus", "NPUS")]


def status_rows(per_host: dict, now=None) -> list:
    """``{host: [inspect, ...]}`` -> rows sorted by role order, then container name."""
    rows = [container_row(host, info, now) for host, infos in (per_host or {}).items() for info in infos or []]
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r["role"], 9), _natural(r["container"]), r["host"]))


def status_table(rows) -> str:
    if not rows:
        return "no container of this job on the hosts"
    return render_table(rows, STATUS_COLUMNS)


def _natural(text):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text))]


# --------------------------------------------------------------------------------------- verify

def expected_kv_endpoints(plan: dict) -> list:
    """``tcp://<ip>:<event base + global DP rank>`` of every publishing container (what the coordinator registers)."""
    events = (plan or {}).get("kv_events")
    if not events:
        return []
    out = []
    for container in plan.get("containers", []):
        if container.get("role") == events.get("role"):
            for rank in container.get("dp_ranks", []):
                out.append({"container": container["name"], "host": container["host"], "dp_rank": rank,
                            "endpoint": f"tcp://{container['ip']}:{events['endpoint_port'] + rank}"})
    return out


def kv_endpoint_urls(plan: dict) -> list:
    return [e["endpoint"] for e in expected_kv_endpoints(plan)]


def http_results(results) -> dict:
    """A ``uri`` loop's ``results`` -> ``{key: {status, json}}``; key = the item's ``name``, or for an item
    ``[container, endpoint]`` (``subelements('endpoints')``) ``<container name>/<dp_rank>``."""
    out = {}
    for result in results or []:
        item = result.get("item")
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], dict):
            key = f"{item[0].get('name')}/{(item[1] or {}).get('dp_rank')}"
        elif isinstance(item, dict):
            key = str(item.get("name"))
        else:
            key = str(item)
        body = result.get("json")
        out[key] = {"status": result.get("status", -1), "json": body if body is not None else {}}
    return out


def _check(name, target, ok, detail=""):
    return {"check": name, "target": target, "ok": bool(ok), "detail": str(detail)}


def verify_report(plan: dict, raw: dict, min_affinity: float = 1.0) -> dict:
    """Judge what playbooks/verify.yml observed. ``raw`` keys (all optional):

    - ``containers``: ``{name: {exists, running, image, restarts, status}}`` and ``image_ids``: ``{host: id}``
    - ``controller``, ``coordinator``: ``{status, json}`` of their /readiness
    - ``node_managers``: ``{container: {status, json}}``; ``engines``: ``{"<container>/<dp_rank>": {status, json}}``
    - ``services``: conductor ``GET /services`` JSON; ``inference``: ``{status}``
    - ``probe``: the probe script output; ``kv_format``: ``kv_format_verdict`` output
    Returns ``{job_id, passed, checks, containers, affinity, kv_events, kv_format}``."""
    raw = raw or {}
    checks = []
    containers = []
    image_ids = raw.get("image_ids") or {}
    seen = raw.get("containers") or {}
    for c in plan.get("containers", []):
        got = seen.get(c["name"]) or {}
        want_image = image_ids.get(c["host"]) or ""
        image_ok = bool(want_image) and got.get("image") == want_image
        ok = bool(got.get("exists")) and bool(got.get("running")) and image_ok
        detail = ("missing" if not got.get("exists") else
                  f"state {got.get('status')}" if not got.get("running") else
                  "" if image_ok else f"image {str(got.get('image'))[:19]} is not the planned {want_image[:19] or '(image absent)'}")
        checks.append(_check("container running with the planned image", f"{c['host']}/{c['name']}", ok, detail))
        containers.append({"host": c["host"], "container": c["name"], "role": c["role"],
                           "state": got.get("status") or ("missing" if not got.get("exists") else ""),
                           "image_ok": image_ok, "restarts": got.get("restarts")})

    for name in ("controller", "coordinator"):
        if plan.get(name):
            got = raw.get(name) or {}
            checks.append(_check(f"{name} healthy", name, got.get("status") == 200, f"HTTP {got.get('status')}"))
    coord = raw.get("coordinator") or {}
    checks.append(_check("coordinator ready", "coordinator", (coord.get("json") or {}).get("ready") is True,
                         (coord.get("json") or {}).get("message", "")))

    for c in plan.get("containers", []):
        if c.get("tier") != 2:
            continue
        got = (raw.get("node_managers") or {}).get(c["name"]) or {}
        checks.append(_check("node manager status normal", c["name"],
                             got.get("status") == 200 and status_ok(got.get("json")),
                             f"HTTP {got.get('status')} {got.get('json')}"))
        for ep in c.get("endpoints", []):
            key = f"{c['name']}/{ep['dp_rank']}"
            got = (raw.get("engines") or {}).get(key) or {}
            checks.append(_check("engine status normal", key,
                                 got.get("status") == 200 and status_ok(got.get("json")),
                                 f"HTTP {got.get('status')} {got.get('json')}"))

    expected = expected_kv_endpoints(plan)
    if plan.get("affinity") and plan.get("kv_conductor") and expected:
        services = (raw.get("services") or {}).get("services") or []
        listed = {s.get("Endpoint") for s in services if isinstance(s, dict)}
        missing = [e["endpoint"] for e in expected if e["endpoint"] not in listed]
        checks.append(_check("conductor lists every prefill DP rank", "kv_conductor", not missing,
                             f"{len(expected) - len(missing)}/{len(expected)} registered"
                             + (f", missing {', '.join(missing)}" if missing else "")))

    inference = raw.get("inference") or {}
    checks.append(_check("inference request succeeds", "coordinator", inference.get("status") == 200,
                         f"HTTP {inference.get('status')}"))

    probe = raw.get("probe") or {}
    kv_events = None
    affinity = None
    if expected:
        per = probe.get("endpoints") or {}
        stored = sum(int((per.get(e["endpoint"]) or {}).get("block_stored", 0)) for e in expected)
        errors = sum(int((v or {}).get("decode_errors", 0)) for v in per.values())
        kv_events = {"block_stored": stored, "decode_errors": errors, "seconds": probe.get("seconds"),
                     "endpoints": {e["endpoint"]: per.get(e["endpoint"]) or {} for e in expected}}
        checks.append(_check("KV events flowing (BlockStored received)", "prefill publishers",
                             stored > 0 and not probe.get("error"),
                             probe.get("error") or f"{stored} BlockStored from {len(expected)} publisher(s), "
                             f"{errors} undecodable message(s)"))
    if plan.get("affinity") and probe:
        affinity = affinity_summary(probe)
        checks.append(_check("affinity: shared-prefix prompts on one prefill instance", "coordinator",
                             affinity["shared_ok"] == affinity["shared_total"] > 0
                             and affinity["fraction"] >= min_affinity,
                             f"{affinity['fraction'] * 100:.0f}% of {affinity['shared_total']} on "
                             f"{affinity['target']} ({affinity['unrelated_ok']}/{affinity['unrelated_total']} "
                             f"unrelated ok)"))
        if affinity["longest_matched"] is not None:
            series = affinity["longest_matched"]
            checks.append(_check("affinity: /query longest_matched grows", "kv_conductor",
                                 len(series) > 1 and series[-1] > series[0] and series[-1] > 0,
                                 " -> ".join(str(v) for v in series)))
    kv_format = raw.get("kv_format")
    if kv_format:
        checks.append(_check("KV event format readable by the conductor", "engine image",
                             kv_format.get("compatible") is not False, kv_format.get("reason", "")))
    return {"job_id": plan.get("job_id"), "passed": all(c["ok"] for c in checks), "checks": checks,
            "containers": containers, "affinity": affinity, "kv_events": kv_events, "kv_format": kv_format}


def affinity_summary(probe: dict) -> dict:
    """From the probe's ``shared`` / ``unrelated`` request lists: fraction on the most common prefill target."""
    shared = probe.get("shared") or []
    unrelated = probe.get("unrelated") or []
    targets = [r.get("target") for r in shared if r.get("status") == 200 and r.get("target")]
    best, count = None, 0
    for target in sorted(set(targets)):
        if targets.count(target) > count:
            best, count = target, targets.count(target)
    total = len(shared)
    return {"shared_total": total, "shared_ok": len([r for r in shared if r.get("status") == 200]),
            "unrelated_total": len(unrelated), "unrelated_ok": len([r for r in unrelated if r.get("status") == 200]),
            "target": best, "fraction": (count / total) if total else 0.0,
            "targets": targets, "longest_matched": probe.get("longest_matched")}


VERIFY_COLUMNS = [("result", "RESULT"), ("check", "CHECK"), ("target", "TARGET"), ("detail", "DETAIL")]


def verify_table(report: dict) -> str:
    rows = [dict(c, result="ok" if c["ok"] else "FAIL") for c in report.get("checks", [])]
    lines = [render_table(rows, VERIFY_COLUMNS), ""]
    if report.get("containers"):
        lines.append(render_table(report["containers"], [("host", "HOST"), ("container", "CONTAINER"),
                                                         ("role", "ROLE"), ("state", "STATE"),
                                                         ("restarts", "RESTARTS")]))
        lines.append("")
    failed = len([c for c in report.get("checks", []) if not c["ok"]])
    lines.append(f"job {report.get('job_id')}: {len(report.get('checks', [])) - failed} checks passed, {failed} failed")
    return "\n".join(lines)
