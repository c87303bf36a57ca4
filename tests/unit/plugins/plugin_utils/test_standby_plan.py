# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Master/standby in the plan (docs/ha.md): two replicas of the controller and of the coordinator on two control
hosts, the same ports on both, one JOB_NAME per role, etcd settings with persistence and TLS, and the VIP as every
component's CONTROLLER_SERVICE / COORDINATOR_SERVICE and as the plan's control addresses. The mode itself stays
refused by validation (test_standby_contract.py) until the VIP and HAProxy are deployed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import host_view
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan, placement_of

_SPEC = importlib.util.spec_from_file_location("motor_plan_helpers", Path(__file__).with_name("test_motor_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)
contract_config, inventory = _HELPERS.contract_config, _HELPERS.inventory

VIP = "10.0.1.100"
CTRL, COORD = "motor_controller_config", "motor_coordinator_config"


def standby_config(*sections, **kwargs):
    cfg = contract_config(**kwargs)
    for key in sections or (CTRL, COORD):
        cfg["user_config"].setdefault(key, {})["standby_config"] = {"enable_master_standby": True}
    return cfg


def standby_hosts(control=2, vip=VIP, **per_host):
    hosts = inventory(engine=2, control=control, **per_host)
    for name, hvars in hosts.items():
        if name.startswith("c") and vip is not None:
            hvars["motor_vip"] = vip  # a group variable: every control host has it
    return hosts


def control_containers(plan, role):
    return sorted((c for c in plan["containers"] if c["role"] == role), key=lambda c: c["name"])


def test_off_the_plan_has_no_standby_entry_and_one_replica():
    plan = build_plan(contract_config(), standby_hosts())
    assert "standby" not in plan
    assert [c["name"] for c in control_containers(plan, "controller")] == ["job-controller"]
    assert plan["controller"]["ip"] == "10.0.1.1"
    assert "etcd_config" not in plan["containers"][0]["user_config"][CTRL]


def test_two_replicas_on_two_control_hosts_with_the_same_ports_and_job_name():
    plan = build_plan(standby_config(), standby_hosts())
    for role in ("controller", "coordinator"):
        first, second = control_containers(plan, role)
        assert (first["name"], second["name"]) == (f"job-{role}", f"job-{role}-2")
        assert (first["host"], second["host"]) == ("c1", "c2")
        assert first["port_map"] == second["port_map"] and first["ports"] == second["ports"]
        # one JOB_NAME: upstream prefixes the master lock's key with it, two names would elect two masters
        assert first["env"]["JOB_NAME"] == second["env"]["JOB_NAME"] == f"job-{role}"
        assert (first["env"]["POD_IP"], second["env"]["POD_IP"]) == ("10.0.1.1", "10.0.1.2")  # each binds its own
        for port in first["ports"]:
            assert port in plan["hosts"]["c1"]["ports"] and port in plan["hosts"]["c2"]["ports"]
    assert plan["standby"] == {
        "vip": VIP, "roles": ["controller", "coordinator"],
        "replicas": {role: [{"host": "c1", "ip": "10.0.1.1", "container": f"job-{role}"},
                            {"host": "c2", "ip": "10.0.1.2", "container": f"job-{role}-2"}]
                     for role in ("controller", "coordinator")},
        "etcd": {"host": "127.0.0.1", "port": 2379, "tls_dir": "/etc/pymotor/etcd-tls"}}


def test_every_component_and_the_plan_reach_the_control_plane_through_the_vip():
    plan = build_plan(standby_config(affinity=True), standby_hosts())
    for cont in plan["containers"]:
        assert cont["env"]["CONTROLLER_SERVICE"] == VIP, cont["name"]
        assert cont["env"]["COORDINATOR_SERVICE"] == VIP, cont["name"]
    assert plan["controller"]["ip"] == plan["coordinator"]["ip"] == VIP
    assert plan["coordinator"]["url"] == f"http://{VIP}:{plan['coordinator']['infer_port']}"
    assert plan["controller"]["host"] == plan["coordinator"]["host"] == "c1"


def test_only_the_replicated_role_moves_to_the_vip():
    plan = build_plan(standby_config(COORD), standby_hosts())
    assert len(control_containers(plan, "controller")) == 1 and len(control_containers(plan, "coordinator")) == 2
    env = control_containers(plan, "coordinator")[1]["env"]
    assert env["CONTROLLER_SERVICE"] == "10.0.1.1" and env["COORDINATOR_SERVICE"] == VIP
    assert plan["controller"]["ip"] == "10.0.1.1" and plan["standby"]["roles"] == ["coordinator"]
    uc = control_containers(plan, "coordinator")[0]["user_config"]
    assert "etcd_config" in uc[COORD] and "etcd_config" not in uc.get(CTRL, {})


def test_etcd_settings_local_member_persistence_and_tls():
    cfg = standby_config()
    cfg["user_config"][CTRL]["etcd_config"] = {"etcd_port": 12379, "etcd_timeout": 7}
    plan = build_plan(cfg, standby_hosts())
    for cont in control_containers(plan, "controller") + control_containers(plan, "coordinator"):
        for section in (CTRL, COORD):
            etcd = cont["user_config"][section]["etcd_config"]
            assert etcd["etcd_host"] == "127.0.0.1" and etcd["etcd_port"] == 12379
            assert etcd["enable_etcd_persistence"] is True
            tls = cont["user_config"][section]["etcd_tls_config"]
            assert tls == {"enable_tls": True, "ca_file": "/etc/pymotor/etcd-tls/ca.crt",
                           "cert_file": "/etc/pymotor/etcd-tls/client.crt", "key_file": "/etc/pymotor/etcd-tls/client.key"}
    assert control_containers(plan, "controller")[0]["user_config"][CTRL]["etcd_config"]["etcd_timeout"] == 7
    assert plan["standby"]["etcd"]["port"] == 12379


def test_a_port_taken_on_the_second_host_moves_both_replicas():
    plan = build_plan(standby_config(), standby_hosts())
    api = plan["controller"]["api_port"]
    moved = build_plan(standby_config(), standby_hosts(c2={"motor_reserved_ports": [api]}))
    first, second = control_containers(moved, "controller")
    assert moved["controller"]["api_port"] != api
    assert first["port_map"]["api"] == second["port_map"]["api"] == moved["controller"]["api_port"]


def test_a_second_plan_keeps_both_replicas_in_place():
    plan = build_plan(standby_config(), standby_hosts())
    again = build_plan(standby_config(), standby_hosts(), placement_of(plan))
    assert [(c["name"], c["host"], c["port_map"]) for c in again["containers"]] == \
        [(c["name"], c["host"], c["port_map"]) for c in plan["containers"]]


@pytest.mark.parametrize("control, vip, path, words", [
    (1, VIP, "motor_control_hosts", "the inventory has 1 (c1)"),
    (2, None, "motor_vip", "motor_vip is not set"),
    (2, "10.0.1.2", "motor_vip", "is the address of c2"),
])
def test_the_plan_refuses_what_validation_refuses(control, vip, path, words):
    with pytest.raises(MotorPlanError) as err:
        build_plan(standby_config(), standby_hosts(control=control, vip=vip))
    assert any(p.path == path and words in p.message for p in err.value.problems), err.value.problems


def test_the_host_view_carries_the_vip():
    assert host_view({"motor_host_ip": "10.0.1.1", "motor_vip": VIP})["motor_vip"] == VIP
    assert host_view({"motor_host_ip": "10.0.1.1"})["motor_vip"] is None


def test_the_etcd_client_certificate_is_mounted_into_the_replicas_only():
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import shared_spec
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import container_spec

    settings = {"image": "img:1", "command": ["bash"], "job_id": "job", "log_root": "/var/log/pymotor",
                "weight_dir": "/mnt/weight", "extra_volumes": [], "restart_policy": "unless-stopped",
                "log_max_size": "100m", "log_max_file": 5, "mounts": [], "driver_dir": "/usr/local/Ascend/driver",
                "etcd_tls_dir": "/etc/pymotor-etcd-client"}
    mount = "/etc/pymotor-etcd-client:/etc/pymotor/etcd-tls:ro"

    def volumes(plan, cont, given=None):
        given = settings if given is None else given
        result = {"hashes": {c["name"]: "h" for c in plan["containers"]},
                  "parts": {c["name"]: "p" for c in plan["containers"]}}
        return container_spec(cont, result, given)["volumes"]

    plan = build_plan(standby_config(COORD, affinity=True), standby_hosts())
    with_mount = sorted(c["name"] for c in plan["containers"] if mount in volumes(plan, c))
    assert with_mount == ["job-coordinator", "job-coordinator-2"]  # not the controller (its mode is off), no engine
    assert not any(mount in volumes(plan, c, dict(settings, etcd_tls_dir="")) for c in plan["containers"])
    off = build_plan(contract_config(), standby_hosts())
    assert not any(mount in volumes(off, c) for c in off["containers"])
    # the setting is part of the containers' hash only when set: a deploy without master/standby does not restart
    base = dict(settings, env_functions={}, etcd_tls_dir="")
    assert "etcd_tls_dir" not in shared_spec(base, [], off)
    assert shared_spec(dict(base, etcd_tls_dir="/x"), [], off)["etcd_tls_dir"] == "/x"
