"""The go.sum check of a local module proxy (plugin_utils/go_sum.py): Go's h1 hash, checked against upstream's pinned
go.sum and proxy, and a tampered or stale module refused by name."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.filter.motor_go_sum_problems import motor_go_sum_problems
from ansible_collections.pymotor.ascend.plugins.plugin_utils.go_sum import go_sum_problems, h1_hash, read_go_sum
from ansible_collections.pymotor.ascend.plugins.plugin_utils.go_sum import unescape_module_path

UPSTREAM_PROXY = Path(__file__).resolve().parents[5] / "shared" / "upstream" / "goproxy"


def make_proxy(root: Path, module: str, version: str, files: dict, go_mod: bytes) -> None:
    """A proxy's layout: the directory holds the escaped path ("!m" for "M"), the zip's entries the module path."""
    at_v = root / "".join("!" + c.lower() if c.isupper() else c for c in module) / "@v"
    at_v.mkdir(parents=True)
    with zipfile.ZipFile(at_v / f"{version}.zip", "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{module}@{version}/{name}", data)
    (at_v / f"{version}.mod").write_bytes(go_mod)


def test_h1_is_over_sorted_names_and_contents():
    one = h1_hash([("b", b"2"), ("a", b"1")])
    assert one == h1_hash([("a", b"1"), ("b", b"2")]) and one.startswith("h1:")
    assert one != h1_hash([("a", b"1"), ("b", b"3")]) and one != h1_hash([("a", b"1"), ("c", b"2")])
    with pytest.raises(ValueError):
        h1_hash([("a\nb", b"")])


def test_escaped_paths_and_go_sum_lines():
    assert unescape_module_path("github.com/!burnt!sushi/toml") == "github.com/BurntSushi/toml"
    pins = read_go_sum("m v1.0.0 h1:abc=\nm v1.0.0/go.mod h1:def=\n\nbroken line\n")
    assert pins == {("m", "v1.0.0"): "h1:abc=", ("m", "v1.0.0/go.mod"): "h1:def="}


@pytest.mark.skipif(not UPSTREAM_PROXY.is_dir(), reason="../shared/upstream/goproxy not present")
def test_upstream_proxy_matches_its_go_sum_and_a_tampered_zip_is_named(tmp_path):
    """Our hash is Go's: every module of upstream's pinned proxy hashes to its go.sum line; one extra file in one zip
    (what the conformance build test does) is named with both hashes."""
    assert go_sum_problems(str(UPSTREAM_PROXY), str(UPSTREAM_PROXY / "go.sum")) == []
    proxy = tmp_path / "goproxy"
    shutil.copytree(UPSTREAM_PROXY, proxy)
    with zipfile.ZipFile(proxy / "github.com/shamaton/msgpack/v2/@v/v2.4.0.zip", "a") as archive:
        archive.writestr("github.com/shamaton/msgpack/v2@v2.4.0/tampered.go", "package msgpack\n")
    problems = motor_go_sum_problems(proxy, proxy / "go.sum")
    assert len(problems) == 1, problems
    assert "github.com/shamaton/msgpack/v2@v2.4.0: checksum mismatch: go.sum pins h1:O5Z08" in problems[0]


def test_a_stale_go_mod_and_an_unreadable_zip_are_refused_and_unpinned_files_left_to_go(tmp_path):
    proxy = tmp_path / "proxy"
    make_proxy(proxy, "example.com/M", "v1.0.0", {"m.go": b"package m\n"}, b"module example.com/M\n")
    make_proxy(proxy, "example.com/unpinned", "v0.1.0", {"u.go": b"package u\n"}, b"module example.com/unpinned\n")
    zip_hash = h1_hash([("example.com/M@v1.0.0/m.go", b"package m\n")])
    go_sum = tmp_path / "go.sum"
    go_sum.write_text(f"example.com/M v1.0.0 {zip_hash}\nexample.com/M v1.0.0/go.mod h1:stale=\n")
    problems = go_sum_problems(str(proxy), str(go_sum))
    assert len(problems) == 1 and "example.com/M@v1.0.0: checksum mismatch: go.sum pins h1:stale=" in problems[0]
    (proxy / "example.com/!m/@v/v1.0.0.zip").write_bytes(b"not a zip")
    go_sum.write_text(f"example.com/M v1.0.0 {zip_hash}\n")
    problems = go_sum_problems(str(proxy), str(go_sum))
    assert len(problems) == 1 and "the file hashes to unreadable" in problems[0]
