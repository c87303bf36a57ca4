"""Build the PyMotor stand-in image local/pymotor-standin:<content hash> unless it exists.

Usage: python tests/sim/motor_image/build.py  (prints the tag), or
ensure_standin_image() from Python (sys.path pointing at this directory).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = "local/pymotor-standin"
BASE_IMAGE = os.environ.get("MOTOR_BASE_IMAGE", "local/debian:bookworm")
CONTEXT = ("Dockerfile", "startup", "motor_sim", "bin")
LOCK = Path(tempfile.gettempdir()) / "pymotor-standin-build.lock"


def _context_files() -> list[Path]:
    files = []
    for entry in CONTEXT:
        path = HERE / entry
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(files)


def standin_tag() -> str:
    """Tag from every file of the build context (content and executable bit) and the base image."""
    digest = hashlib.sha256(BASE_IMAGE.encode())
    for path in _context_files():
        digest.update(str(path.relative_to(HERE)).encode() + b"\0")
        digest.update(b"x" if os.access(path, os.X_OK) else b"-")
        digest.update(path.read_bytes() + b"\0")
    return f"{REPO}:{digest.hexdigest()[:12]}"


def _exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def remove_stale_tags(repo: str, keep: str) -> None:
    """Drop earlier builds of a repository; tags still used by containers stay (rmi refuses)."""
    listed = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repo],
                            capture_output=True, text=True).stdout.split()
    stale = [tag for tag in listed if tag != keep]
    if stale:
        subprocess.run(["docker", "image", "rm", *stale], capture_output=True)


def ensure_standin_image() -> str:
    tag = standin_tag()
    with open(LOCK, "w") as lock:  # parallel test workers must not build the same image twice
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _exists(tag):
            subprocess.run(["docker", "build", "--network", "host", "-q", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
                            "-t", tag, str(HERE)], check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "DOCKER_BUILDKIT": "0"})
            remove_stale_tags(REPO, keep=tag)
    return tag


if __name__ == "__main__":
    sys.stdout.write(ensure_standin_image() + "\n")
