# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""verify.yml: the observations of a deployed job judged against its plan."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import missing_endpoints, status_ok

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_SECTIONS, PUBLISHING_ROLES
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.affinity import affinity_report, prefix_line
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import engine_endpoints, node_manager_ports
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import expected_kv_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import render_table


def http_results(results) -> dict:
    """A ``uri`` loop's ``results`` -> ``{key: {status, json}}``; key = the item's ``name``, or for an item
    ``[container, endpoint]`` (``subelements('endpoints')``) ``<container name>/<dp_rank>``, for an item of
    ``dict2items`` its ``key``."""
    out = {}
    for result in results or []:
        item = result.get("item")
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], dict):
            key = f"{item[0].get('name')}/{(item[1] or {}).get('dp_rank')}"
        elif isinstance(item, dict):
            key = str(item.get("name", item.get("key")))
        else:
            key = str(item)
        body = result.get("json")
        out[key] = {"status": result.get("status", -1), "json": body if body is not None else {}}
    return out


def _check(name, target, ok, detail=""):
    return {"check": name, "target": target, "ok": bool(ok), "detail": str(detail)}


# KV-cache affinity needs the engines' KV events, which the Mooncake conductor decodes in vLLM's format only.
AFFINITY_NOT_APPLICABLE = ("engine_type %s: the KV conductor decodes vLLM KV events only, so KV-cache affinity "
                           "does not apply (the coordinator schedules with %s)")


def engine_type(plan: dict):
    """The engine_type of the job's prefill (or union) engines, as their user_config says (PyMotor's default vllm);
    None without engines."""
    for c in plan.get("containers", []):
        section = ENGINE_SECTIONS.get(c.get("role"))
        if section and c.get("role") in PUBLISHING_ROLES:
            engine = (c.get("user_config") or {}).get(section) or {}
            return (engine.get("engine_type") if isinstance(engine, dict) else None) or "vllm"
    return None


def _not_applicable(plan: dict, kind: str) -> dict:
    sched = None
    for c in plan.get("containers", []):
        sched = (((c.get("user_config") or {}).get("motor_coordinator_config") or {}).get("scheduler_config") or {})
        if sched:
            break
    reason = AFFINITY_NOT_APPLICABLE % (kind, (sched or {}).get("scheduler_type") or "its default scheduler")
    return {"applicable": False, "verdict": "not applicable", "reason": reason, "passed": True}


def _registrations(services: list, expected: list) -> list:
    """One check per publishing container: the conductor's registrations of its DP ranks (instance id, DP rank,
    endpoint), so a lost or stale registration shows against the pod it belongs to."""
    by_endpoint = {}
    for service in services:
        if isinstance(service, dict):
            by_endpoint.setdefault(service.get("Endpoint"), []).append(service)
    checks = []
    for entry in expected:
        found = [s for url in entry["of"] for s in by_endpoint.get(url, [])]
        ranks = "; ".join(f"{s.get('InstanceID')}/dp{s.get('DPRank')} at {s.get('Endpoint')}" for s in found)
        have = len({s.get("Endpoint") for s in found})
        detail = f"{have}/{entry['need']} registered" + (f": {ranks}" if ranks else "")
        checks.append(_check("conductor registrations of the pod's DP ranks", entry["container"],
                             have >= entry["need"], detail))
    return checks


def observed_from_probes(probes: dict) -> tuple[dict, dict]:
    """``(image_ids, containers)`` as verify_report reads them, from every host's discovery (``motor_host_probe``
    with ``inspect``: ``images`` and the ``inspections`` of the job's containers). verify reads the hosts once,
    in the discovery its plan needs anyway, instead of a second module run per host."""
    image_ids, seen = {}, {}
    for host, probe in (probes or {}).items():
        images = (probe or {}).get("images") or []
        image_ids[host] = images[0].get("Id", "") if images else ""
        for found in (probe or {}).get("inspections") or []:
            state = found.get("State") or {}
            seen[str(found.get("Name", "")).lstrip("/")] = {
                "exists": True, "running": bool(state.get("Running")), "status": state.get("Status") or "missing",
                "image": found.get("Image") or "", "restarts": found.get("RestartCount")}
    return image_ids, seen


def verify_report(plan: dict, raw: dict, min_affinity: float = 1.0) -> dict:
    """Judge what playbooks/verify.yml observed. ``raw`` keys (all optional):

    - ``probes``: ``{host: motor_host_probe result}`` (see observed_from_probes), or already judged
      ``containers``: ``{name: {exists, running, image, restarts, status}}`` and ``image_ids``: ``{host: id}``
    - ``controller``, ``coordinator``: ``{status, json}`` of their /readiness
    - ``node_managers``: ``{container: {status, json}}``; ``engines``: ``{"<container>/<dp_rank>": {status, json}}``
    - ``services``: conductor ``GET /services`` JSON; ``inference``: ``{status}``
    - ``probe``: the probe script output; ``kv_format``: ``kv_format_verdict`` output
    Returns ``{job_id, passed, checks, containers, affinity, kv_events, kv_format}``."""
    raw = raw or {}
    checks = []
    containers = []
    if "probes" in raw:
        image_ids, seen = observed_from_probes(raw["probes"])
    else:
        image_ids, seen = raw.get("image_ids") or {}, raw.get("containers") or {}
    for c in plan.get("containers", []):
        got = seen.get(c["name"]) or {}
        want_image = image_ids.get(c["host"]) or ""
        image_ok = bool(want_image) and got.get("image") == want_image
        # Docker says Running while a container restarts in a loop: its status says "restarting"
        running = bool(got.get("running")) and got.get("status") != "restarting"
        ok = bool(got.get("exists")) and running and image_ok
        detail = ("missing" if not got.get("exists") else
                  f"state {got.get('status')}" if not running else
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
        for key, _port in node_manager_ports(c):
            got = (raw.get("node_managers") or {}).get(key) or {}
            checks.append(_check("node manager status normal", key,
                                 got.get("status") == 200 and status_ok(got.get("json")),
                                 f"HTTP {got.get('status')} {got.get('json')}"))
        for key, _ep in engine_endpoints(c):
            got = (raw.get("engines") or {}).get(key) or {}
            checks.append(_check("engine status normal", key,
                                 got.get("status") == 200 and status_ok(got.get("json")),
                                 f"HTTP {got.get('status')} {got.get('json')}"))

    expected = expected_kv_endpoints(plan)
    total = sum(e["need"] for e in expected)
    if plan.get("affinity") and plan.get("kv_conductor") and expected:
        services = (raw.get("services") or {}).get("services") or []
        listed = {s.get("Endpoint") for s in services if isinstance(s, dict)}
        found = sum(min(e["need"], len([u for u in e["of"] if u in listed])) for e in expected)
        missing = missing_endpoints(raw.get("services") or {}, expected)
        detail = (f"conductor /services unreadable ({raw['services_error']}): is the KV conductor running?"
                  if raw.get("services_error") else
                  f"{found}/{total} registered" + (f", missing {'; '.join(missing)}" if missing else ""))
        checks.append(_check("conductor lists every prefill DP rank", "kv_conductor", not missing, detail))
        if not raw.get("services_error"):
            checks.extend(_registrations(services, expected))

    inference = raw.get("inference") or {}
    checks.append(_check("inference request succeeds", "coordinator", inference.get("status") == 200,
                         f"HTTP {inference.get('status')}"))

    probe = raw.get("probe") or {}
    kv_events = None
    affinity = None
    if expected:
        per = probe.get("endpoints") or {}
        urls = [url for e in expected for url in e["of"]]
        stored = sum(int((per.get(url) or {}).get("block_stored", 0)) for url in urls)
        errors = sum(int((v or {}).get("decode_errors", 0)) for v in per.values())
        kv_events = {"block_stored": stored, "decode_errors": errors, "seconds": probe.get("seconds"),
                     "endpoints": {url: per.get(url) or {} for url in urls}}
        checks.append(_check("KV events flowing (BlockStored received)", "prefill publishers",
                             stored > 0 and not probe.get("error"),
                             probe.get("error") or f"{stored} BlockStored from {total} publishing rank(s), "
                             f"{errors} undecodable message(s)"))
    if plan.get("affinity") and probe:
        affinity = affinity_report(probe, raw.get("services"), expected, min_affinity)
        for prefix in affinity["prefixes"]:
            checks.append(_check("affinity: repeats of a shared prefix go to the instance holding it",
                                 prefix["name"], prefix["verdict"] == "ok", prefix_line(prefix)))
        checks.append(_check("affinity: fraction of repeats served with the cached prefix", "coordinator",
                             affinity["passed"],
                             "%.0f%% of %d repeats on the holder (tokens: %s)%s" % (
                                 affinity["fraction"] * 100, affinity["repeats"],
                                 affinity["tokens"].get("source") or "unavailable",
                                 ("; " + "; ".join(affinity["reasons"][:2])) if affinity["reasons"] else "")))
        unrelated = probe.get("unrelated") or []
        checks.append(_check("unrelated requests succeed", "coordinator",
                             all(r.get("status") == 200 for r in unrelated),
                             "%d/%d HTTP 200" % (len([r for r in unrelated if r.get("status") == 200]), len(unrelated))))
    kind = engine_type(plan)
    if kind not in (None, "vllm") and not plan.get("affinity"):
        affinity = _not_applicable(plan, kind)
        checks.append(dict(_check("affinity", "coordinator", True, "not applicable: " + affinity["reason"]),
                           applicable=False))
    kv_format = raw.get("kv_format")
    if kv_format:
        checks.append(_check("KV event format readable by the conductor", "engine image",
                             kv_format.get("compatible") is not False, kv_format.get("reason", "")))
    return {"job_id": plan.get("job_id"), "passed": all(c["ok"] for c in checks), "checks": checks,
            "containers": containers, "affinity": affinity, "kv_events": kv_events, "kv_format": kv_format}


VERIFY_COLUMNS = [("result", "RESULT"), ("check", "CHECK"), ("target", "TARGET"), ("detail", "DETAIL")]


def verify_table(report: dict) -> str:
    rows = [dict(c, result="n/a" if c.get("applicable") is False else "ok" if c["ok"] else "FAIL")
            for c in report.get("checks", [])]
    lines = [render_table(rows, VERIFY_COLUMNS), ""]
    if report.get("containers"):
        lines.append(render_table(report["containers"], [("host", "HOST"), ("container", "CONTAINER"),
                                                         ("role", "ROLE"), ("state", "STATE"),
                                                         ("restarts", "RESTARTS")]))
        lines.append("")
    failed = len([c for c in report.get("checks", []) if not c["ok"]])
    lines.append(f"job {report.get('job_id')}: {len(report.get('checks', [])) - failed} checks passed, {failed} failed")
    return "\n".join(lines)
