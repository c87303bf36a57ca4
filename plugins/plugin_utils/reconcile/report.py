# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The end of a deploy: which hosts did not finish their tier steps, and the summary table (pure, no I/O)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import render_table


def unfinished_hosts(decision: dict, runs: dict) -> list:
    """The hosts that had work but whose last registered run is missing, failed or unreachable; ``runs``: host -> the
    result its last motor_containers run of the steps registered (a host runs a step only where it has work there:
    with the linear strategy and any_errors_fatal, a host that stopped early shows as failed, or another host does)."""
    out = []
    for host, work in (decision.get("work") or {}).items():
        if not any(run is not None for run in work.get("steps") or []):
            continue
        run = runs.get(host)
        if not isinstance(run, dict) or run.get("failed") or run.get("unreachable") or run.get("skipped"):
            out.append(host)
    return out


def unfinished_message(hosts: list) -> str:
    """What the deploy says when a host did not finish its tier steps."""
    return ('deploy stopped: %s did not finish "starting the containers" (failed or unreachable, see above); nothing '
            "further was started. Fix the host and re-run: the deploy converges." % ", ".join(hosts))


SUMMARY_COLUMNS = [("host", "HOST"), ("container", "CONTAINER"), ("role", "ROLE"), ("npus", "NPUS"), ("state", "STATE"),
                   ("ports", "PORTS")]


def deploy_summary(plan: dict, states: list) -> list:
    """The summary lines: one row per planned container with its state, newest first from ``states`` (a list of
    host -> container -> state mappings, oldest first: the discovery, the tier steps, a rolling restart)."""
    rows = []
    for c in plan.get("containers") or []:
        state = "missing"
        for layer in states:
            state = ((layer or {}).get(c["host"]) or {}).get(c["name"]) or state
        rows.append({"host": c["host"], "container": c["name"], "role": c["role"],
                     "npus": ",".join(str(n) for n in c.get("npu_ids") or []) or "-", "state": state,
                     "ports": ",".join(str(p) for p in c.get("ports") or [])})
    lines = render_table(rows, SUMMARY_COLUMNS, rule=False).splitlines()
    return lines + ["coordinator (OpenAI API): %s" % (plan.get("coordinator") or {}).get("url")]
