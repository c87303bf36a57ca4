# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""status.yml's master/standby tables (plugin_utils/operations/ha_status.py): each replica's role from its own
readiness, the VIP's holder, each etcd member's health from ``etcdctl endpoint status -w json``."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.ha_status import (
    ha_reads,
    ha_status,
    ha_table,
    host_read,
    readiness_url,
)

STANDBY = {"detail": {"message": "Controller is not ready", "reason": "Not master"}}


def member(member_id, leader, index=7):
    return {"container": "pymotor-etcd", "rc": 0, "stderr": "", "stdout": json.dumps([{
        "Endpoint": "https://127.0.0.1:2379",
        "Status": {"header": {"member_id": member_id}, "leader": leader, "raftIndex": index, "dbSize": 4096}}])}


def replica(container, role, status, body=None):
    return {"container": container, "role": role, "status": status, "body": body}


def pair():
    return {
        "ctl1": {"vip_held": True, "etcd": member(1, 1),
                 "replicas": [replica("j-controller", "controller", 200, {}),
                              replica("j-coordinator", "coordinator", 200, {"ready": True})]},
        "ctl2": {"vip_held": False, "etcd": member(2, 1),
                 "replicas": [replica("j-controller-2", "controller", 503, STANDBY),
                              replica("j-coordinator-2", "coordinator", 503, {"detail": "Coordinator is not master"})]},
        "ctl3": {"vip_held": False, "etcd": {"container": "pymotor-etcd", "rc": 1, "stdout": "",
                                             "stderr": "Error: context deadline exceeded"}, "replicas": []},
    }


def test_one_master_and_one_standby_per_role_the_vip_holder_and_each_member():
    status = ha_status(pair())
    assert [(r["container"], r["replica"], r["vip"]) for r in status["replicas"]] == [
        ("j-controller", "master", "holds"), ("j-controller-2", "standby", ""),
        ("j-coordinator", "master", "holds"), ("j-coordinator-2", "standby", "")]
    assert status["masters"] == {"controller": ["j-controller"], "coordinator": ["j-coordinator"]}
    assert status["vip_hosts"] == ["ctl1"]
    assert [(r["host"], r["health"], r["leader"]) for r in status["etcd"]] == [
        ("ctl1", "healthy", "yes"), ("ctl2", "healthy", "no"),
        ("ctl3", "unhealthy: Error: context deadline exceeded", "-")]
    text = ha_table(status)
    assert text.splitlines()[0] == "master/standby (etcd unhealthy: Error: context deadline exceeded on ctl3):"
    assert "ctl2  controller   j-controller-2   standby" in text and "etcd members:" in text


def test_a_replica_that_does_not_answer_is_down_and_no_master_is_named():
    hosts = pair()
    hosts["ctl1"]["replicas"][0] = replica("j-controller", "controller", -1)
    hosts["ctl1"]["vip_held"] = False
    del hosts["ctl3"]
    status = ha_status(hosts)
    assert status["masters"]["controller"] == [] and status["replicas"][0]["replica"] == "down"
    assert ha_table(status).splitlines()[0] == ("master/standby (controller: 0 masters; j-controller down; motor_vip "
                                                "held by 0 hosts):")


def test_reads_name_each_replicas_probe_file_and_the_members_loopback_url():
    def inspected(name, role, path):
        return {"Name": "/" + name, "Config": {"Labels": {"io.pymotor.role": role}, "Healthcheck": {
            "Test": ["CMD", "python3", path + "/motor_probe.py", path + "/motor_probe.json"]}}}

    etcd = {"Name": "/pymotor-etcd", "State": {"Running": True},
            "Args": ["--name=ctl1", "--listen-client-urls=https://10.0.0.1:2379,https://127.0.0.1:2379"]}
    reads = ha_reads([inspected("j-coordinator-2", "coordinator", "/etc/pymotor/j/j-coordinator-2"),
                      inspected("j-p0-0", "prefill", "/etc/pymotor/j/j-p0-0"),
                      {"Name": "/j-kv-conductor", "Config": {"Labels": {"io.pymotor.role": "kv_conductor"}}}], [etcd])
    assert reads == {"probes": [{"container": "j-coordinator-2", "role": "coordinator",
                                 "file": "/etc/pymotor/j/j-coordinator-2/motor_probe.json"}],
                     "etcd": {"container": "pymotor-etcd", "endpoint": "https://127.0.0.1:2379"}}
    assert ha_reads([], [])["etcd"] is None  # no member on this host
    probe = json.dumps({"target": {"url": "http://10.0.0.2:1026/liveness", "tls": None}, "timeout": 30})
    assert readiness_url(probe) == "http://10.0.0.2:1026/readiness"


def test_a_hosts_raw_reads_become_its_entry():
    probe = {"container": "j-controller-2", "role": "controller", "file": "/x/motor_probe.json"}
    readiness = [{"item": {"item": probe}, "status": 503, "content": json.dumps(STANDBY)},
                 {"item": {"item": dict(probe, container="j-coordinator-2", role="coordinator")}, "status": -1,
                  "msg": "Status code was -1 and not [200, 503]: Request failed: <urlopen error [Errno 111]>"}]
    read = host_read(readiness, "2: eth0    inet 10.0.0.2/24 brd ...\n2: eth0    inet 10.0.0.200/32 scope global eth0",
                     "10.0.0.200", member(2, 1))
    assert read["vip_held"] is True and read["etcd"]["rc"] == 0
    assert [(r["container"], r["status"]) for r in read["replicas"]] == [
        ("j-controller-2", 503), ("j-coordinator-2", -1)]
    assert [r["replica"] for r in ha_status({"ctl2": read})["replicas"]] == ["standby", "down"]
    assert host_read(None, "inet 10.0.0.2/24", "10.0.0.20")["vip_held"] is False
    assert host_read(None, None, "10.0.0.200")["vip_held"] is None  # not read


def test_a_member_whose_container_does_not_run_is_a_row_that_says_so():
    stopped = {"Name": "/pymotor-etcd", "State": {"Running": False, "Status": "exited"}}
    reads = ha_reads([], [stopped])
    assert reads["etcd"] == {"container": "pymotor-etcd", "endpoint": None, "state": "exited"}
    status = ha_status({"ctl1": host_read(None, None, None, reads["etcd"])})
    assert status["etcd"][0]["health"] == "unhealthy: container exited"
    assert "etcd unhealthy: container exited on ctl1" in ha_table(status).splitlines()[0]
