# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The per-host healer of a pymotor.ascend job (standard library and motor_docker.py only; no Ansible import).

It runs in the job's ``<job_id>-healer-<host>`` container on every host of the job (``reconcile/host_healer.py``),
with that host's Docker unix socket bind-mounted and nothing listening, and heals the job's containers of its own
host only. Every ``interval`` seconds it inspects them and ``decide`` says what to do:

- ``restart`` a container Docker reports ``unhealthy`` (the health checks from upstream's probes,
  ``reconcile/probes.py``), never one still in its start period (upstream's startup grace: less than
  ``StartPeriod`` since it started and never healthy since; a paused one too: Docker's restart kills and thaws it),
  with backoff per container: 30, 60, 120, 300 s after
  its 1st, 2nd, 3rd, 4th+ restart of the last hour (an hour with no restart starts again at 30 s);
- ``start`` a container whose last start failed because a device it maps was missing (``/dev/davinci*`` after an
  engine-host reboot, before the Ascend driver made them: Docker's restart policy does not retry a failed start),
  once every device it maps exists on the host (the host's ``/dev``, read-only at ``/host/dev``), with the same
  backoff. A container stopped on purpose (``docker stop``, ``stop.yml``) has no start error: left alone.

Each action is one line on stdout (``docker logs``) and in the state file in the container's log directory (on the
host): ``<UTC time> motor-host-healer: <action> <container> (<why>; action n in the last hour)``.

It also reports, and never acts on, a planned NPU whose ``npu-smi`` health is not OK (rule ``npu_unhealthy``): it
has no NPU device and no driver mount itself; every engine pod's healer reads the health of the pod's own NPUs and
writes it to the pod's log directory (``plugin_utils/heal.py`` ``record_npu_health``), which this healer reads from
the job's log directory on the host (read-only at ``/host/job-logs``). A change is one line
(``report NPU <id> of <pod> ...``), the state file keeps every reading (``status.yml``'s NPU HEALTH column), and
``motor_host_healer.prom`` in its log directory holds ``motor_npu_unhealthy`` (node_exporter's textfile format).

Usage: ``python3 motor_host_healer.py <host_healer.json>``.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import time
from datetime import datetime, timezone

try:
    from ansible_collections.pymotor.ascend.plugins.module_utils import motor_heal_rules as rules
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_docker import DockerClient, DockerError, DockerUnavailable
except ImportError:  # in the healer container: the collection's motor_docker.py and rule table next to this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _docker = importlib.import_module("motor_docker")
    DockerClient, DockerError, DockerUnavailable = _docker.DockerClient, _docker.DockerError, _docker.DockerUnavailable
    rules = importlib.import_module("motor_heal_rules")

BACKOFF = rules.rule("unhealthy")["budget"]["backoff"]
HOUR = rules.HOUR
DEFAULTS = {"interval": 5, "host_dev": "/host/dev", "keep": 50, "job_logs": "", "metrics": "", "host": ""}
# what every engine pod's healer writes in its log directory (reconcile/healer.py NPU_HEALTH_FILE)
NPU_HEALTH_FILE = "motor_npu_health.json"
NPU_DEVICE = re.compile(r"^/dev/davinci(\d+)$")
HEALTH_WORD = re.compile(r"^[A-Za-z]{1,20}$")  # npu-smi's Health column; anything else in the file is not trusted
HEALTH_OK = "OK"


def _epoch(stamp):
    """Docker's RFC 3339 time (nanoseconds, Z) in seconds since the epoch; 0 for Docker's zero time."""
    if not stamp or stamp.startswith("0001-"):
        return 0.0
    base, _dot, frac = stamp.rstrip("Z").partition(".")
    return datetime.strptime(base[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp() + float(
        "0." + (frac[:6] or "0"))


def view(inspection, seen_healthy):
    """What ``decide`` reads of one container's inspection. ``seen_healthy``: {name: StartedAt} of the containers the
    healer saw healthy since that start."""
    state = inspection.get("State") or {}
    health = state.get("Health") or {}
    config = (inspection.get("Config") or {}).get("Healthcheck") or {}
    name = inspection.get("Name", "").lstrip("/")
    logs = health.get("Log") or []
    return {
        "name": name,
        "status": "paused" if state.get("Paused") else state.get("Status", ""),
        "health": health.get("Status"),
        "started_at": _epoch(state.get("StartedAt")),
        "start_period": (config.get("StartPeriod") or 0) / 1e9,
        # healthy once since this start (a success ends Docker's start period): seen by the healer, or in Docker's
        # log of the last 5 checks
        "was_healthy": health.get("Status") == "healthy" or seen_healthy.get(name) == state.get("StartedAt") or any(
            entry.get("ExitCode") == 0 and _epoch(entry.get("Start")) >= _epoch(state.get("StartedAt"))
            for entry in logs),
        # the last failed check's output (a paused container's checks do not run: Docker marks it unhealthy at once)
        "probe_output": next((str(e.get("Output") or "").strip()[-200:] for e in reversed(logs) if e.get("ExitCode")), ""),
        "error": state.get("Error") or "",
        "devices": [d.get("PathOnHost", "") for d in (inspection.get("HostConfig") or {}).get("Devices") or []],
    }


def next_allowed(times, now, budget=None):
    """When a container may be acted on again: BACKOFF[n-1] s after the last of its n actions of the last hour (the
    rule's budget in ``motor_heal_rules``)."""
    return rules.backoff(budget or rules.rule("unhealthy")["budget"], times, now)


def unhealthy(c, now):
    """Rule ``unhealthy``: why to restart ``c``, or None."""
    if c["health"] != "unhealthy" or c["status"] not in ("running", "paused"):
        return None
    if not c["was_healthy"] and now - c["started_at"] < c["start_period"]:
        return None  # upstream's startup grace
    paused = " while paused" if c["status"] == "paused" else ""
    output = ": " + c["probe_output"] if c["probe_output"] else ""
    return "Docker reports it unhealthy%s%s" % (paused, output)


def missing_device(c, present):
    """Rule ``missing_device``: why to start ``c``, or None."""
    if c["status"] not in ("exited", "created") or not c["error"] or not any(d in c["error"] for d in c["devices"]):
        return None
    if any(d not in present for d in c["devices"]):
        return None
    return "its last start failed (%s) and its devices exist now" % c["error"][:160]


def planned_npus(c):
    """The NPU ids a container maps (``/dev/davinciN`` in its devices: the plan's NPUs of an engine pod)."""
    return sorted(int(m.group(1)) for m in (NPU_DEVICE.match(d) for d in c["devices"]) if m)


def npu_readings(containers, job_logs, load=None):
    """``{pod: {"time", "npus": {id: health}}}``: what each engine pod's healer last read of its planned NPUs (a pod
    with no reading yet is left out). Only the planned ids and one word of health are taken from the pod's file."""
    out = {}
    for c in containers:
        npus = planned_npus(c)
        if not npus or not job_logs:
            continue
        record = (load or _load)(os.path.join(job_logs, c["name"], NPU_HEALTH_FILE))
        read = record.get("npus") if isinstance(record, dict) else None
        if not isinstance(read, dict):
            continue
        health = {}
        for npu in npus:
            word = read.get(str(npu))
            health[str(npu)] = word if isinstance(word, str) and HEALTH_WORD.match(word) else "unreadable"
        stamp = record.get("time")
        out[c["name"]] = {"time": stamp if isinstance(stamp, (int, float)) else 0, "npus": health}
    return out


def npu_unhealthy(readings):
    """Rule ``npu_unhealthy``: ``[(pod, npu, health)]`` of the planned NPUs whose health is not OK (report only)."""
    return [(pod, npu, health) for pod, reading in sorted(readings.items())
            for npu, health in sorted(reading["npus"].items(), key=lambda kv: int(kv[0])) if health != HEALTH_OK]


def npu_report_lines(before, after, now):
    """The report lines of what changed between two results of ``npu_unhealthy``: a bad NPU newly seen or with
    another health, and one healthy again."""
    old = {(pod, npu): health for pod, npu, health in before}
    new = {(pod, npu): health for pod, npu, health in after}
    rule = rules.rule("npu_unhealthy")["name"]
    lines = []
    for (pod, npu), health in sorted(new.items()):
        if old.get((pod, npu)) != health:
            lines.append(line("report", "NPU %s of %s" % (npu, pod), "npu-smi reports %s; rule %s: nothing is "
                              "restarted, a restart cannot repair hardware; repair the NPU or leave it out with "
                              "motor_npu_ids and re-plan" % (health, rule), None, now))
    for (pod, npu), health in sorted(old.items()):
        if (pod, npu) not in new:
            lines.append(line("report", "NPU %s of %s" % (npu, pod), "healthy again: npu-smi no longer reports %s"
                              % health, None, now))
    return lines


def metrics_text(readings, labels):
    """``motor_npu_unhealthy`` per planned NPU read (1: its health is not OK; the health a label), in node_exporter's
    textfile format."""
    out = ["# HELP motor_npu_unhealthy 1 while npu-smi reports a planned NPU's health other than OK (nothing restarts)",
           "# TYPE motor_npu_unhealthy gauge"]
    for pod, reading in sorted(readings.items()):
        for npu, health in sorted(reading["npus"].items(), key=lambda kv: int(kv[0])):
            tags = dict(labels, container=pod, npu=npu, health=health)
            out.append("motor_npu_unhealthy{%s} %d" % (",".join('%s="%s"' % kv for kv in sorted(tags.items())),
                                                       0 if health == HEALTH_OK else 1))
    return "\n".join(out) + "\n"


# the checks of this agent's rules that act (motor_heal_rules.rules_of("host")): (action, check(container, present,
# now)); the rules that only report, with theirs (run by round_once: report_npus)
CHECKS = {"unhealthy": ("restart", lambda c, present, now: unhealthy(c, now)),
          "missing_device": ("start", lambda c, present, now: missing_device(c, present))}
REPORTS = {"npu_unhealthy": npu_unhealthy}


def decide(containers, history, present, now):
    """The actions now: ``[(action, name, why)]``, ``action`` ``restart`` or ``start``: the first rule of
    ``motor_heal_rules.rules_of("host")`` that holds for a container, within its budget.

    ``containers``: ``view`` dicts; ``history``: {name: [times of past actions]}; ``present``: the device paths that
    exist on the host."""
    out = []
    for c in containers:
        for rule in rules.rules_of("host"):
            if rule["name"] in REPORTS:
                continue
            action, check = CHECKS[rule["name"]]
            why = check(c, present, now)
            if why is None:
                continue
            if now >= next_allowed(history.get(c["name"]) or [], now, rule["budget"]):
                out.append((action, c["name"], why))
            break
    return out


def present_devices(containers, host_dev):
    """The device paths the containers map that exist under the host's /dev (mounted at ``host_dev``)."""
    paths = {d for c in containers for d in c["devices"]}
    return {d for d in paths if d.startswith("/dev/") and os.path.exists(host_dev + d[len("/dev"):])}


def say(text, stream=None):
    """One line to stdout (or ``stream``), flushed: what ``docker logs`` shows."""
    stream = stream or sys.stdout
    stream.write(text + "\n")
    stream.flush()


def line(action, name, why, count, now):
    """One log line; ``count`` None for a report (no action taken)."""
    stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if count is None:
        return "%s motor-host-healer: %s %s (%s)" % (stamp, action, name, why)
    return "%s motor-host-healer: %s %s (%s; action %d in the last hour)" % (stamp, action, name, why, count)


def _load(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _save(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def act(client, action, name):
    """Docker's restart stops (SIGTERM, SIGKILL after 10 s; a paused container is killed and thawed by Docker, so it
    never serves again in between) and starts the container."""
    if action == "restart":
        client.post("/containers/{0}/restart", name, params={"t": "10"}, timeout=120)
    else:
        client.post("/containers/{0}/start", name, timeout=120)


def round_once(client, config, state, now):
    """One round: inspect the job's containers of this host, act, record. Returns the log lines written."""
    seen = state.setdefault("seen_healthy", {})
    history = state.setdefault("history", {})
    views = []
    for summary in client.job_containers(config["job_id"]):
        name = (summary.get("Names") or ["/?"])[0].lstrip("/")
        if name == config["self"]:
            continue
        inspection = client.inspect_container(name)
        if inspection:
            if ((inspection.get("State") or {}).get("Health") or {}).get("Status") == "healthy":
                seen[name] = inspection["State"].get("StartedAt")
            views.append(view(inspection, seen))
    lines = []
    for action, name, why in decide(views, history, present_devices(views, config["host_dev"]), now):
        times = [t for t in history.get(name) or [] if now - t < HOUR] + [now]
        history[name] = times
        text = line(action, name, why, len(times), now)
        say(text)  # before the action: the line says when it began
        lines.append(text)
        try:
            act(client, action, name)
        except (DockerError, DockerUnavailable) as exc:
            text = line("failed to " + action, name, "Docker said: %s" % exc, len(times), now)
            say(text)
            lines.append(text)
    lines += report_npus(config, state, views, now)
    state["actions"] = ((state.get("actions") or []) + lines)[-config["keep"]:]
    return lines


def report_npus(config, state, views, now, load=None):
    """Rule ``npu_unhealthy``, report only: a line per change, every reading in ``state["npu_health"]``
    (status.yml's NPU HEALTH column) and the metrics file, both rewritten when a reading changed (``state["dirty"]``:
    the state is to be saved). Returns the lines."""
    readings = npu_readings(views, config.get("job_logs"), load)
    previous = state.get("npu_health") or {}
    lines = npu_report_lines(npu_unhealthy(previous), npu_unhealthy(readings), now)
    for text in lines:
        say(text)
    changed = {p: r["npus"] for p, r in readings.items()} != {p: r.get("npus") for p, r in previous.items()}
    if changed or not state.get("npu_metrics"):
        state["npu_health"] = readings
        state["dirty"] = True
        if config.get("metrics"):
            try:
                _write(config["metrics"], metrics_text(readings, {"job": config["job_id"], "host": config["host"]}))
                state["npu_metrics"] = True
            except OSError as exc:
                say("motor-host-healer: metrics file not written: %s" % exc, sys.stderr)
    return lines


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 2:
        say("usage: motor_host_healer.py <host_healer.json>", sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        config = dict(DEFAULTS, **json.load(handle))
    client = DockerClient(config.get("docker_host") or "unix:///var/run/docker.sock")
    state = _load(config["state"])
    say("%s motor-host-healer: watching the containers of job %s on this host" % (
        datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), config["job_id"]))
    while True:
        try:
            acted = round_once(client, config, state, time.time())
            if state.pop("dirty", False) or acted:
                _save(config["state"], state)
        except (DockerError, DockerUnavailable, OSError) as exc:
            say("motor-host-healer: round skipped: %s" % exc, sys.stderr)
        time.sleep(config["interval"])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
