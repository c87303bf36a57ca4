"""Content tags of the images the tests build change with everything the build reads (issue 14).

A fresh clone once lacked an empty directory the simulated host's entrypoint needed, while the tag (a hash of the
files only) stayed the same on the developer's machine, so an old image hid it. These tests copy the real build
contexts and change one thing at a time.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "sim"))

import content_tag  # noqa: E402


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_image_ids(monkeypatch):
    """Base image ids without a Docker engine: tests change them to show the tag follows the id, not the name."""
    ids = {"local/debian:bookworm": "sha256:aaa"}
    monkeypatch.setattr(content_tag, "image_id", lambda ref: ids[ref])
    return ids


@pytest.fixture
def host_context(tmp_path, monkeypatch, fake_image_ids):
    """A copy of tests/sim/host that simctl tags."""
    simctl = _load("simctl_under_test", REPO / "tests" / "sim" / "simctl.py")
    monkeypatch.setattr(simctl, "content_digest", content_tag.content_digest)
    context = tmp_path / "host"
    shutil.copytree(REPO / "tests" / "sim" / "host", context, symlinks=True)
    monkeypatch.setattr(simctl, "HOST_DIR", context)
    return simctl, context


def test_host_tag_is_stable(host_context):
    simctl = host_context[0]
    assert simctl.host_image_tag() == simctl.host_image_tag()
    assert simctl.host_image_tag().startswith("local/pymotor-sim-host:")


def test_host_tag_changes_with_an_empty_directory(host_context):
    simctl, context = host_context
    before = simctl.host_image_tag()
    (context / "rootfs" / "usr" / "local" / "Ascend" / "driver" / "tools").mkdir()
    assert simctl.host_image_tag() != before


def test_host_tag_changes_with_a_mode(host_context):
    simctl, context = host_context
    entrypoint = context / "rootfs" / "usr" / "local" / "lib" / "pymotor-sim" / "entrypoint.sh"
    before = simctl.host_image_tag()
    entrypoint.chmod(0o700)  # still executable: only the mode bits differ
    assert simctl.host_image_tag() != before
    weights = context / "rootfs" / "mnt" / "weight"
    entrypoint.chmod(0o755)
    assert simctl.host_image_tag() == before
    weights.chmod(0o700)  # a directory's mode counts too
    assert simctl.host_image_tag() != before


def test_host_tag_changes_with_the_dockerfile(host_context):
    simctl, context = host_context
    before = simctl.host_image_tag()
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\n# a comment is a change too\n")
    assert simctl.host_image_tag() != before


def test_host_tag_changes_with_the_base_image_id(host_context, fake_image_ids):
    simctl = host_context[0]
    before = simctl.host_image_tag()
    fake_image_ids["local/debian:bookworm"] = "sha256:bbb"  # same name, rebuilt base
    assert simctl.host_image_tag() != before


def test_cache_and_bytecode_files_do_not_count(host_context):
    simctl, context = host_context
    before = simctl.host_image_tag()
    (context / "__pycache__").mkdir()
    (context / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert simctl.host_image_tag() == before


def test_standin_tag_covers_its_context_and_build_arg(tmp_path, monkeypatch, fake_image_ids):
    build = _load("standin_build_under_test", REPO / "tests" / "sim" / "motor_image" / "build.py")
    monkeypatch.setattr(build, "content_digest", content_tag.content_digest)
    context = tmp_path / "motor_image"
    shutil.copytree(REPO / "tests" / "sim" / "motor_image", context, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(build, "HERE", context)
    before = build.standin_tag()
    (context / "startup" / "empty").mkdir()
    with_dir = build.standin_tag()
    assert with_dir != before
    (context / "Dockerfile").chmod(0o600)
    with_mode = build.standin_tag()
    assert with_mode != with_dir
    (context / ".dockerignore").write_text("**/__pycache__\n")
    with_ignore = build.standin_tag()
    assert with_ignore != with_mode
    monkeypatch.setattr(build, "BASE_IMAGE", "local/other:base")
    fake_image_ids["local/other:base"] = "sha256:aaa"  # same id under another name: the build arg differs
    assert build.standin_tag() != with_ignore
    # files outside the build context (README.md is .dockerignored) do not count
    monkeypatch.setattr(build, "BASE_IMAGE", "local/debian:bookworm")
    (context / "README.md").write_text("changed")
    assert build.standin_tag() == with_ignore


def test_symlink_target_counts(tmp_path):
    (tmp_path / "a").write_text("x")
    (tmp_path / "link").symlink_to("a")
    before = content_tag.content_digest(tmp_path)
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to("b")
    assert content_tag.content_digest(tmp_path) != before


def test_missing_input_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        content_tag.content_digest(tmp_path, ["Dockerfile"])
