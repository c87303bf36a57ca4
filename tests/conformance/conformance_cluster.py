"""Helpers the deploy suites of the conformance suite share (test_deploy.py, test_multipod.py): JSON over HTTP to the
real control plane, the byte-level tokenizer the real coordinator needs, copied into the simulated hosts, and what
the hosts' containers say (states and log tails, for evidence and failure messages)."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import model_fixture

# The model directories of the seed configs (examples/seed_*), present on every simulated host (tests/sim/host/rootfs)
MODEL_DIRS = ("/mnt/weight/qwen3_8B", "/mnt/weight/Qwen3-0.6B")


def http(url: str, body: dict | None = None, timeout: float = 10) -> tuple[int, object]:
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"}, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw.strip().startswith((b"{", b"[")) else raw.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def install_tokenizer(hosts: list[dict], tmp: Path) -> None:
    """The real coordinator tokenizes for KV-cache affinity: give every host a byte-level tokenizer in the seed's
    model directories (the simulated hosts carry a word-level one, useless to a real prefix index)."""
    model_dir = model_fixture.write_model_dir(tmp / "model")
    for host in hosts:
        for target in MODEL_DIRS:
            for name in ("tokenizer.json", "tokenizer_config.json"):
                subprocess.run(["docker", "cp", str(model_dir / name), f"{host['name']}:{target}/{name}"],
                               check=True, capture_output=True)


def containers_text(hosts: list[dict]) -> str:
    """Every container of every simulated host with its status, one line per host."""
    import simctl  # noqa: PLC0415 (tests/sim is on sys.path once a suite imported it)

    lines = []
    for host in hosts:
        rc, out = simctl.host_exec(host["name"], "docker ps -a --format '{{.Names}} {{.Status}}'")
        lines.append(f"{host['name']} ({host['ip']}, rc {rc}): {out.strip()}")
    return "\n".join(lines)


def logs_text(hosts: list[dict], name_part: str, tail: int = 60) -> str:
    """The last ``tail`` log lines of every container whose name contains ``name_part``, on every host."""
    import simctl  # noqa: PLC0415

    out = []
    for host in hosts:
        names = simctl.host_exec(host["name"], f"docker ps -a --format '{{{{.Names}}}}' | grep -- '{name_part}'")[1]
        for name in names.split():
            rc, log = simctl.host_exec(host["name"], f"docker logs --tail {tail} {name} 2>&1")
            out.append(f"--- {host['name']}/{name} (rc {rc})\n{log}")
    return "\n".join(out)
