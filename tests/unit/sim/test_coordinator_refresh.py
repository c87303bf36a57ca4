"""The stand-in coordinator's POST /instances/refresh refuses what upstream's refuses (InsEventMsg with its required
Instance fields: motor/coordinator/api_server/management_server.py:350-358) and applies add / del by id, as the
rolling restart's drain uses it (plugins/plugin_utils/reconcile/roll_drain.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "motor_image"))

from motor_sim.coordinator import Coordinator  # noqa: E402


def inst(iid, role="prefill", job="job-p0"):
    return {"id": iid, "role": role, "job_name": job, "model_name": "m",
            "endpoints": [{"dp_rank": 0, "ip": "192.0.2.1", "port": 9000}]}


def test_a_del_takes_the_instance_out_and_a_new_id_of_the_same_job_comes_back():
    coordinator = Coordinator({})
    assert coordinator.refresh({"event": "add", "instances": [inst(1), inst(2, job="job-p1")]}, None)[0] == 200
    drained = {"event": "del", "instances": [{"job_name": "job-p0", "model_name": "m", "id": 1, "role": "prefill"}]}
    assert coordinator.refresh(drained, None)[0] == 200
    assert [i["id"] for i in coordinator.by_role("prefill")] == [2]
    assert coordinator.ready()  # the other prefill instance serves
    assert coordinator.refresh({"event": "del", "instances": [inst(1)]}, None)[0] == 200  # the controller's own del
    assert coordinator.refresh({"event": "add", "instances": [inst(3)]}, None)[0] == 200
    assert sorted(i["id"] for i in coordinator.by_role("prefill")) == [2, 3]


def test_bodies_upstreams_model_refuses_are_refused_and_change_nothing():
    coordinator = Coordinator({})
    coordinator.refresh({"event": "add", "instances": [inst(1)]}, None)
    for body in ({}, {"instances": [inst(1)]}, {"event": "remove", "instances": [inst(1)]}, {"event": "del"},
                 {"event": "del", "instances": [{"id": 1}]},
                 {"event": "del", "instances": [{"job_name": "j", "model_name": "m", "id": "x", "role": "prefill"}]},
                 {"event": "del", "instances": [{"job_name": "j", "id": 1, "role": "prefill"}]}):
        status, answer = coordinator.refresh(body, None)
        assert status == 400 and "Invalid request format" in answer["detail"], body
    assert [i["id"] for i in coordinator.by_role("prefill")] == [1]
