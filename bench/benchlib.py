# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Helpers shared by the bench/ scripts: machine-readable results, simulated clusters, deploy runs.

Every benchmark reports rows of the same shape (``row()``); ``--json FILE`` writes them so bench/run_all can
print one table without scraping text:

    {"bench": "deploy", "case": "re-run vs first deploy (1 host)",
     "a": {"label": "re-run", "value": 7.1}, "b": {"label": "first deploy", "value": 40.2},
     "unit": "s", "ratio": 0.18, "bound": "<= 0.35", "max": 0.35, "pass": true}

``max`` null (and ``pass`` null) marks a row printed for information only.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
sys.path.insert(0, str(REPO / "tests" / "sim"))
import simctl  # noqa: E402  pylint: disable=wrong-import-position,unused-import

# The stand-in PyMotor image with the fixture conductor, as the deploy scenarios use it (tag in our namespace).
DEPLOY_IMAGE = "local/pymotor-bench:deploy"


# ------------------------------------------------------------------------------------------- results

def row(bench: str, case: str, a: tuple[str, float], b: tuple[str, float], max_ratio: float | None,
        unit: str = "s", bound: str | None = None, extra: dict | None = None) -> dict:
    """One result: measured A and B, ratio A/B, and whether the ratio stays within max_ratio."""
    ratio = a[1] / b[1] if b[1] else float("inf")
    out = {"bench": bench, "case": case, "a": {"label": a[0], "value": a[1]}, "b": {"label": b[0], "value": b[1]},
           "unit": unit, "ratio": ratio, "max": max_ratio,
           "bound": bound or (f"<= {max_ratio:g}" if max_ratio is not None else "(info)"),
           "pass": None if max_ratio is None else ratio <= max_ratio}
    if extra:
        out["extra"] = extra
    return out


def write_json(path: str | None, rows: list[dict], **meta) -> None:
    if path:
        doc = {"rows": rows, "loadavg_after": os.getloadavg(), **meta}
        Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def failed(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["pass"] is False]


# ----------------------------------------------------------------------------------------------- cpu

class CpuMeter:
    """CPU seconds spent by an orchestration run, which other load on the machine barely changes (wall time does):
    this process's waited-for children (ansible-playbook, its forks, the docker CLI, bash) plus the cgroups of the
    prefix's simulated hosts (module runs, docker CLI and dockerd inside the hosts; not the services' own
    containers, which have cgroups of their own, nor the machine's dockerd serving `docker exec`)."""

    def __init__(self, prefix: str):
        ids = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"label=pymotor.sim={prefix}"],
                             capture_output=True, text=True, check=False).stdout.split()
        self.files = [f for f in (Path("/sys/fs/cgroup/cpuacct/docker") / i / "cpuacct.usage" for i in ids)
                      if f.exists()]
        self.start = self._read()

    def _read(self) -> tuple[float, float]:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        hosts = sum(int(f.read_text()) for f in self.files) / 1e9 if self.files else float("nan")
        return usage.ru_utime + usage.ru_stime, hosts

    def stop(self) -> dict:
        end = self._read()
        return {"controller": round(end[0] - self.start[0], 2), "hosts": round(end[1] - self.start[1], 2),
                "total": round(end[0] - self.start[0] + end[1] - self.start[1], 2)}


# -------------------------------------------------------------------------------------------- deploy

def ensure_deploy_image(image: str = DEPLOY_IMAGE) -> str:
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), image],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return image


def config_dir(state: Path, p_instances: int, d_instances: int) -> Path:
    """The seed PD-separation config (KV-cache affinity, 4 NPUs per instance) with p/d instance counts."""
    seed = REPO / "examples" / "seed_pd_separation"
    out = state / f"config-p{p_instances}-d{d_instances}"
    out.mkdir(parents=True, exist_ok=True)
    user = json.loads((seed / "user_config.json").read_text(encoding="utf-8"))
    user["motor_deploy_config"]["p_instances_num"] = p_instances
    user["motor_deploy_config"]["d_instances_num"] = d_instances
    (out / "user_config.json").write_text(json.dumps(user, indent=2), encoding="utf-8")
    (out / "env.json").write_text((seed / "env.json").read_text(encoding="utf-8"), encoding="utf-8")
    return out


def cluster(prefix: str, engines: int, state: Path, image: str = DEPLOY_IMAGE) -> tuple[Path, list[dict]]:
    """Fresh engine hosts + a control host with the image loaded; returns the inventory path and the hosts."""
    simctl.down(prefix)
    hosts = simctl.up(engines, "800I_A2", prefix=prefix, control=True)
    inventory = state / f"inventory-{engines}.yml"
    simctl.write_inventory(hosts, inventory)
    simctl.load_image(prefix, image)
    return inventory, hosts


def ansible_env(profile: bool = True) -> dict:
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    if profile:
        env.update({"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks", "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "25"})
    return env


class Run(NamedTuple):
    seconds: float
    changed: dict  # {host: changed count} from the recap
    cpu: dict  # CpuMeter.stop()


def deploy(inventory: Path, config: Path, plan_output: Path, log: Path, prefix: str, image: str = DEPLOY_IMAGE,
           extra_vars: list[str] | None = None) -> Run:
    """Run playbooks/deploy.yml (readiness included) with profile_tasks; the log goes to log."""
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "deploy.yml"),
            "-e", f"motor_config_dir={config}", "-e", f"motor_image={image}",
            "-e", f"motor_plan_output={plan_output}", "-e", "motor_service_ready_timeout=300"]
    for var in extra_vars or []:
        argv += ["-e", var]
    meter = CpuMeter(prefix)
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    elapsed = time.monotonic() - start
    cpu = meter.stop()
    log.write_text(proc.stdout, encoding="utf-8")
    if proc.returncode != 0 or "all deploy end." not in proc.stdout:
        print(proc.stdout[-4000:])
        sys.exit(f"deploy failed (rc {proc.returncode}), log in {log}")
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)}
    return Run(elapsed, changed, cpu)


def top_tasks(log: Path, count: int = 8) -> list[tuple[str, float]]:
    """The slowest tasks of a run from profile_tasks' recap (name, seconds)."""
    text = log.read_text(encoding="utf-8")
    recap = text.split("TASKS RECAP", 1)[-1]
    tasks = [(m.group(1).strip(), float(m.group(2)))
             for m in re.finditer(r"^(.+?) -{2,} (\d+\.\d+)s$", recap, re.M)]
    return tasks[:count]


# --------------------------------------------------------------------------------------------- floor

# Daemon defaults: flags equal to these are left out of the generated docker run.
_DEFAULT_IPC = {"", "private", "shareable"}
_DEFAULT_SHM = 64 * 1024 * 1024


def inspect(host: str, names: list[str]) -> list[dict]:
    rc, out = simctl.host_exec(host, ["docker", "inspect", *names])
    if rc != 0:
        raise RuntimeError(f"docker inspect on {host} failed: {out}")
    return json.loads(out)


def container_spec(info: dict, image_config: dict) -> dict:
    """What a container was created with (what `docker run` flags decide), minus what the image supplies."""
    cfg, host = info["Config"], info["HostConfig"]
    image_env = set(image_config.get("Env") or [])
    image_labels = image_config.get("Labels") or {}
    log = host.get("LogConfig") or {}
    return {
        "name": info["Name"].lstrip("/"),
        "image": cfg["Image"],
        "entrypoint": cfg.get("Entrypoint"),
        "cmd": cfg.get("Cmd"),
        "env": sorted(e for e in cfg.get("Env") or [] if e not in image_env),
        "labels": {k: v for k, v in sorted((cfg.get("Labels") or {}).items()) if image_labels.get(k) != v},
        "network": host.get("NetworkMode"),
        "ipc": host.get("IpcMode") or "",
        "shm_size": host.get("ShmSize") or 0,
        "privileged": bool(host.get("Privileged")),
        "devices": [f"{d['PathOnHost']}:{d['PathInContainer']}:{d['CgroupPermissions']}" for d in host.get("Devices") or []],
        "binds": sorted(host.get("Binds") or []),  # the order of bind mounts carries no meaning
        "restart": (host.get("RestartPolicy") or {}).get("Name") or "no",
        "log_driver": log.get("Type"),
        "log_opts": dict(sorted((log.get("Config") or {}).items())),
        "security_opt": sorted(host.get("SecurityOpt") or []),
    }


def job_specs(plan: dict) -> dict[str, list[dict]]:
    """{host: [spec, ...]} of every container of the plan's job, read from the hosts' Docker engines."""
    by_host: dict[str, list[str]] = {}
    for c in plan["containers"]:
        by_host.setdefault(c["host"], []).append(c["name"])
    out = {}
    for host, names in by_host.items():
        infos = inspect(host, names)
        rc, raw = simctl.host_exec(host, ["docker", "image", "inspect", infos[0]["Image"]])
        if rc != 0:
            raise RuntimeError(f"docker image inspect on {host} failed: {raw}")
        image_config = json.loads(raw)[0]["Config"]
        out[host] = [container_spec(i, image_config) for i in infos]
    return out


def docker_run_argv(spec: dict) -> list[str]:
    """The `docker run` that creates exactly spec (see container_spec)."""
    argv = ["docker", "run", "-d", "--name", spec["name"], "--network", spec["network"]]
    if spec["ipc"] not in _DEFAULT_IPC:
        argv += ["--ipc", spec["ipc"]]
    if spec["shm_size"] and spec["shm_size"] != _DEFAULT_SHM and spec["ipc"] != "host":
        argv += ["--shm-size", str(spec["shm_size"])]
    if spec["privileged"]:
        argv.append("--privileged")
    argv += ["--restart", spec["restart"], "--log-driver", spec["log_driver"]]
    for key, value in spec["log_opts"].items():
        argv += ["--log-opt", f"{key}={value}"]
    for env in spec["env"]:
        argv += ["-e", env]
    for dev in spec["devices"]:
        argv += ["--device", dev]
    for bind in spec["binds"]:
        argv += ["-v", bind]
    for key, value in spec["labels"].items():
        argv += ["--label", f"{key}={value}"]
    if spec["entrypoint"]:
        argv += ["--entrypoint", spec["entrypoint"][0]]
    argv.append(spec["image"])
    argv += (spec["entrypoint"] or [])[1:] + (spec["cmd"] or [])
    return argv


def floor_script(plan: dict, specs: dict[str, list[dict]], expected_endpoints: list[str], poll: float = 1.0,
                 timeout: int = 300) -> str:
    """A plain bash script: the same docker runs, host by host (control host first, tiers in order), one at a
    time via `docker exec <simulated host>`, then the same three readiness checks deploy.yml makes."""
    tier = {c["name"]: (c["tier"], i) for i, c in enumerate(plan["containers"])}
    hosts = sorted(specs, key=lambda h: min(tier[s["name"]] for s in specs[h]))
    lines = ["#!/usr/bin/env bash",
             f"# Floor for job {plan['job_id']}: generated by bench/deploy_floor from `docker inspect` of the",
             "# containers playbooks/deploy.yml created. Sequential docker runs, host by host, then readiness.",
             "set -euo pipefail",
             "t0=$(date +%s%N)",
             'elapsed() { local ms=$(( ($(date +%s%N) - t0) / 1000000 )); printf "%d.%03d" $((ms / 1000)) $((ms % 1000)); }']
    for host in hosts:
        lines.append(f"# --- {host}")
        for spec in sorted(specs[host], key=lambda s: tier[s["name"]]):
            lines.append(f"docker exec {shlex.quote(host)} " + shlex.join(docker_run_argv(spec)) + " >/dev/null")
    ctl, coord, cond = plan["controller"], plan["coordinator"], plan.get("kv_conductor")
    lines += ['echo "started $(elapsed)"',
              f"deadline=$(( $(date +%s) + {timeout} ))",
              'wait_for() {  # wait_for <what> <command...>: poll until the command succeeds',
              '  local what=$1; shift',
              '  until "$@"; do',
              '    if (( $(date +%s) > deadline )); then echo "timeout waiting for $what" >&2; exit 1; fi',
              f"    sleep {poll}",
              "  done",
              "}",
              "# 1. the controller port answers HTTP at all (any status), as deploy.yml's first check",
              f"controller_answers() {{ [ \"$(curl -s -o /dev/null -m 5 -w '%{{http_code}}' "
              f"http://{ctl['ip']}:{ctl['api_port']}/readiness)\" != 000 ]; }}",
              "wait_for controller controller_answers",
              "# 2. the coordinator reports ready (instances assembled)",
              f"coordinator_ready() {{ curl -s -m 5 http://{coord['ip']}:{coord['mgmt_port']}/readiness "
              "| grep -Eq '\"ready\": *true'; }",
              "wait_for coordinator coordinator_ready"]
    if expected_endpoints and cond:
        lines += ["# 3. the KV conductor lists the KV-event endpoint of every prefill DP rank",
                  f"expected=({' '.join(shlex.quote(e) for e in expected_endpoints)})",
                  "conductor_complete() {",
                  f"  local services; services=$(curl -s -m 5 http://{cond['ip']}:{cond['port']}/services) || return 1",
                  '  for e in "${expected[@]}"; do grep -qF "\\"Endpoint\\":\\"$e\\"" <<<"$services" || return 1; done',
                  "}",
                  "wait_for conductor conductor_complete"]
    lines.append('echo "ready $(elapsed)"')
    return "\n".join(lines) + "\n"


def reset_hosts(plan: dict) -> None:
    """Back to the first-deploy state: the job's containers, config and log directories and the startup-script
    cache gone from every host of the plan (the image stays)."""
    job = plan["job_id"]
    for host in sorted({c["host"] for c in plan["containers"]}):
        rc, out = simctl.host_exec(
            host, f"ids=$(docker ps -aq --filter label=io.pymotor.job={job}); [ -z \"$ids\" ] || docker rm -f $ids; "
                  f"rm -rf /etc/pymotor/{job} /var/log/pymotor/{job} /var/cache/pymotor/startup")
        if rc != 0:
            raise RuntimeError(f"reset of {host} failed: {out}")


def remove_job_containers(plan: dict) -> None:
    """docker rm -f the job's containers only: config directories, logs and the startup cache stay."""
    by_host: dict[str, list[str]] = {}
    for c in plan["containers"]:
        by_host.setdefault(c["host"], []).append(c["name"])
    for host, names in by_host.items():
        rc, out = simctl.host_exec(host, ["docker", "rm", "-f", *names])
        if rc != 0:
            raise RuntimeError(f"docker rm on {host} failed: {out}")
