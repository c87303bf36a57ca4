# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The end of a deploy: which hosts did not finish their tier steps, and the summary table (pure, no I/O)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import render_table


def unfinished_hosts(plan: dict, done: dict, last_step: int) -> list:
    """The hosts of the plan that did not record the last tier step (failed or unreachable); ``done``: host -> the
    step index it recorded last (absent: none)."""
    hosts = dict.fromkeys(c["host"] for c in plan.get("containers") or [])
    return [h for h in hosts if done.get(h) is None or int(done[h]) < last_step]


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
