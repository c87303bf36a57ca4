# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Healers and master/standby (docs/ha.md): a replica answering readiness 503 "Not master" is a live standby, never
a fault (``motor_health.replica_role``, the one rule); the controller's healer runs in both replicas and acts only in
the master's; the Docker health check of both replicas is upstream's /liveness, which a standby passes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import replica_role
from ansible_collections.pymotor.ascend.plugins.plugin_utils import heal
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.healer import HEALER_BLOCK, HEALER_CONFIG, healer_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.probes import healthcheck, probe_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps, own_files

_SPEC = importlib.util.spec_from_file_location("standby_plan_helpers", Path(__file__).with_name("test_standby_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)

# upstream's answers (controller_api.py:322-342, management_server.py:51-55 and 226-235)
CONTROLLER_STANDBY = {"detail": {"message": "Controller is not ready", "reason": "Not master"}}
COORDINATOR_STANDBY = {"detail": "Coordinator is not master"}
COORDINATOR_STALE = {"detail": "Coordinator daemon heartbeat stale; not ready"}
NOT_READY = {"status": "ok", "message": "Coordinator is ok", "ready": False}


@pytest.mark.parametrize("status, body, role", [
    (200, {"message": "Controller is ready"}, "master"),
    (200, {"ready": False, "message": "Coordinator is master"}, "master"),  # a master without instances yet
    (503, CONTROLLER_STANDBY, "standby"),
    (503, COORDINATOR_STANDBY, "standby"),
    (503, COORDINATOR_STALE, "down"),
    (503, {"detail": {"message": "Controller is not ready", "reason": "Overall not healthy"}}, "down"),
    (-1, None, "down"),
    (500, None, "down"),
])
def test_replica_role_from_its_own_readiness(status, body, role):
    assert replica_role(status, body) == role


def standby_plan():
    return build_plan(_HELPERS.standby_config(), _HELPERS.standby_hosts())


def test_both_controller_replicas_get_the_healer_with_their_own_readiness():
    plan = standby_plan()
    files = healer_files(plan)
    controllers = [c for c in plan["containers"] if c["role"] == "controller"]
    assert len(controllers) == 2
    for c in controllers:
        config = json.loads(files[c["name"]][HEALER_CONFIG])
        assert config["own"]["url"] == "http://%s:%s/readiness" % (c["ip"], c["port_map"]["api"])
        assert config["coordinator"]["url"].startswith("http://%s:" % plan["standby"]["vip"])  # the master's
    maps = {m["name"]: m for m in configmaps(controllers, {}, own_files(plan, ""))}
    assert all(maps[c["name"]]["prepend"] == {"boot.sh": HEALER_BLOCK} for c in controllers)


def test_without_master_standby_the_healer_has_no_own_readiness():
    plan = build_plan(_HELPERS.contract_config(), _HELPERS.standby_hosts())
    (config,) = [json.loads(texts[HEALER_CONFIG]) for name, texts in healer_files(plan).items()
                 if name.endswith("-controller")]
    assert "own" not in config


def test_both_replicas_docker_health_check_is_upstreams_liveness_which_a_standby_passes():
    plan = standby_plan()
    probes = probe_files(plan)
    for c in plan["containers"]:
        if c["role"] in ("controller", "coordinator"):
            assert healthcheck(c) is not None
            target = json.loads(probes[c["name"]]["motor_probe.json"])["target"]
            assert target["url"].endswith("/liveness") and c["ip"] in target["url"], target


class Replica:
    """The coordinator through the VIP says ready: false while a union instance serves (a rule that holds); this
    controller replica's own /readiness answers as ``own``."""

    def __init__(self, own):
        self.own = own

    def get(self, target):
        if target["url"].endswith("/readiness"):
            return NOT_READY
        return {"status": "normal"}

    def answer(self, target):
        assert target["url"] == "http://own/readiness"
        return self.own


def replica_healer(tmp_path, replica, clock, acted):
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({"u0": {"role": "union", "engines": [{"url": "http://e/status", "tls": None}]}}))
    config = {"coordinator": {"url": "http://vip/readiness", "tls": None}, "instances_file": str(instances),
              "state": str(tmp_path / "state.json"), "settle": 40, "own": {"url": "http://own/readiness", "tls": None}}
    return heal.Healer(config, get=replica.get, clock=lambda: clock[0], act=lambda: acted.append(clock[0]),
                       answer=replica.answer)


@pytest.mark.parametrize("own", [(503, CONTROLLER_STANDBY), (-1, None)])
def test_a_standby_or_unanswering_controllers_healer_never_restarts_it(tmp_path, own):
    replica, clock, acted = Replica(own), [0.0], []
    h = replica_healer(tmp_path, replica, clock, acted)
    for clock[0] in (0.0, 40.0, 100.0, 1000.0):
        assert not h.step()
    assert acted == []


def test_the_masters_healer_acts_and_its_hold_starts_anew_after_a_spell_as_standby(tmp_path):
    replica, clock, acted = Replica((200, {"message": "Controller is ready"})), [0.0], []
    h = replica_healer(tmp_path, replica, clock, acted)
    assert not h.step()
    clock[0], replica.own = 30.0, (503, CONTROLLER_STANDBY)  # it lost the lock: the held time is forgotten
    assert not h.step()
    clock[0], replica.own = 50.0, (200, {"message": "Controller is ready"})
    assert not h.step()
    clock[0] = 89.0
    assert not h.step()
    clock[0] = 90.0
    assert h.step() and acted == [90.0]
