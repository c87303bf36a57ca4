"""The PyMotor stand-in image on two simulated Ascend hosts, started by hand the way the deployer
will: config dir with the startup scripts copied out of the image, injected set_*_env functions,
user_config.json from the seed PD-separation + KV-affinity config, --net=host containers.

host 1: kv_pool, controller (2026/2027), coordinator (1025-1027), kv_conductor (13333, the fixture
        conductor built from the fixture Mooncake repository), prefill instance p0 (NM 3026)
host 2: prefill instance p1 (NM 3026), decode instance d0 (NM 4026, engine base port 11000)
Each instance: DP 2 x TP 2 = 4 NPUs, KV events on 5557/5558, replay 6667/6668.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
import requests

import build_conductor
import simctl
from motor_sim.tokenizer import Tokenizer
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.affinity import parse_prefix_cache
from support import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    """Import a file under a unique name ("build" would clash with PyPI's build package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


standin_build = _load("motor_standin_build", REPO_ROOT / "tests/sim/motor_image/build.py")

pytestmark = pytest.mark.docker

PREFIX = "pymotor-standin" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own sim hosts, e.g. "-strict"
SEED = REPO_ROOT / "tests/unit/fixtures/configs/seed_pd_separation"
STARTUP_IN_IMAGE = "/tmp/motor/examples/deployer/startup"
CONFIGMAP = "/opt/pymotor/configmap"
CONFIG_PATH = "/usr/local/Ascend/pyMotor/conf"
WEIGHTS = "/mnt/weight"
CONDUCTOR_PORT = 13333
BLOCK_SIZE = 128  # the seed sets no block-size: vLLM's default on Ascend
MODEL = "qwen3-8B"
READY_TIMEOUT = 90
# A shared system prompt of ~1100 tokens (8 full blocks) with the stand-in byte tokenizer.
PREFIX_A = "You are the support assistant of an Ascend cluster. " * 22
PREFIX_B = "Summarise the following maintenance log in two sentences. " * 20


# ------------------------------------------------------------------------------- configuration

def user_config() -> dict:
    """The seed config, remapped so that components sharing a host do not collide (host network)."""
    config = json.loads((SEED / "user_config.json").read_text())
    config["motor_deploy_config"]["p_instances_num"] = 2
    config["motor_controller_config"] = {"api_config": {"controller_api_port": 2026, "observability_api_port": 2027}}
    for role, nm_port, base_port in (("prefill", 3026, 10000), ("decode", 4026, 11000)):
        config[f"motor_engine_{role}_config"]["motor_nodemanger_config"] = {
            "api_config": {"node_manager_port": nm_port}, "endpoint_config": {"base_port": base_port}}
    return config


def env_functions(without: str | None = None) -> dict[str, str]:
    """{script: shell functions to prepend}: what deploy.py's set_env_to_shell injects (common env
    plus each role's env.json section as export lines). `without` leaves one function out."""
    env = json.loads((SEED / "env.json").read_text())
    common = {**env["motor_common_env"], "ENGINE_TYPE": "vllm", "MODEL_NAME": MODEL, "SERVICE_ID": "mindie-motor"}
    sections = {"set_common_env": ("common.sh", {}), "set_controller_env": ("controller.sh", env["motor_controller_env"]),
                "set_coordinator_env": ("coordinator.sh", env["motor_coordinator_env"]),
                "set_prefill_env": ("engine.sh", env["motor_engine_prefill_env"]),
                "set_decode_env": ("engine.sh", env["motor_engine_decode_env"]),
                "set_kv_pool_env": ("kv_pool.sh", env["motor_kv_cache_pool_env"]),
                # the collection's workaround (docs/design.md): mooncake_config.py imports lib.utils from the image
                "set_kv_conductor_env": ("kv_conductor.sh", {**env["motor_kv_conductor_env"],
                                                             "PYTHONPATH": "/tmp/motor/examples/deployer"})}
    scripts: dict[str, str] = {}
    for name, (script, values) in sections.items():
        if name == without:
            continue
        exports = "".join(f'    export {k}="{v}"\n' for k, v in {**common, **values}.items())
        scripts[script] = scripts.get(script, "") + f"function {name}() {{\n{exports}}}\n"
    return scripts


def tar_of(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def prepare_configmap(host: str, image: str, path: str, functions: dict[str, str]) -> None:
    """Copy the startup scripts out of the image (flat, PyMotor's ConfigMap layout), add
    user_config.json and prepend the env functions, as the deployer does."""
    files = {"user_config.json": json.dumps(user_config(), indent=2),
             **{f"{script}.functions": text for script, text in functions.items()}}
    run_on(host, f"rm -rf {path} && mkdir -p {path} && cid=$(docker create {image}) && "
                 f"docker cp $cid:{STARTUP_IN_IMAGE}/. {path}/ && docker rm $cid >/dev/null && "
                 f"mv {path}/roles/*.sh {path}/ && rmdir {path}/roles")
    simctl.client().containers.get(host).put_archive(path, tar_of(files))
    run_on(host, f"cd {path} && for f in *.functions; do s=${{f%.functions}}; "
                 f"cat $f $s > $s.new && mv $s.new $s && chmod 755 $s && rm $f; done")


def run_on(host: str, cmd: str) -> str:
    rc, out = simctl.host_exec(host, cmd)
    assert rc == 0, f"{host}: {cmd}\n{out}"
    return out


# ----------------------------------------------------------------------------------- containers

def docker_run(host: dict, name: str, image: str, role: str, job: str, env: dict[str, str],
               npus: range = range(0), configmap: str = CONFIGMAP, detach: bool = True) -> tuple[int, str]:
    """docker run as the deployer would: --net=host, env, config dir and weights at the same path,
    the instance's NPUs plus the Ascend management devices."""
    env = {"CONFIGMAP_PATH": configmap, "CONFIG_PATH": CONFIG_PATH, "ROLE": role, "JOB_NAME": job,
           "POD_IP": host["ip"], "HOST_IP": host["ip"], "ASCEND_RUNTIME_OPTIONS": "NODRV", **env}
    devices = [f"/dev/davinci{i}" for i in npus]
    if devices:
        devices += ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    argv = ["docker", "run", "--name", name, "--net=host", "-u", "root",
            "-v", f"{configmap}:{configmap}", "-v", f"{WEIGHTS}:{WEIGHTS}:ro"]
    argv += ["-d"] if detach else []
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    for dev in devices:
        argv += ["--device", f"{dev}:{dev}:rwm"]
    argv += [image, "bash", "-c", "source $CONFIGMAP_PATH/boot.sh"]
    return simctl.host_exec(host["name"], argv)


def patched_image(base: str, binary: Path) -> str:
    """Stand-in image + fixture conductor at /usr/local/bin (the image-build role's job later)."""
    tag = f"local/pymotor-standin-conductor:{base.split(':')[1]}-{binary.name.rsplit('-', 1)[1][:8]}"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    with tempfile.TemporaryDirectory() as ctx:
        (Path(ctx) / "mooncake_conductor").write_bytes(binary.read_bytes())
        (Path(ctx) / "mooncake_conductor").chmod(0o755)
        (Path(ctx) / "Dockerfile").write_text(f"FROM {base}\nCOPY mooncake_conductor /usr/local/bin/mooncake_conductor\n")
        subprocess.run(["docker", "build", "-q", "-t", tag, ctx], check=True, capture_output=True,
                       env={**os.environ, "DOCKER_BUILDKIT": "0"})
    standin_build.remove_stale_tags(tag.split(":")[0], keep=tag)
    return tag



def get_json(url: str) -> dict | None:
    try:
        resp = requests.get(url, timeout=3)
        return resp.json() if resp.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def container_logs(hosts: list[dict]) -> str:
    out = []
    for host in hosts:
        _, names = simctl.host_exec(host["name"], "docker ps -a --format '{{.Names}} {{.Status}}'")
        out.append(f"===== {host['name']}:\n{names}")
        for line in names.splitlines():
            name = line.split()[0]
            _, logs = simctl.host_exec(host["name"], f"docker logs --tail 40 {name} 2>&1")
            out.append(f"----- {host['name']}/{name}:\n{logs}")
    return "\n".join(out)


# ------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def cluster(request):
    image = patched_image(standin_build.ensure_standin_image(), build_conductor.ensure_conductor_binary())
    simctl.down(PREFIX)  # leftovers of an interrupted run
    failed_before = request.session.testsfailed
    try:
        h1, h2 = simctl.up(2, "800I_A2", PREFIX)
        simctl.load_image(PREFIX, image)
        for host in (h1, h2):
            prepare_configmap(host["name"], image, CONFIGMAP, env_functions())
        start_cluster(h1, h2, image)
        yield {"h1": h1, "h2": h2, "image": image}
    finally:
        if request.session.testsfailed > failed_before:
            print(container_logs(simctl.hosts(PREFIX)))
        simctl.down(PREFIX)


def start_cluster(h1: dict, h2: dict, image: str) -> None:
    """Start order of PyMotor's docker-only guide: kv_pool, controller + coordinator (+ conductor),
    then the engine instances."""
    ip1 = h1["ip"]
    services = {"CONTROLLER_SERVICE": ip1, "COORDINATOR_SERVICE": ip1}
    pool = {"KVP_MASTER_SERVICE": ip1}
    runs = [
        (h1, "motor-kv-pool", "kv_pool", "mindie-motor-kv-pool", {**pool, "KV_POOL_PORT": "50088",
         "KV_POOL_EVICTION_HIGH_WATERMARK_RATIO": "0.9", "KV_POOL_EVICTION_RATIO": "0.1",
         "DEFAULT_KV_LEASE_TTL": "11000"}, range(0)),
        (h1, "motor-controller", "controller", "mindie-motor-controller", services, range(0)),
        (h1, "motor-kv-conductor", "kv_conductor", "mindie-motor-kv-conductor", pool, range(0)),
        (h1, "motor-coordinator", "coordinator", "mindie-motor-coordinator",
         {**services, "KV_CONDUCTOR_SERVICE": ip1}, range(0)),
        (h1, "motor-p0", "prefill", "mindie-motor-p0", {**services, **pool}, range(0, 4)),
        (h2, "motor-p1", "prefill", "mindie-motor-p1", {**services, **pool}, range(0, 4)),
        (h2, "motor-d0", "decode", "mindie-motor-d0", {**services, **pool}, range(4, 8)),
    ]
    for host, name, role, job, env, npus in runs:
        rc, out = docker_run(host, name, image, role, job, env, npus)
        assert rc == 0, f"docker run {name} on {host['name']} failed: {out}"


@pytest.fixture(scope="module")
def ready_cluster(cluster):
    mgmt = f"http://{cluster['h1']['ip']}:1026"

    def all_instances():
        state = get_json(f"{mgmt}/instances")
        if not state or not (get_json(f"{mgmt}/readiness") or {}).get("ready"):
            return None
        roles = sorted(i["role"] for i in state["instances"])
        return state["instances"] if roles == ["decode", "prefill", "prefill"] else None

    cluster["instances"] = wait_for(all_instances, READY_TIMEOUT, "coordinator ready with P, P and D")
    return cluster


# ---------------------------------------------------------------------------------------- tests

def chat(cluster: dict, system: str, question: str) -> requests.Response:
    body = {"model": MODEL, "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}
    resp = requests.post(f"http://{cluster['h1']['ip']}:1025/v1/chat/completions", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp


def query_conductor(cluster: dict, system: str, question: str) -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    tokens = list(Tokenizer.render_chat(messages).encode())
    resp = requests.post(f"http://{cluster['h1']['ip']}:{CONDUCTOR_PORT}/query",
                         json={"model": MODEL, "block_size": BLOCK_SIZE, "token_ids": tokens}, timeout=3)
    return resp.json()["default"]


def test_coordinator_registers_every_prefill_rank(ready_cluster):
    ip1, ip2 = ready_cluster["h1"]["ip"], ready_cluster["h2"]["ip"]
    services = get_json(f"http://{ip1}:{CONDUCTOR_PORT}/services")
    prefill_ids = {f"vllm-prefill-{i['id']}": i for i in ready_cluster["instances"] if i["role"] == "prefill"}
    got = {(s["InstanceID"], s["DPRank"]): s for s in services["services"]}
    assert services["count"] == 4 and {iid for iid, _ in got} == set(prefill_ids)
    for (iid, rank), svc in got.items():
        ip = prefill_ids[iid]["endpoints"][0]["ip"]
        assert ip in (ip1, ip2)
        assert svc["Endpoint"] == f"tcp://{ip}:{5557 + rank}"
        assert svc["ReplayEndpoint"] == f"tcp://{ip}:{6667 + rank}"
        assert (svc["Type"], svc["ModelName"], svc["BlockSize"], svc["TenantID"]) == ("vLLM", MODEL, BLOCK_SIZE, "default")


def prefix_counters(cluster: dict) -> dict:
    """{(conductor instance id, dp_rank): {"queries", "hits"}} of every prefill engine: vLLM's prefix-cache
    counters from the /metrics of its management port, what a real deployment exposes."""
    out = {}
    for inst in cluster["instances"]:
        if inst["role"] == "prefill":
            for ep in inst["endpoints"]:
                text = requests.get(f"http://{ep['ip']}:{ep['mgmt_port']}/metrics", timeout=3).text
                out[(f"vllm-prefill-{inst['id']}", ep["dp_rank"])] = parse_prefix_cache(text)
    return out


def chat_served(cluster: dict, system: str, question: str) -> tuple:
    """Send one chat; (the prefill engine whose query counter grew, its prefix-cache hit tokens)."""
    before = prefix_counters(cluster)
    resp = chat(cluster, system, question)
    assert "X-Motor-Prefill-Instance" not in resp.headers and "motor_sim" not in resp.json()
    after = prefix_counters(cluster)
    grew = [key for key in after if after[key]["queries"] > before[key]["queries"]]
    assert len(grew) == 1, (before, after)
    return grew[0], after[grew[0]]["hits"] - before[grew[0]]["hits"]


def test_tokenize_matches_the_engines_tokens(ready_cluster):
    inst = next(i for i in ready_cluster["instances"] if i["role"] == "prefill")
    ep = inst["endpoints"][0]
    messages = [{"role": "system", "content": PREFIX_A}, {"role": "user", "content": "hi"}]
    got = requests.post(f"http://{ep['ip']}:{ep['port']}/tokenize",
                        json={"model": MODEL, "messages": messages, "add_generation_prompt": True}, timeout=3).json()
    assert got["tokens"] == list(Tokenizer.render_chat(messages).encode()) and got["count"] == len(got["tokens"])


def test_shared_prefix_prompts_land_on_the_same_prefill_endpoint(ready_cluster):
    a, a_hit = chat_served(ready_cluster, PREFIX_A, "How do I check NPU health?")
    assert a_hit == 0

    # The prefill engine published its blocks; the conductor indexed them for that instance only.
    hits = query_conductor(ready_cluster, PREFIX_A, "How do I check NPU health?")
    tokens = len(Tokenizer.render_chat([{"role": "system", "content": PREFIX_A},
                                        {"role": "user", "content": "How do I check NPU health?"}]).encode())
    full_blocks = tokens // BLOCK_SIZE * BLOCK_SIZE
    assert hits[a[0]]["longest_matched"] == full_blocks > 4 * BLOCK_SIZE
    assert hits[a[0]]["DP"] == {str(a[1]): full_blocks}
    assert all(h["longest_matched"] == 0 for iid, h in hits.items() if iid != a[0])

    # Same long prefix, other question: routed by the conductor's match to the same endpoint (a prefix-cache hit
    # there), where round robin would have moved on.
    second, second_hit = chat_served(ready_cluster, PREFIX_A, "And how do I reset one?")
    assert second == a and second_hit >= 4 * BLOCK_SIZE

    # A cold prompt goes elsewhere (ties rotate), and its follow-up sticks to where it went.
    b1, _ = chat_served(ready_cluster, PREFIX_B, "Log 1: fan replaced.")
    b2, b2_hit = chat_served(ready_cluster, PREFIX_B, "Log 2: firmware upgraded.")
    assert b1[0] != a[0]
    assert b2 == b1 and b2_hit > 0

    # No subscription was dropped on the way (events lost during a reconnect are never replayed).
    _, conductor_log = simctl.host_exec(ready_cluster["h1"]["name"], "docker logs motor-kv-conductor 2>&1")
    assert "Failed to process message" not in conductor_log


@pytest.mark.parametrize(("case", "npus", "message"), [
    ("missing-env-function", range(0, 4), "shell function set_prefill_env is not defined"),
    ("too-few-npus", range(0, 2), "found 2 /dev/davinci* devices, need 4"),
], ids=["missing-set_prefill_env", "too-few-npus"])
def test_broken_prefill_container_exits_nonzero(ready_cluster, case, npus, message):
    """On host 1 with p0 running: such a container fails before binding any port."""
    host, image = ready_cluster["h1"], ready_cluster["image"]
    configmap = f"/opt/pymotor/{case}"
    functions = env_functions(without="set_prefill_env" if case == "missing-env-function" else None)
    prepare_configmap(host["name"], image, configmap, functions)
    env = {"CONTROLLER_SERVICE": host["ip"], "COORDINATOR_SERVICE": host["ip"]}
    rc, out = docker_run(host, f"motor-{case}", image, "prefill", f"mindie-motor-{case}", env, npus,
                         configmap=configmap, detach=False)
    assert rc == 1, out
    assert message in out
