# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""plugin_utils/controller_file.write_file: only a content or mode difference writes, and ``directory_mode`` makes
the parent's mode exact (created or existing), whatever the umask."""

from __future__ import annotations

import os
import stat

from ansible_collections.pymotor.ascend.plugins.plugin_utils.controller_file import write_file


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_missing_parent_gets_the_directory_mode_exactly_under_a_strict_umask(tmp_path):
    old = os.umask(0o077)
    try:
        result = write_file(str(tmp_path / "mon" / "targets" / "job.json"), "[]\n", 0o644, directory_mode=0o755)
    finally:
        os.umask(old)
    assert result["changed"]
    assert mode_of(tmp_path / "mon" / "targets") == 0o755
    assert mode_of(tmp_path / "mon" / "targets" / "job.json") == 0o644
    assert (tmp_path / "mon" / "targets" / "job.json").read_text() == "[]\n"


def test_an_existing_parent_of_another_mode_is_a_change_and_check_mode_touches_nothing(tmp_path):
    parent = tmp_path / "rules"
    parent.mkdir(mode=0o700)
    os.chmod(parent, 0o700)
    target = str(parent / "job.rules.yml")
    assert write_file(target, "groups: []\n", 0o644)["changed"]
    assert mode_of(parent) == 0o700  # without directory_mode an existing parent keeps its mode
    assert not write_file(target, "groups: []\n", 0o644)["changed"]
    assert write_file(target, "groups: []\n", 0o644, check_mode=True, directory_mode=0o755)["changed"]
    assert mode_of(parent) == 0o700
    assert write_file(target, "groups: []\n", 0o644, directory_mode=0o755)["changed"]
    assert mode_of(parent) == 0o755
    assert not write_file(target, "groups: []\n", 0o644, directory_mode=0o755)["changed"]
