#!/usr/bin/env python3
"""Where `make test`'s time goes, as markdown for tests/README.md: one row per part (its wall time and when it
ended, from the scheduler's status file) and the slowest tests and fixtures of every pytest part (pytest's
``--durations`` rows: a ``setup`` row of a module's first test is its module-scoped cluster).

Usage: scripts/test_times.py [LOG_DIR] [--top N]   (LOG_DIR defaults to tests/output/lanes)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

DURATION_ROW = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+)$")


def part_rows(log_dir: Path) -> list[tuple[str, str, int, int, str]]:
    """(part, result, seconds, seconds since the parts started, CPU seconds or "-") in the order the parts ended (a
    status file written before the CPU column has none: "-")."""
    rows = []
    status = log_dir / ".status"
    for line in status.read_text(encoding="utf-8").splitlines() if status.exists() else []:
        name, result, seconds, ended, *cpu = line.split("|")
        rows.append((name, result, int(seconds), int(ended), cpu[0] if cpu else "-"))
    return rows


def duration_rows(log_dir: Path) -> list[tuple[float, str, str, str]]:
    """(seconds, phase, test id, part) of every ``--durations`` row in every part's log."""
    rows = []
    for log in sorted(log_dir.glob("*.log")):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            match = DURATION_ROW.match(line.strip())
            if match:
                rows.append((float(match[1]), match[2], match[3], log.stem))
    return rows


def markdown(log_dir: Path, top: int) -> str:
    parts = part_rows(log_dir)
    out = ["| part | result | seconds | ended at (s) | CPU s |", "|---|---|---|---|---|"]
    out += [f"| {name} | {result} | {seconds} | {ended} | {cpu} |" for name, result, seconds, ended, cpu in parts]
    if parts:
        busy = sum(row[2] for row in parts)
        out.append(f"\nAll parts ended after {max(row[3] for row in parts)} s; {busy} s of part time in all.")
    durations = sorted(duration_rows(log_dir), reverse=True)
    out += ["", f"Slowest {min(top, len(durations))} tests and fixtures (pytest `--durations`; a `setup` row is the "
                "module-scoped fixture, usually a simulated cluster):", "",
            "| seconds | phase | test | part |", "|---|---|---|---|"]
    out += [f"| {sec:.1f} | {phase} | `{test}` | {part} |" for sec, phase, test, part in durations[:top]]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir", nargs="?", default="tests/output/lanes", type=Path)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    sys.stdout.write(markdown(args.log_dir, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
