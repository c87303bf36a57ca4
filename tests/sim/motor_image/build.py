"""Build the PyMotor stand-in image local/pymotor-standin:<content hash> unless it exists.

Usage: python tests/sim/motor_image/build.py  (prints the tag), or
ensure_standin_image() from Python (sys.path pointing at this directory).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from content_tag import content_digest  # noqa: E402  (tests/sim/content_tag.py)

REPO = "local/pymotor-standin"
BASE_IMAGE = os.environ.get("MOTOR_BASE_IMAGE", "local/debian:bookworm")
CONTEXT = (".dockerignore", "Dockerfile", "startup", "lib", "motor_sim", "memfabric_hybrid", "bin")
LOCK = Path(tempfile.gettempdir()) / "pymotor-standin-build.lock"


def standin_tag() -> str:
    """Tag from the build context (.dockerignore, Dockerfile, startup, lib, motor_sim, memfabric_hybrid, bin: bytes, modes, directories),
    the base image's id and the build argument."""
    digest = content_digest(HERE, CONTEXT, base_image=BASE_IMAGE, build_args={"BASE_IMAGE": BASE_IMAGE})
    return f"{REPO}:{digest[:12]}"


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
