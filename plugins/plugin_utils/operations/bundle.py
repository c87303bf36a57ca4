# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""collect_logs.yml: the files of the support bundle of one host, from what the host tasks read (pure, no I/O)."""

from __future__ import annotations

import base64
import json
import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import mask_document


def _text(result: dict, *keys) -> str:
    return "".join(str((result or {}).get(key) or "") for key in keys)


def host_files(read: dict, config_root: str) -> list:
    """``read``: the registered results ``job`` (pymotor.ascend.motor_job_info with logs and engine_info: the log
    tails of the job's containers and the engine's information), ``configs`` (a loop of slurp over the rendered
    configs) and ``npu_smi`` (a command). Returns the files of the host's part of the bundle, ``{path, text}``,
    secrets masked."""
    files = []
    job = read.get("job") or {}
    for entry in job.get("logs") or []:
        name = re.sub(r"^/", "", str(entry.get("name") or entry.get("id") or "unknown"))
        files.append({"path": "logs/%s.log" % name, "text": _text(entry, "stdout") + "\n" + _text(entry, "stderr")})
    root = re.escape(str(config_root).rstrip("/"))
    for result in (read.get("configs") or {}).get("results") or []:
        path = re.sub("^%s/?" % root, "", str((result.get("item") or {}).get("path") or ""))
        text = base64.b64decode(result.get("content") or "").decode("utf-8", errors="replace")
        files.append({"path": "configs/" + path, "text": text})
    npu = read.get("npu_smi") or {}
    files.append({"path": "npu-smi-info.txt", "text": _text(npu, "stdout") + (_text(npu, "stderr") or _text(npu, "msg"))})
    engine = job.get("engine") or {}
    docker_info = json.dumps(engine, indent=2, sort_keys=True) + "\n" if engine else _text(job, "msg")
    files.append({"path": "docker-info.txt", "text": docker_info})
    return [{"path": f["path"], "text": mask_document(f["text"])} for f in files]
