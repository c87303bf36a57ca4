"""Content tags for the images and build outputs the tests make: one digest of everything a build reads.

A tag that stands for content must change whenever the build could produce something else: every file's bytes and
full mode, every directory (an empty one too: git does not track it, so a fresh clone lacks it), symlinks and their
targets, the Dockerfile, the base image's id (not its name: a rebuilt base keeps its name) and the build arguments.
Used by tests/sim/simctl.py (simulated host), tests/sim/motor_image/build.py (PyMotor stand-in),
tests/fixtures/mooncake/build_conductor.py (builder image and fixture conductor binary) and the conformance image.

``python tests/sim/content_tag.py DIR [ENTRY ...] [--base IMAGE] [--arg K=V ...]`` prints the digest of DIR (or of
the named entries of DIR).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping

# Written by Python or pytest while the tests run; never read by a build.
SKIPPED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis"})
SKIPPED_SUFFIXES = (".pyc",)


def _skipped(path: Path) -> bool:
    return path.name in SKIPPED_NAMES or path.name.endswith(SKIPPED_SUFFIXES)


def _walk(top: Path) -> Iterable[Path]:
    """``top`` and everything below it (not following symlinks), in a stable order."""
    yield top
    if top.is_dir() and not top.is_symlink():
        for child in sorted(top.iterdir()):
            if not _skipped(child):
                yield from _walk(child)


def _entry(path: Path, root: Path) -> bytes:
    info = path.lstat()
    name = path.relative_to(root).as_posix().encode()
    mode = f"{stat.S_IMODE(info.st_mode):04o}".encode()
    if stat.S_ISLNK(info.st_mode):
        return b"L\0" + name + b"\0" + mode + b"\0" + os.readlink(path).encode() + b"\0"
    if stat.S_ISDIR(info.st_mode):
        return b"D\0" + name + b"\0" + mode + b"\0"
    return b"F\0" + name + b"\0" + mode + b"\0" + hashlib.sha256(path.read_bytes()).digest()


def image_id(ref: str) -> str:
    """The id of a local image; a missing image is an error (build the base first)."""
    result = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"base image {ref} is missing: {result.stderr.strip()}")
    return result.stdout.strip()


def content_digest(root: Path, entries: Iterable[str] | None = None, *, base_image: str | None = None,
                   build_args: Mapping[str, str] | None = None, extra: str = "") -> str:
    """sha256 (hex) over ``entries`` of ``root`` (all of it by default), the base image id, build args and extra."""
    root = Path(root)
    digest = hashlib.sha256(b"pymotor-content-tag-v2\0")
    tops = [root] if entries is None else [root / e for e in sorted(entries)]
    for top in tops:
        if not top.exists() and not top.is_symlink():
            raise FileNotFoundError(f"build input {top} does not exist")
        for path in _walk(top):
            digest.update(_entry(path, root))
    if base_image is not None:
        digest.update(b"base\0" + image_id(base_image).encode() + b"\0")
    for key, value in sorted((build_args or {}).items()):
        digest.update(b"arg\0" + key.encode() + b"=" + value.encode() + b"\0")
    digest.update(b"extra\0" + extra.encode())
    return digest.hexdigest()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("entries", nargs="*", help="files or directories of DIR (default: all of DIR)")
    parser.add_argument("--base")
    parser.add_argument("--arg", action="append", default=[], help="K=V build argument")
    args = parser.parse_args(argv)
    build_args = dict(item.split("=", 1) for item in args.arg)
    sys.stdout.write(content_digest(args.dir, args.entries or None, base_image=args.base, build_args=build_args) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
