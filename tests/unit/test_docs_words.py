# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""README and the docs speak to operators: they name no issue or stop of this repository's own work tracking (what is
not done yet is said as such; upstream's issues and commits may be cited by their address or file:line)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(r"\b(?:issue|stop) #?[0-9]+\b", re.I)


def test_readme_and_docs_name_no_issue_or_stop_of_ours():
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if INTERNAL.search(line) and "github.com" not in line and "gitcode" not in line:
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
