"""Read-only look at the host surface a PyMotor deploy needs, in one round trip (run as python3 -c <this file> <args>).

Argument: one JSON object {paths, ports, npu_ids, link_ids, hccn_tool, model_dirs, disk_path}.
Prints one JSON object: paths (path -> exists), listening (asked ports in LISTEN state), npu_health
(davinci id -> npu-smi health or "absent"), npu_error, links (NPU id -> hccn_tool link status), models
(dir -> ok / missing / no config.json), free_mb (free MiB where disk_path lives).
"""

import os
import re
import shutil

import json
import shutil as _sh
import subprocess
import sys

LISTEN = "0A"


def listening_ports():
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == LISTEN:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def npu_health(wanted):
    """davinci id -> health, from `npu-smi info -m` (NPU/chip -> logic id) and `npu-smi info`."""
    if not wanted:
        return {}, ""
    tool = _sh.which("npu-smi", path=os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/local/bin")
    if not tool:
        return {str(i): "npu-smi not found" for i in wanted}, "npu-smi not found"
    rc, mapping_out, err = run([tool, "info", "-m"])
    if rc != 0:
        return {str(i): "npu-smi failed" for i in wanted}, (mapping_out + err).strip()
    logic = {}
    for line in mapping_out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit() and fields[2].isdigit():
            logic[(int(fields[0]), int(fields[1]))] = int(fields[2])
    rc, info_out, err = run([tool, "info"])
    if rc != 0:
        return {str(i): "npu-smi failed" for i in wanted}, (info_out + err).strip()
    health = {}
    first = re.compile(r"^\|\s*(\d+)\s+\S[^|]*\|\s*([A-Za-z]+)\s*\|")
    second = re.compile(r"^\|\s*(\d+)(?:\s+\d+)?\s*\|\s*[0-9A-Fa-f]{4}:")
    pending = None
    for line in info_out.splitlines():
        match = first.match(line)
        if match and pending is None:
            pending = (int(match.group(1)), match.group(2))
            continue
        match = second.match(line)
        if match and pending is not None:
            npu, state = pending
            device = logic.get((npu, int(match.group(1))), npu)
            health[device] = state
        pending = None
    return {str(i): health.get(i, "absent") for i in wanted}, ""


def main():
    params = {"paths": [], "ports": [], "npu_ids": [], "link_ids": [], "model_dirs": [],
              "hccn_tool": "/usr/local/Ascend/driver/tools/hccn_tool", "disk_path": "/var/log"}
    params.update(json.loads(sys.argv[1]))
    paths = {path: os.path.exists(path) for path in params["paths"]}
    bound = listening_ports()
    listening = sorted(port for port in set(params["ports"]) if port in bound)
    health, npu_error = npu_health(params["npu_ids"])
    links = {}
    for npu in params["link_ids"]:
        if not os.path.exists(params["hccn_tool"]):
            links[str(npu)] = "hccn_tool not found"
            continue
        rc, out, err = run([params["hccn_tool"], "-i", str(npu), "-link", "-g"])
        match = re.search(r"link status:\s*(\w+)", out)
        links[str(npu)] = match.group(1) if rc == 0 and match else (out + err).strip() or "rc %d" % rc
    models = {}
    for model in params["model_dirs"]:
        if not os.path.isdir(model):
            models[model] = "missing"
        elif not os.path.isfile(os.path.join(model, "config.json")):
            models[model] = "no config.json"
        else:
            models[model] = "ok"
    disk = params["disk_path"]
    while disk and not os.path.exists(disk):
        disk = os.path.dirname(disk)
    free_mb = shutil.disk_usage(disk or "/").free // (1024 * 1024)
    print(json.dumps({"paths": paths, "listening": listening, "npu_health": health, "npu_error": npu_error,
                      "links": links, "models": models, "free_mb": free_mb}))


if __name__ == "__main__":
    main()
