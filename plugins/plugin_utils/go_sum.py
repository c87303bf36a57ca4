# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The go.sum check of a local module proxy, on the controller before any build container starts: the same "h1:"
hash Go computes (golang.org/x/mod/sumdb/dirhash Hash1: the sorted lines "<sha256 hex>  <name>\\n" of the files,
hashed again with SHA-256, base64) of each module zip and go.mod file in the proxy directory, compared with the
line go.sum pins for it. Go checks the same inside the build; doing it first turns a tampered or stale mirror into
one clear error in seconds, not after the build container installed its packages."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile


def h1_hash(files) -> str:
    """Go's "h1:" hash of ``files``, an iterable of (name, bytes)."""
    summary = hashlib.sha256()
    for name, data in sorted(files, key=lambda item: item[0]):
        if "\n" in name:
            raise ValueError("file name with a newline: %r" % name)
        summary.update(("%s  %s\n" % (hashlib.sha256(data).hexdigest(), name)).encode("utf-8"))
    return "h1:" + base64.b64encode(summary.digest()).decode("ascii")


def unescape_module_path(escaped: str) -> str:
    """A proxy directory's escaped module path back to the module path ("!b" is "B", as Go's module.UnescapePath)."""
    return re.sub(r"!([a-z])", lambda match: match.group(1).upper(), escaped)


def read_go_sum(text: str) -> dict:
    """go.sum lines as {(module, version or version/go.mod): hash}."""
    pins = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[2].startswith("h1:"):
            pins[(fields[0], fields[1])] = fields[2]
    return pins


def proxy_files(goproxy_dir: str):
    """(module, version, kind, path) of every <module>/@v/<version>.zip and .mod under the proxy directory."""
    for root, _dirs, names in os.walk(goproxy_dir):
        if os.path.basename(root) != "@v":
            continue
        module = unescape_module_path(os.path.relpath(os.path.dirname(root), goproxy_dir).replace(os.sep, "/"))
        for name in sorted(names):
            version, kind = os.path.splitext(name)
            if kind in (".zip", ".mod"):
                yield module, version, kind, os.path.join(root, name)


def file_hash(kind: str, path: str) -> str:
    """The hash go.sum pins for a proxy file: over the zip's entries, or over the .mod file named go.mod."""
    if kind == ".mod":
        with open(path, "rb") as handle:
            return h1_hash([("go.mod", handle.read())])
    with zipfile.ZipFile(path) as archive:
        return h1_hash((entry.filename, archive.read(entry)) for entry in archive.infolist())


def go_sum_problems(goproxy_dir: str, go_sum_path: str) -> list:
    """One line per proxy file whose hash differs from its go.sum pin (files go.sum does not name are Go's to
    judge); each line names the file, both hashes and what to do."""
    with open(go_sum_path, encoding="utf-8") as handle:
        pins = read_go_sum(handle.read())
    problems = []
    for module, version, kind, path in proxy_files(goproxy_dir):
        pinned = pins.get((module, version if kind == ".zip" else version + "/go.mod"))
        if pinned is None:
            continue
        try:
            actual = file_hash(kind, path)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            actual = "unreadable (%s)" % exc
        if actual != pinned:
            problems.append("%s: %s@%s: checksum mismatch: go.sum pins %s, the file hashes to %s (the mirror's copy "
                            "differs from the module go.sum was written for: fetch it again from a trusted proxy, or "
                            "check which go.sum is pinned)" % (path, module, version, pinned, actual))
    return problems
