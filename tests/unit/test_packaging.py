# -*- coding: utf-8 -*-
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The installed-collection way: build the tarball, install it into a temporary path (offline), run
pymotor.ascend.validate and pymotor.ascend.plan from there; what the tarball holds; the EE definition renders offline."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SEED = REPO / "tests" / "unit" / "fixtures" / "configs" / "seed_pd_separation"
NEVER_PACKED = (".venv/", ".build/", ".ci/", "tests/output/", ".pytest_cache/", ".hypothesis/", "bench/", "scripts/",
                "tests/sim/", "tests/integration/", "tests/fixtures/", "requirements.txt", "constraints.txt")
MAX_MEMBER = 512 * 1024
MAX_TARBALL = 1024 * 1024

pytestmark = pytest.mark.skipif(not (REPO / "galaxy.yml").is_file() or not (BIN / "ansible-galaxy").exists(),
                                reason="needs a source checkout (galaxy.yml) and ansible-galaxy")


def clean_env(tmp, collections):
    """No ansible.cfg, no PYTHONPATH: only the installed copy of pymotor.ascend is reachable."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_") and key != "PYTHONPATH"}
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_HOME": str(tmp / "home"),
                "ANSIBLE_LOCAL_TEMP": str(tmp / "tmp"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    return env


def run(cmd, tmp, env, timeout=300):
    return subprocess.run([str(part) for part in cmd], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def build(source, dest, env):
    proc = run([BIN / "ansible-galaxy", "collection", "build", "--force", "--output-path", dest, source], dest.parent, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(dest.glob("pymotor-ascend-*.tar.gz"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("installed")
    collections = tmp / "collections"
    env = clean_env(tmp, collections)
    tarball = build(REPO, tmp / "dist", env)
    proc = run([BIN / "ansible-galaxy", "collection", "install", "--offline", tarball, "-p", collections], tmp, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    root = collections / "ansible_collections" / "pymotor" / "ascend"
    assert (root / "MANIFEST.json").is_file()
    return {"tmp": tmp, "env": env, "tarball": tarball, "root": root, "collections": collections}


def assert_ran_from(output, root):
    paths = [line.split("task path: ", 1)[1] for line in output.splitlines() if line.startswith("task path: ")]
    assert paths and all(path.startswith(str(root) + os.sep) for path in paths), paths


def test_tarball_packs_no_outputs_venvs_ci_or_big_files(installed):
    tarball = installed["tarball"]
    assert tarball.stat().st_size < MAX_TARBALL
    with tarfile.open(tarball) as archive:
        members = archive.getmembers()
    names = [member.name + ("/" if member.isdir() else "") for member in members]
    assert not [name for name in names if name.startswith(NEVER_PACKED)]
    assert not [member.name for member in members if member.size > MAX_MEMBER]
    for needed in ("LICENSES/Apache-2.0.txt", "LICENSES/GPL-3.0-or-later.txt", "meta/runtime.yml",
                   "meta/execution-environment.yml", "playbooks/validate.yml", "playbooks/plan.yml"):
        assert needed in names, needed


def test_build_ignore_covers_every_gitignore_entry(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    source = tmp_path / "src" / "ansible_collections" / "pymotor" / "ascend"
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    planted = []
    for pattern in (REPO / ".gitignore").read_text(encoding="utf-8").split("\n"):
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#"):
            continue
        stem = pattern.strip("/").replace("*", "junk")
        path = f"{stem}/junk.txt" if pattern.endswith("/") else (f"plugins/{stem}" if "*" in pattern else stem)
        planted.append(path)
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_bytes(b"x" * (2 * MAX_MEMBER if path.startswith("tests/output") else 16))
    assert len(planted) >= 8
    env = clean_env(tmp_path, tmp_path / "none")
    with tarfile.open(build(source, tmp_path / "dist", env)) as archive:
        names = set(archive.getnames())
    assert not names & set(planted), sorted(names & set(planted))


def test_validate_runs_from_the_installed_collection(installed):
    proc = run([BIN / "ansible-playbook", "-vv", "pymotor.ascend.validate", "-e", f"motor_config_dir={SEED}"],
               installed["tmp"], installed["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLAYBOOK: validate.yml" in proc.stdout and "failed=0" in proc.stdout
    assert_ran_from(proc.stdout, installed["root"])


def test_plan_runs_from_the_installed_collection(installed):
    output = installed["tmp"] / "plan.json"
    inventory = installed["root"] / "inventories" / "example" / "hosts.yml"
    proc = run([BIN / "ansible-playbook", "-vv", "-i", inventory, "pymotor.ascend.plan", "-e", f"motor_config_dir={SEED}",
                "-e", f"motor_plan_output={output}"], installed["tmp"], installed["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_ran_from(proc.stdout, installed["root"])
    plan = json.loads(output.read_text(encoding="utf-8"))
    assert [container["name"] for container in plan["containers"]] == [
        "mindie-motor-kv-pool", "mindie-motor-controller", "mindie-motor-coordinator", "mindie-motor-kv-conductor",
        "mindie-motor-kv-watcher", "mindie-motor-d0-0", "mindie-motor-p0-0"]
    assert output.stat().st_mode & 0o007 == 0


def test_module_defaults_group_reaches_the_modules(installed):
    playbook = installed["tmp"] / "defaults.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Defaults through the action group", "hosts": "localhost", "gather_facts": False,
        "connection": "local", "module_defaults": {"group/pymotor.ascend.motor": {"config_dir": str(SEED)}},
        "tasks": [{"name": "Validate with config_dir from module_defaults", "pymotor.ascend.motor_validate": {},
                   "register": "result"},
                  {"name": "Show the job", "ansible.builtin.debug": {"msg": "job={{ motor_normalized_config.job_id }}"}}],
    }]), encoding="utf-8")
    proc = run([BIN / "ansible-playbook", playbook], installed["tmp"], installed["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "job=mindie-motor" in proc.stdout


ee_missing = importlib.util.find_spec("ansible_builder") is None


@pytest.mark.skipif(ee_missing, reason="ansible-builder is not importable (requirements.txt installs it)")
def test_execution_environment_renders_offline(installed, tmp_path):
    ee_dir = tmp_path / "ee"
    ee_def = yaml.safe_load((REPO / "execution-environment.yml").read_text(encoding="utf-8"))
    for name in ("execution-environment.yml", ee_def["dependencies"]["system"]):
        (ee_dir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, ee_dir / name)
    for entry in ee_def["additional_build_files"]:
        (ee_dir / entry["src"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(installed["tarball"], ee_dir / entry["src"])
    env = dict(installed["env"], http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    context = tmp_path / "context"
    proc = run([BIN / "ansible-builder", "create", "-f", ee_dir / "execution-environment.yml", "-c", context,
                "--output-filename", "Containerfile"], tmp_path, env)
    assert proc.returncode == 0 and "No matches" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    containerfile = (context / "Containerfile").read_text(encoding="utf-8")
    assert f'ARG EE_BASE_IMAGE="{ee_def["images"]["base_image"]["name"]}"' in containerfile
    assert ee_def["dependencies"]["ansible_core"]["package_pip"] in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert yaml.safe_load((context / "_build" / "requirements.yml").read_text(encoding="utf-8")) == \
        ee_def["dependencies"]["galaxy"]
    assert (context / "_build" / "collections" / installed["tarball"].name).read_bytes() == \
        installed["tarball"].read_bytes()
    assert (context / "_build" / "bindep.txt").read_text(encoding="utf-8") == \
        (REPO / ee_def["dependencies"]["system"]).read_text(encoding="utf-8")


@pytest.mark.skipif(ee_missing, reason="ansible-builder is not importable (requirements.txt installs it)")
def test_execution_environment_introspection_takes_only_declared_dependencies(installed):
    proc = run([BIN / "ansible-builder", "introspect", installed["collections"]], installed["tmp"], installed["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = yaml.safe_load(proc.stdout.split("---", 1)[1])
    ours = [line for line in data["python"] + data["system"] if "from collection pymotor.ascend" in line]
    assert [line.split("  #")[0] for line in ours] == ["openssh-clients [platform:rpm]", "openssh-client [platform:dpkg]"]
