"""Build the conformance image local/pymotor-conformance:<content tag> from a PyMotor source tree, unless it exists.

Source tree: $MOTOR_UPSTREAM_PYMOTOR, default ../shared/upstream/pymotor relative to the repository. Laid out as
upstream's docker/Dockerfile does (see image/Dockerfile): motor wheel + requirements from PyPI pinned by
constraints.txt, examples/ unchanged at /tmp/motor/examples, a fake engine_server ahead on PATH (image/), vLLM
0.18.0's multi_connector.py (from the PyPI sdist, sha256-checked) where upstream's MultiConnector patch applies.
The tag covers every input: the source tree, image/, constraints.txt, the reused stand-in module motor_sim (and its
mooncake_master, for upstream's kv_pool.sh), the
vLLM file's sha256, the base image's id and the build arguments. Usage: python tests/conformance/build_image.py
(prints the tag; exit 3 with the reason when the source tree is absent).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "sim"))
from content_tag import content_digest  # noqa: E402  (tests/sim/content_tag.py)

REPO = "local/pymotor-conformance"
BASE_IMAGE = os.environ.get("MOTOR_BASE_IMAGE", "local/debian:bookworm")
MOTOR_SIM = REPO_ROOT / "tests" / "sim" / "motor_image" / "motor_sim"
BUILD_DIR = REPO_ROOT / ".build"
LOCK = Path(tempfile.gettempdir()) / "pymotor-conformance-build.lock"
# CA bundle trusted by pip during the build only (a TLS-inspecting proxy's CA lives in the host bundle).
CA_BUNDLE = Path(os.environ.get("MOTOR_CA_BUNDLE") or os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt")
VLLM_SDIST = "vllm-0.18.0.tar.gz"
VLLM_SDIST_URL = ("https://files.pythonhosted.org/packages/39/a9/ed48c497572a41552cc71b5ede15291d882c546a01df27ed"
                  "42944eb3b3ad/vllm-0.18.0.tar.gz")
VLLM_SDIST_SHA256 = "9a1bee091db8dbb4664a2a09cd9c61912e9912a44af1ce12b8593a231d05971c"
MULTI_CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py"


def upstream_pymotor() -> Path:
    return Path(os.environ.get("MOTOR_UPSTREAM_PYMOTOR") or REPO_ROOT.parent / "shared" / "upstream" / "pymotor")


def absent_reason() -> str | None:
    """Why the conformance image cannot be built here, or None."""
    tree = upstream_pymotor()
    if not (tree / "setup.py").is_file() or not (tree / "examples" / "deployer" / "startup" / "boot.sh").is_file():
        return f"upstream PyMotor source tree not found at {tree} (set MOTOR_UPSTREAM_PYMOTOR)"
    return None


def conformance_tag() -> str:
    tree = upstream_pymotor()
    parts = [content_digest(tree), content_digest(HERE, ["image", "constraints.txt"]), content_digest(MOTOR_SIM),
             content_digest(MOTOR_SIM.parent, ["bin/mooncake_master"])]
    digest = content_digest(HERE, ["build_image.py"], base_image=BASE_IMAGE, build_args={"BASE_IMAGE": BASE_IMAGE},
                            extra="\0".join(parts + [VLLM_SDIST_SHA256, _ca_sha256()]))
    return f"{REPO}:{digest[:12]}"


def _ca_sha256() -> str:
    return _sha256(CA_BUNDLE) if CA_BUNDLE.is_file() else ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def vllm_sdist() -> Path:
    """The vllm 0.18.0 sdist from PyPI, kept under .build/ and checked by sha256 (a mismatch is an error)."""
    path = BUILD_DIR / VLLM_SDIST
    if not path.exists():
        BUILD_DIR.mkdir(exist_ok=True)
        partial = path.with_suffix(".part")
        with urllib.request.urlopen(VLLM_SDIST_URL, timeout=120) as resp, open(partial, "wb") as out:
            shutil.copyfileobj(resp, out)
        partial.rename(path)
    if _sha256(path) != VLLM_SDIST_SHA256:
        raise RuntimeError(f"{path} has sha256 {_sha256(path)}, expected {VLLM_SDIST_SHA256}: remove it")
    return path


def stage_context(ctx: Path) -> None:
    shutil.copytree(upstream_pymotor(), ctx / "pymotor", symlinks=True)
    for entry in (HERE / "image").iterdir():
        if entry.name != "__pycache__":
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, ctx / entry.name)
    shutil.copy2(HERE / "constraints.txt", ctx / "constraints.txt")
    (ctx / "build-ca.pem").write_bytes(CA_BUNDLE.read_bytes() if CA_BUNDLE.is_file() else b"")
    shutil.copytree(MOTOR_SIM, ctx / "motor_sim", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # upstream's kv_pool.sh starts mooncake_master (the Mooncake wheel's, absent here): the stand-in's, same flags
    shutil.copy2(MOTOR_SIM.parent / "bin" / "mooncake_master", ctx / "bin" / "mooncake_master")
    with tarfile.open(vllm_sdist()) as sdist:
        member = sdist.extractfile(f"vllm-0.18.0/{MULTI_CONNECTOR}")
        target = ctx / MULTI_CONNECTOR
        target.parent.mkdir(parents=True)
        target.write_bytes(member.read())
    # The tree is read-only in ../shared: the image build needs writable copies.
    subprocess.run(["chmod", "-R", "u+w", str(ctx)], check=True)


def _exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0


def ensure_conformance_image() -> str:
    reason = absent_reason()
    if reason:
        raise FileNotFoundError(reason)
    tag = conformance_tag()
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _exists(tag):
            return tag
        started = time.monotonic()
        BUILD_DIR.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(dir=BUILD_DIR, prefix="conformance-ctx.") as ctx:
            stage_context(Path(ctx))
            result = subprocess.run(["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
                                     "-t", tag, ctx], capture_output=True, text=True, check=False,
                                    env={**os.environ, "DOCKER_BUILDKIT": "0"})
        if result.returncode != 0:
            raise RuntimeError(f"docker build of {tag} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        sys.stderr.write(f"built {tag} in {time.monotonic() - started:.0f} s\n")
        listed = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", REPO],
                                capture_output=True, text=True, check=False).stdout.split()
        stale = [t for t in listed if t != tag]
        if stale:
            subprocess.run(["docker", "image", "rm", *stale], capture_output=True, check=False)
    return tag


if __name__ == "__main__":
    if sys.argv[1:] == ["--absent-reason"]:  # for make conformance: empty when the image can be built
        sys.stdout.write(absent_reason() or "")
        sys.exit(0)
    if absent_reason():
        sys.stderr.write(f"{absent_reason()}\n")
        sys.exit(3)
    sys.stdout.write(ensure_conformance_image() + "\n")
