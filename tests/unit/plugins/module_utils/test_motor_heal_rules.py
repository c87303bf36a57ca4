"""plugins/module_utils/motor_heal_rules.py: the one table of healing rules, and the "What heals by itself" table
of docs/development.md (README links it) checked against it both ways."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_heal_rules as rules

README = Path(__file__).resolve().parents[4] / "docs" / "development.md"
# how README's "what heals it" cell names each agent
AGENT_NAMES = {"controller": "the controller's healer", "pod": "pod's healer", "host": "<job_id>-healer-<host>",
               "kv_watcher": "<job_id>-kv-watcher"}
# the rows a cell hands on to "the same two healers" (the pod's and the controller's)
SAME_TWO = "the same two healers"


def heals_section():
    text = README.read_text(encoding="utf-8")
    start = text.index("## What heals by itself")
    return text[start:text.index("\n## ", start + 1)]


def readme_rows():
    """``[(fault, what heals it)]`` of the table."""
    rows = []
    for line in heals_section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) == 3 and cells[0] != "fault" and not cells[0].startswith("---"):
            rows.append((cells[0], cells[1]))
    return rows


def test_rule_names_are_unique_and_every_rule_is_complete():
    names = [r["name"] for r in rules.RULES]
    assert len(names) == len(set(names))
    for rule in rules.RULES:
        assert rule["agent"] in rules.AGENTS and rule["watches"] and rule["condition"] and rule["action"]
        budget = rule["budget"]
        assert budget["settle"] >= 0 and list(budget["backoff"]) == sorted(budget["backoff"])
        assert budget["per_hour"] is None or budget["per_hour"] >= 1
    assert {r["agent"] for r in rules.RULES} == set(rules.AGENTS)


def test_every_rule_heals_a_row_of_the_readme_table_that_names_its_agent():
    rows = readme_rows()
    assert len(rows) >= 8
    for rule in rules.RULES:
        for start in rule["readme"]:
            matching = [heals for fault, heals in rows if fault.startswith(start)]
            assert len(matching) == 1, "README's 'What heals by itself' has no row (or several) '%s...'" % start
            heals = matching[0]
            named = AGENT_NAMES[rule["agent"]] in heals or (
                rule["agent"] in ("pod", "controller") and SAME_TWO in heals)
            assert named, "README row '%s' does not name the %s agent of rule %s" % (
                start, rule["agent"], rule["name"])


def test_every_readme_row_healed_by_an_agent_of_ours_has_its_rule():
    claimed = {start for rule in rules.RULES for start in rule["readme"]}
    ours = re.compile(r"healer|kv-watcher|" + SAME_TWO)
    for fault, heals in readme_rows():
        # a row healed by upstream or Docker alone (its restart policy) needs no rule of ours
        if ours.search(heals):
            assert any(fault.startswith(start) for start in claimed), (
                "README row '%s' is healed by an agent of ours but no rule in motor_heal_rules.RULES claims it"
                % fault[:60])


def test_the_readme_section_states_each_rules_settle_and_budget():
    section = heals_section()
    for rule in rules.RULES:
        budget = rule["budget"]
        if budget["settle"]:
            assert "%d s" % budget["settle"] in section, rule["name"]
        if budget["per_hour"]:
            assert "at most %d controller restarts an hour" % budget["per_hour"] in section, rule["name"]
    assert "within %d s of a controller start" % rules.ID_WINDOW in section
    assert "%g s" % rules.ENGINE_METRICS_TIMEOUT in section


def test_backoff_and_budget():
    budget = {"backoff": (30, 60), "per_hour": 2}
    assert rules.backoff(budget, [], 100.0) == 0.0
    assert rules.backoff(budget, [90.0], 100.0) == 120.0
    assert rules.backoff(budget, [80.0, 90.0, 95.0], 100.0) == 155.0  # the last step repeats
    assert not rules.spent(budget, [90.0], 100.0) and rules.spent(budget, [80.0, 90.0], 100.0)
    assert not rules.spent(budget, [100.0 - rules.HOUR, 90.0], 100.0)  # older than an hour
    assert not rules.spent(dict(budget, per_hour=None), [1.0] * 10, 100.0)
