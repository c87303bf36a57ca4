"""Startup contract: upstream PyMotor's real startup scripts and the stand-in's, on the SAME config directories.

The collection renders every container's config directory (plan -> reconcile.specs.configmaps ->
module_utils.motor_configmap.wanted_files, the code motor_containers runs on the hosts) twice: once with upstream's
``examples/deployer/startup`` as the image's scripts, once with the stand-in's. Both are booted the way the deploy
starts a container (``bash -c "source $CONFIGMAP_PATH/boot.sh"`` with the container's Docker env) inside the stand-in
image (bash, python3; nothing of it runs), with recording stubs ahead on PATH for what the scripts start (``python3 -m
...``, hccl_tools.py, mooncake_master, mooncake_conductor): upstream's side has upstream's ``examples/deployer``
mounted at /tmp/motor/examples/deployer (its lib/ for mooncake_config.py), as in the real image. For every role the
two must agree on: the scripts sourced, the injected set_*_env functions called (bash xtrace), the command started
and its environment (every command, in any order, for the single container of deploy_mode single_container),
the Mooncake config files written, the exit code; and they must fail alike on broken
directories (role scripts only under roles/, no user_config.json). Skips with the reason when the upstream tree
(MOTOR_UPSTREAM_PYMOTOR, default ../shared/upstream/pymotor) is absent. Nothing of upstream is copied here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_configmap import wanted_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps

REPO_ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(os.environ.get("MOTOR_UPSTREAM_PYMOTOR") or REPO_ROOT.parent / "shared" / "upstream" / "pymotor")
UPSTREAM_DEPLOYER = UPSTREAM / "examples" / "deployer"
STANDIN_STARTUP = REPO_ROOT / "tests" / "sim" / "motor_image" / "startup"
ENV_FUNCTIONS = yaml.safe_load((REPO_ROOT / "roles/motor_service/vars/main.yml").read_text())["motor_service_env_functions"]


def hosts(hardware_type: str) -> dict:
    engine = {"group_names": ["motor_engine_hosts"], "motor_hardware_type": hardware_type}
    return {"e1": dict(engine, motor_host_ip="10.0.0.1"), "e2": dict(engine, motor_host_ip="10.0.0.2"),
            "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]}}

SEEDS = ("seed_pd_separation", "seed_pd_hybrid")
# Started by upstream only, optional there ("not necessary if no ccae"): not part of the contract.
OPTIONAL = ("ccae_reporter",)
# Set by the scripts' own helpers in ways that differ by design (jemalloc, CANN set_env.sh, driver tools, shell).
IGNORED_ENV = {"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PWD", "OLDPWD", "SHLVL", "_", "CONTRACT_LOG",
               "CONTRACT_REAL_PYTHON", "HCCL_PATH", "RANKTABLE_PATH", "MOTOR_LOG_PATH", "ASCEND_WORK_PATH",
               "ASCEND_CACHE_PATH", "HOSTNAME", "HOME", "PYTHONDONTWRITEBYTECODE"}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pytestmark = [pytest.mark.docker, pytest.mark.skipif(
    not (UPSTREAM_DEPLOYER / "startup" / "boot.sh").is_file(),
    reason=f"upstream PyMotor tree not found at {UPSTREAM} (set MOTOR_UPSTREAM_PYMOTOR): no startup contract to check")]

# python3 ahead on PATH: records `-m <module>` starts and hccl_tools.py (hardware), runs everything else for real.
PYTHON_STUB = r'''#!/bin/sh
case "$1" in
  -m|*hccl_tools.py) exec "$CONTRACT_REAL_PYTHON" /contract/record.py python3 "$@" ;;
esac
exec "$CONTRACT_REAL_PYTHON" "$@"
'''
RECORD = r'''import json, os, sys
with open(os.environ["CONTRACT_LOG"], "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ)}) + "\n")
'''
BIN_STUB = '#!/bin/sh\nexec "$CONTRACT_REAL_PYTHON" /contract/record.py "$(basename "$0")" "$@"\n'
# One case: boot the directory with the container's env (env -i: nothing of the driver leaks in), xtrace to a file.
DRIVER = r'''#!/bin/bash
export CONTRACT_REAL_PYTHON=$(command -v python3)
install -m 0755 /contract/mooncake_conductor /usr/local/bin/mooncake_conductor
for case in /cases/*/; do
  name=$(basename "$case")
  mkdir -p "/out/$name"
  env_args=()
  while IFS= read -r -d '' kv; do env_args+=("$kv"); done < "$case/env0"
  (cd / && env -i "${env_args[@]}" PATH="/contract/bin:/usr/local/bin:/usr/bin:/bin" \
      CONTRACT_REAL_PYTHON="$CONTRACT_REAL_PYTHON" CONTRACT_LOG="/out/$name/launches.jsonl" \
      CONFIGMAP_PATH="/cases/$name/dir" CONFIG_PATH="/out/$name/conf" CONFIG_SYNC_INTERVAL=3600 \
      BASH_XTRACEFD=7 timeout 60 bash -x -c 'source "$CONFIGMAP_PATH/boot.sh"' \
      >"/out/$name/stdout" 2>"/out/$name/stderr" 7>"/out/$name/xtrace")
  echo $? >"/out/$name/rc"
  pid_file="/out/$name/conf/user_config_sync.pid"
  [ -f "$pid_file" ] && kill "$(cat "$pid_file")" 2>/dev/null
done
true
'''


def one_per_role(plan: dict) -> list:
    """One container per role that starts with the image's boot.sh (the KV watcher runs its own command)."""
    seen, out = set(), []
    for c in plan["containers"]:
        if c["role"] not in seen and not c.get("command"):
            seen.add(c["role"])
            out.append(c)
    return out


def render(container: dict, startup: Path, dest: Path) -> None:
    (cmap,) = configmaps([container], ENV_FUNCTIONS)
    for rel, content in wanted_files(str(startup), cmap).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(0o755 if rel.endswith(".sh") else 0o644)


def break_dir(path: Path, how: str) -> None:
    if how == "roles_only":  # the layout the collection rendered before issue 17: role scripts under roles/
        (path / "roles").mkdir()
        for name in ("controller.sh", "coordinator.sh", "engine.sh", "kv_pool.sh", "kv_conductor.sh"):
            if (path / name).exists():
                (path / name).rename(path / "roles" / name)
    elif how == "no_user_config":
        (path / "user_config.json").unlink()


def boot_all(image: str, workdir: Path, side: str, cases: dict) -> dict:
    """Boot every case of one side in one container of ``image``; {case: result}."""
    root = workdir / side
    contract = root / "contract"
    (contract / "bin").mkdir(parents=True)
    (contract / "record.py").write_text(RECORD)
    (contract / "driver.sh").write_text(DRIVER)
    for name, text in (("bin/python3", PYTHON_STUB), ("bin/mooncake_master", BIN_STUB),
                       ("bin/engine_server", BIN_STUB), ("mooncake_conductor", BIN_STUB)):
        (contract / name).write_text(text)
        (contract / name).chmod(0o755)
    (root / "out").mkdir()
    for name, (container, how) in cases.items():
        case = root / "cases" / name
        render(container, UPSTREAM_DEPLOYER / "startup" if side == "upstream" else STANDIN_STARTUP, case / "dir")
        if how:
            break_dir(case / "dir", how)
        (case / "env0").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in container["env"].items()
                                             if k not in ("CONFIGMAP_PATH", "CONFIG_PATH")))
    argv = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "bash",
            "-v", f"{contract}:/contract:ro", "-v", f"{root / 'cases'}:/cases:ro", "-v", f"{root / 'out'}:/out"]
    if side == "upstream":  # the real image has the deployer tree (lib/, patch/) at this path
        argv += ["-v", f"{UPSTREAM_DEPLOYER}:/tmp/motor/examples/deployer:ro"]
        # lib/utils.py imports yaml (PyYAML is in the real image): this side gets the test venv's pure-Python copy
        argv += ["-v", f"{Path(yaml.__file__).parent}:/usr/lib/python3/dist-packages/yaml:ro"]
    subprocess.run(argv + [image, "/contract/driver.sh"], check=True, timeout=600)
    # the functions the collection injects into this container's scripts (upstream's common.sh has its own
    # set_mf_store_env, which engine.sh calls outside SGLang jobs too: not an injected one then)
    injected = {name: {fn for fns in configmaps([c], ENV_FUNCTIONS)[0]["functions"].values() for fn in fns}
                for name, (c, _) in cases.items()}
    return {name: result(root / "out" / name, f"/cases/{name}/dir", injected[name]) for name in cases}


def result(out: Path, configmap: str, injected: set) -> dict:
    """What the contract compares. Both sides use the same paths in their container (/cases/<case>/dir,
    /out/<case>/conf); the config directory is shown as $CONFIGMAP_PATH."""
    def norm(text: str) -> str:
        return text.replace(configmap, "$CONFIGMAP_PATH")

    xtrace = (out / "xtrace").read_text(errors="replace") if (out / "xtrace").exists() else ""
    # scripts of the config directory sourced (upstream's set_cann_env also sources CANN's set_env.sh: not ours)
    sourced = [Path(m).name for m in re.findall(r"^\++ (?:source|\.) (\S+)", xtrace, re.M) if m.startswith(configmap)]
    called = [m for m in re.findall(r"^\++ (set_[a-z_]+_env)\s*$", xtrace, re.M) if m in injected]
    launches, hardware = [], []
    for line in (out / "launches.jsonl").read_text().splitlines() if (out / "launches.jsonl").exists() else []:
        rec = json.loads(line)
        argv = [norm(a) for a in rec["argv"]]
        if any(a.endswith("hccl_tools.py") for a in argv):
            hardware.append(argv)  # upstream's ranktable from the NPUs (lspci, hccn_tool): the stand-in has none
            continue
        if argv[:2] == ["python3", "-m"]:
            if argv[2].startswith(OPTIONAL):
                continue
            # the stand-in's modules stand for PyMotor's: motor_sim.controller = motor.controller.main
            argv[2] = re.sub(r"^motor_sim\.(\w+)$", r"motor.\1.main", argv[2])
        env = {k: norm(v) for k, v in rec["env"].items() if k not in IGNORED_ENV and not k.startswith("BASH")}
        launches.append({"argv": argv, "env": env})
    # the single container starts its processes in the background: their records may land in any order
    launches.sort(key=lambda x: (x["argv"], x["env"].get("ROLE", ""), x["env"].get("INDEX", "")))
    conf = out / "conf"
    files = {p.name: json.loads(p.read_text()) for p in sorted(conf.glob("kv_*_config.json"))} if conf.is_dir() else {}
    return {"rc": int((out / "rc").read_text()), "sourced": sourced, "called": called, "launches": launches,
            "hardware": hardware, "files": files, "stderr": (out / "stderr").read_text(errors="replace"),
            "stdout": (out / "stdout").read_text(errors="replace")}


@pytest.fixture(scope="module")
def booted(tmp_path_factory):
    standin = _load("motor_standin_build_contract", REPO_ROOT / "tests/sim/motor_image/build.py")
    image = standin.ensure_standin_image()
    cases = {}
    for seed in SEEDS:
        for c in SEED_CONTAINERS[seed]:
            cases[f"{seed}-{c['role']}"] = (c, None)
            if seed == SEEDS[0] and c["role"] in BROKEN_ROLES:
                for how in sorted(BROKEN):
                    cases[f"{seed}-{c['role']}-{how}"] = (c, how)
    cases[SINGLE] = (single_container(), None)
    work = tmp_path_factory.mktemp("contract")
    try:
        return {"upstream": boot_all(image, work, "upstream", cases),
                "standin": boot_all(image, work, "standin", cases), "cases": sorted(cases)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def seed_containers(seed: str) -> list:
    """One container per role of the seed's plan, on the planner's test hosts."""
    user = json.loads((REPO_ROOT / "examples" / seed / "user_config.json").read_text())
    env = json.loads((REPO_ROOT / "examples" / seed / "env.json").read_text())
    return one_per_role(build_plan(normalize(user, env), hosts(user["motor_deploy_config"]["hardware_type"])))


SEED_CONTAINERS = {seed: seed_containers(seed) for seed in SEEDS}


def single_container() -> dict:
    """The one container of upstream's newer single_container example (deploy_mode single_container: coordinator,
    controller, KV pool master and a node manager per instance from all_combine_in_single_container.sh)."""
    folder = REPO_ROOT / "tests/fixtures/upstream_newer/examples/infer_engines/vllm/single_container"
    user = json.loads((folder / "user_config.json").read_text())
    user["motor_deploy_config"]["image_name"] = "pymotor:example"
    env = json.loads((folder / "env.json").read_text())
    (container,) = build_plan(normalize(user, env), hosts(user["motor_deploy_config"]["hardware_type"]))["containers"]
    return container


SINGLE = "single_container"
BROKEN = {"roles_only", "no_user_config"}
BROKEN_ROLES = ("controller", "prefill", "kv_conductor")  # one control-plane role, an engine, the conductor


def _cases(kind: str | None) -> list:
    if kind is None:
        return [f"{seed}-{c['role']}" for seed in SEEDS for c in SEED_CONTAINERS[seed]] + [SINGLE]
    return [f"{SEEDS[0]}-{c['role']}-{kind}" for c in SEED_CONTAINERS[SEEDS[0]] if c["role"] in BROKEN_ROLES]


def explain(name: str, up: dict, sim: dict) -> str:
    return (f"{name}\n--- upstream stderr ---\n{up['stderr'][-1500:]}\n--- stand-in stderr ---\n{sim['stderr'][-1500:]}")


@pytest.mark.parametrize("name", _cases(None))
def test_both_startups_agree_on_a_rendered_directory(booted, name):
    up, sim = booted["upstream"][name], booted["standin"][name]
    why = explain(name, up, sim)
    assert up["rc"] == sim["rc"] == 0, why
    assert up["sourced"] == sim["sourced"], why  # boot.sh -> common.sh -> the flat role script
    assert up["sourced"][-1].endswith(".sh") and "/" not in up["sourced"][-1]
    assert up["called"] == sim["called"] and up["called"][0] == "set_common_env", why
    assert [x["argv"] for x in up["launches"]] == [x["argv"] for x in sim["launches"]], why
    assert up["launches"], f"{name}: nothing started"
    for u, s in zip(up["launches"], sim["launches"]):
        assert u["env"] == s["env"], {k: (u["env"].get(k), s["env"].get(k))
                                      for k in set(u["env"]) | set(s["env"]) if u["env"].get(k) != s["env"].get(k)}
    assert up["files"] == sim["files"], why  # kv_cache_pool_config.json / kv_conductor_config.json, same content


@pytest.mark.parametrize("name", _cases("roles_only"))
def test_both_fail_alike_with_role_scripts_only_under_roles(booted, name):
    up, sim = booted["upstream"][name], booted["standin"][name]
    why = explain(name, up, sim)
    assert up["rc"] == sim["rc"] == 1, why
    assert not up["launches"] and not sim["launches"], why
    # common.sh (and set_common_env) first, then the role script is looked for next to boot.sh
    assert up["called"] == sim["called"] == ["set_common_env"], why
    assert up["sourced"][:2] == sim["sourced"][:2] == ["boot.sh", "common.sh"], why
    missing = re.compile(r"/(\w+\.sh): No such file or directory")
    assert missing.findall(up["stderr"]) == missing.findall(sim["stderr"]) != [], why


@pytest.mark.parametrize("name", _cases("no_user_config"))
def test_both_go_on_alike_without_user_config(booted, name):
    """PyMotor's common.sh does not stop: USER_CONFIG_PATH points at the missing file and the component starts (it
    then runs on defaults); mooncake_config.py reports the missing file and writes nothing."""
    up, sim = booted["upstream"][name], booted["standin"][name]
    why = explain(name, up, sim)
    assert up["rc"] == sim["rc"], why
    assert [x["argv"] for x in up["launches"]] == [x["argv"] for x in sim["launches"]] != [], why
    for u, s in zip(up["launches"], sim["launches"]):
        assert u["env"]["USER_CONFIG_PATH"] == s["env"]["USER_CONFIG_PATH"] == "$CONFIGMAP_PATH/user_config.json"
    assert up["files"] == sim["files"] == {}, why
    assert up["called"] == sim["called"] and up["sourced"] == sim["sourced"], why
    # mooncake_config.py (pool for engines, conductor) reports the missing file in PyMotor's words on both sides
    text = "ERROR - user_config.json does not exist"
    assert (text in up["stdout"] + up["stderr"]) == (text in sim["stdout"] + sim["stderr"]), why
