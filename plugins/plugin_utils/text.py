# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Text helpers every table of the collection uses: one natural sort, one table renderer, one range compressor."""

from __future__ import annotations

import re


def natural_key(text) -> tuple:
    """Sort key that compares the numbers in a name as numbers ("p2" before "p10")."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(text)))


def render_table(rows, columns, rule=True) -> str:
    """Fixed-width text table of dict ``rows``; ``columns`` = [(key, header)]; ``rule``: a dashed line under the
    header."""
    cells = [[str(header) for _key, header in columns]]
    for row in rows:
        cells.append(["" if row.get(key) is None else str(row.get(key)) for key, _header in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in cells]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def compress_numbers(numbers) -> str:
    """[0,1,2,3,8] -> '0-3,8'; '-' when empty."""
    nums = sorted(set(numbers))
    if not nums:
        return "-"
    out = []
    start = prev = nums[0]
    for n in nums[1:]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        start = prev = n
    out.append(f"{start}-{prev}" if prev > start else f"{start}")
    return ",".join(out)
