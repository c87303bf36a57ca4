# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The release notes: CHANGELOG.rst is antsibull-changelog's rendering of changelogs/changelog.yaml, with a section
for every release it records, the newest first; galaxy.yml's version is a released one or the next one."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_changelog_lists_every_release_newest_first():
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))["releases"]
    assert releases, "no release recorded in changelogs/changelog.yaml"
    headings = re.findall(r"^v(\d+\.\d+\.\d+)\n=+$", (REPO / "CHANGELOG.rst").read_text(encoding="utf-8"), re.M)
    assert headings == sorted(releases, key=_version, reverse=True)
    for version, release in releases.items():
        assert release.get("changes", {}).get("release_summary"), f"{version} has no release summary"
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))["version"]
    newest = max(releases, key=_version)
    assert _version(galaxy) >= _version(newest), f"galaxy.yml version {galaxy} is older than the release {newest}"
