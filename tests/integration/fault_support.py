"""Shared pieces of test_faults.py and test_security.py: the stand-in image, a job config, ansible-playbook runs,
container listings on the simulated hosts, and a local conductor_image run (no simulated host needed)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import simctl
import support
from support import REPO, VENV_BIN, ansible_env

IMAGE = "local/pymotor-fault:test"


def build_image() -> None:
    subprocess.run([sys.executable, str(REPO / "extensions/molecule/pd_separation/standin_image.py"), IMAGE],
                   check=True, capture_output=True, text=True)


def write_config(config_dir: Path, job: str, user_extra: dict | None = None, env_extra: dict | None = None) -> None:
    """The seed PD-separation config (1 P x 4 NPUs + 1 D x 4 NPUs) for ``job``; ``*_extra`` are merged one level
    deep into the top-level sections of user_config.json / env.json."""
    config_dir.mkdir(parents=True, exist_ok=True)
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    env = json.loads((REPO / "examples/seed_pd_separation/env.json").read_text())
    user["motor_deploy_config"].update(job_id=job, image_name=IMAGE)
    for doc, extra in ((user, user_extra), (env, env_extra)):
        for section, values in (extra or {}).items():
            doc[section] = {**doc.get(section, {}), **values}
    (config_dir / "user_config.json").write_text(json.dumps(user, indent=2))
    (config_dir / "env.json").write_text(json.dumps(env, indent=2))


# The deploy helpers of support.py, bound to the image these tests build.
playbook_argv = functools.partial(support.playbook_argv, image=IMAGE)
playbook = functools.partial(support.playbook, image=IMAGE)


def job_containers(hosts: list[dict], job: str) -> list[tuple[str, str, str]]:
    """(host, name, container id) of every container labelled with ``job``, running or not."""
    found = []
    for host in hosts:
        rc, out = simctl.host_exec(host["name"], f"docker ps -a --filter label=io.pymotor.job={job} "
                                                 "--format '{{.Label \"io.pymotor.container\"}} {{.Names}} {{.ID}}'")
        assert rc == 0, out
        for line in out.split("\n"):
            if line.strip():
                label, name, cid = line.split()
                assert label == name, f"container {name} carries io.pymotor.container={label}"
                found.append((host["name"], name, cid))
    return found


def inspect(host: str, names: list[str]) -> list[dict]:
    rc, out = simctl.host_exec(host, "docker inspect " + " ".join(names))
    assert rc == 0, out
    return json.loads(out)


def conductor_image_run(workdir: Path, base_image: str, target_image: str, go_tarball: Path, go_sha256: str,
                        build_container: str):
    """Run the conductor_image role on this machine's Docker with a local Mooncake fixture repository and a local
    Go archive (nothing is downloaded). Returns the CompletedProcess."""
    repo = workdir / "mooncake"
    if not repo.exists():
        subprocess.run(["bash", str(REPO / "tests/fixtures/mooncake/make_repo.sh"), str(repo)], check=True,
                       capture_output=True, text=True)
    playbook_file = workdir / "build.yml"
    playbook_file.write_text(
        "- name: Build the conductor image\n  hosts: localhost\n  gather_facts: false\n"
        "  roles:\n    - role: pymotor.ascend.conductor_image\n")
    work = workdir / "work"
    shutil.rmtree(work, ignore_errors=True)
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook_file),
            "-e", f"ansible_python_interpreter={sys.executable}",
            "-e", f"motor_base_image={base_image}", "-e", f"motor_image={target_image}",
            "-e", f"conductor_image_mooncake_repo={repo}", "-e", f"conductor_image_work_dir={work}",
            "-e", f"conductor_image_go_tarball={go_tarball}", "-e", f"conductor_image_go_sha256={go_sha256}",
            "-e", "conductor_image_go_version=1.23.9", "-e", "conductor_image_goproxy=off",
            "-e", f"conductor_image_build_container={build_container}",
            "-e", f"conductor_image_candidate_image={target_image}-candidate",
            "-e", "conductor_image_poll_interval=1",
            "-e", f"conductor_image_go_cache_dir={REPO / '.build/go-build-cache'}"]
    return subprocess.run(argv, cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=600)


def image_id(ref: str) -> str:
    out = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def container_exists(name: str) -> bool:
    out = subprocess.run(["docker", "ps", "-a", "--filter", f"name=^{name}$", "-q"], capture_output=True, text=True)
    return bool(out.stdout.strip())


# A base image whose package manager and Go toolchain are offline shims: build.sh gets through the package and Go
# steps and then fails in "go build" like a Mooncake ref that does not compile, inside the temporary container.
SHIM_BASE_IMAGE = "local/pymotor-fault-ib:base"
FAKE_GO = """#!/bin/sh
case "$1" in
  version) echo "go version go1.23.9 linux/amd64" ;;
  build) echo "./main.go:12:2: undefined: kvevent.NewIndexer (simulated compile error)" >&2; exit 1 ;;
esac
"""


def make_build_inputs(workdir: Path) -> tuple[str, Path, str]:
    """(base image, Go archive, its sha256) for conductor_image_run."""
    ctx = workdir / "shim-base"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "Dockerfile").write_text(
        "FROM local/debian:bookworm\n"
        "RUN printf '#!/bin/sh\\necho \"apt-get $* (offline shim)\"\\n' >/usr/local/bin/apt-get"
        " && chmod 0755 /usr/local/bin/apt-get\n")
    subprocess.run(["docker", "build", "-q", "-t", SHIM_BASE_IMAGE, str(ctx)], check=True, capture_output=True,
                   env={**os.environ, "DOCKER_BUILDKIT": "0"})
    tree = workdir / "go-tree"
    (tree / "go/bin").mkdir(parents=True, exist_ok=True)
    (tree / "go/bin/go").write_text(FAKE_GO)
    (tree / "go/bin/go").chmod(0o755)
    tarball = workdir / "go1.23.9.linux-amd64.tar.gz"
    subprocess.run(["tar", "-C", str(tree), "-czf", str(tarball), "go"], check=True)
    sha = subprocess.run(["sha256sum", str(tarball)], check=True, capture_output=True, text=True).stdout.split()[0]
    return SHIM_BASE_IMAGE, tarball, sha
