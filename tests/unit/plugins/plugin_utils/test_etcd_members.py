# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The etcd member changes: one member at a time, a majority kept at every step, refused before any change otherwise."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.etcd_members import member_plan

HOSTS = ["c1", "c2", "c3", "c4", "c5"]
PEER = {h: f"https://10.0.0.{i + 1}:2380" for i, h in enumerate(HOSTS)}
CLIENT = {h: f"https://10.0.0.{i + 1}:2379" for i, h in enumerate(HOSTS)}
ID = {h: 1000 + i for i, h in enumerate(HOSTS)}


def member(host, started=True):
    if not started:  # added by `member add`, never started: no name, no client URL
        return {"ID": ID[host], "peerURLs": [PEER[host]]}
    return {"ID": ID[host], "name": host, "peerURLs": [PEER[host]], "clientURLs": [CLIENT[host]]}


def probes(in_play, live, healthy=None, data=None, unstarted=()):
    """The probes of the hosts ``in_play``: ``live`` members (the cluster as each running member lists it)."""
    healthy = live if healthy is None else healthy
    data = live if data is None else data
    listed = [member(h) for h in live] + [member(h, started=False) for h in unstarted]
    health = [{"endpoint": CLIENT[h], "health": h in healthy} for h in live]
    return {h: {"data": h in data,
                "members": {"header": {"member_id": ID[h]}, "members": listed} if h in live and h in healthy else None,
                "health": health if h in live and h in healthy else None} for h in in_play}


def plan(target, in_play, *args, **kwargs):
    return member_plan(target, {h: PEER[h] for h in in_play}, probes(in_play, *args, **kwargs))


def test_no_data_anywhere_is_a_new_cluster():
    assert plan(HOSTS[:3], HOSTS[:3], [], data=[])["action"] == "create"


def test_the_same_member_set_changes_nothing_even_with_a_member_down():
    result = plan(HOSTS[:3], HOSTS[:3], HOSTS[:3], healthy=["c1", "c2"])
    assert (result["action"], result["remove"], result["add"], result["anchor"]) == ("start", [], [], "c1")


def test_three_to_one_removes_two_members_one_at_a_time_and_retires_them():
    result = plan(["c1"], HOSTS[:3], HOSTS[:3])
    assert result["action"] == "change" and result["anchor"] == "c1"
    assert result["remove"] == [{"name": "c2", "id": format(ID["c2"], "x")}, {"name": "c3", "id": format(ID["c3"], "x")}]
    assert result["add"] == [] and result["retire"] == ["c2", "c3"] and result["left_alone"] == []


def test_one_to_three_adds_each_member_with_the_cluster_of_that_step():
    result = plan(HOSTS[:3], HOSTS[:3], ["c1"])
    assert result["action"] == "change" and result["remove"] == []
    assert [(a["name"], a["registered"], a["initial_cluster"]) for a in result["add"]] == [
        ("c2", False, f"c1={PEER['c1']},c2={PEER['c2']}"),
        ("c3", False, f"c1={PEER['c1']},c2={PEER['c2']},c3={PEER['c3']}")]


def test_a_removed_member_outside_the_play_is_left_alone():
    result = plan(["c1"], ["c1"], HOSTS[:3])
    assert [r["name"] for r in result["remove"]] == ["c2", "c3"]
    assert result["left_alone"] == ["c2", "c3"] and result["retire"] == []


def test_removing_while_the_rest_is_down_is_refused_with_the_sets_and_the_fix():
    result = plan(["c1"], HOSTS[:3], HOSTS[:3], healthy=["c1"])
    assert result["action"] == "refuse" and result["remove"] == []
    assert "c1, c2, c3 (healthy: c1) -> c1" in result["problem"] and "Fix:" in result["problem"]


def test_a_member_that_is_down_is_removed_first():
    result = plan(["c1", "c2", "c4"], HOSTS[:4], HOSTS[:3], healthy=["c1", "c2"], data=HOSTS[:3])
    assert [r["name"] for r in result["remove"]] == ["c3"] and [a["name"] for a in result["add"]] == ["c4"]
    assert result["add"][0]["initial_cluster"] == f"c1={PEER['c1']},c2={PEER['c2']},c4={PEER['c4']}"


def test_adding_to_a_cluster_without_a_spare_majority_is_refused():
    # 3 members, one down: a fourth member (not started yet) would leave 2 of 4 up
    result = plan(HOSTS[:3] + ["c4", "c5"], HOSTS, HOSTS[:3], healthy=["c1", "c2"])
    assert result["action"] == "refuse" and "adding c4" in result["problem"]


def test_a_member_added_by_an_interrupted_run_is_started_not_added_again():
    result = plan(HOSTS[:3], HOSTS[:3], ["c1", "c2"], unstarted=["c3"])
    assert result["action"] == "change" and result["remove"] == []
    assert result["add"] == [{"name": "c3", "peer_url": PEER["c3"], "registered": True,
                              "initial_cluster": f"c1={PEER['c1']},c2={PEER['c2']},c3={PEER['c3']}"}]


def test_no_member_answering_refuses_a_change_but_restarts_the_same_set():
    down = {h: {"data": True, "members": None, "health": None} for h in HOSTS[:3]}
    assert member_plan(HOSTS[:3], PEER, down)["action"] == "start"
    refused = member_plan(["c1"], PEER, down)
    assert refused["action"] == "refuse" and "c2, c3 cannot be removed" in refused["problem"]
    fresh = dict(down, c4={"data": False, "members": None, "health": None})
    assert "c4 cannot be added" in member_plan(HOSTS[:4], PEER, fresh)["problem"]


def test_a_member_whose_address_changed_is_refused():
    peers = dict(PEER, c2="https://10.9.9.9:2380")
    result = member_plan(HOSTS[:3], peers, probes(HOSTS[:3], HOSTS[:3]))
    assert result["action"] == "refuse" and "10.9.9.9" in result["problem"]
