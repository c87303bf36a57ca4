# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The NPU prechecks (reconcile/npu_checks.py through the precheck): NPU network, management devices, driver and
firmware versions, health Warning vs Alarm; every finding names host, device, check and fix, all at once."""

from __future__ import annotations

import json

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_host_probe import parse_ip, parse_tls, parse_version_info
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_checks import (
    hccl_port_findings,
    job_network_findings,
    version_key,
)

from .test_motor_precheck import HOSTS, SEED, judge, probes_of


@pytest.fixture(name="plan", scope="module")
def seed_plan():
    user = json.loads((SEED / "user_config.json").read_text())
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


MANAGERS = {"/dev/davinci_manager": True, "/dev/devmm_svm": True, "/dev/hisi_hdc": True, "/dev/infiniband": False}
DRIVER = {"Version": "24.1.0.3", "compatible_version_fw": "[7.0.0,7.5.99]"}


def engine_npus(plan):
    return [n for c in plan["containers"] if c["host"] == "h1" for n in c["npu_ids"]]


def with_versions(p, driver=None, firmware="7.5.0.3.220"):
    p["versions"] = {"driver": dict(DRIVER, **(driver or {})), "firmware": {"Version": firmware}}
    p["device_nodes"] = dict(MANAGERS)


def test_real_format_hccn_tool_and_version_info_are_parsed():
    assert parse_ip("ipaddr:29.1.137.205\nnetmask:255.255.0.0\n") == "29.1.137.205"
    assert parse_ip("Get ip fail\n") == ""
    assert parse_tls("dev_id:0, tls switch[1](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset)") == "1"
    info = parse_version_info("Version=24.1.0.3\nascendhal_version=7.35.23\ncompatible_version_fw=[7.0.0,7.5.99]\n")
    assert info["Version"] == "24.1.0.3" and info["compatible_version_fw"] == "[7.0.0,7.5.99]"
    assert version_key("24.1.rc3") < version_key("24.1.0") < version_key("24.1.0.3") < version_key("25.0.rc1")


def test_a_healthy_engine_host_with_versions_and_devices_passes(plan):
    result = judge(plan, probes_of(plan, h1=with_versions))
    assert result["problems"] == [] and result["warnings"] == []


def test_every_npu_problem_at_once_with_host_device_check_and_fix(plan):
    first, second, third = engine_npus(plan)[:3]

    def sick(p):
        with_versions(p, driver={"Version": "23.0.3"})
        p["npu_network"][str(first)] = {"ip": "", "tls": "0", "error": "ipaddr not configured"}
        p["links"][str(second)] = "DOWN"
        p["device_nodes"]["/dev/devmm_svm"] = False
        p["npu_health"][str(third)] = "Critical"

    result = judge(plan, probes_of(plan, h1=sick), {"h1": {"motor_service_min_driver_version": "24.1.0"}})
    problems = result["problems"]
    for line in (f"h1: NPU {first} address: hccn_tool -i {first} -ip -g has no device IP (ipaddr not configured) "
                 "(fix: configure the device in /etc/hccn.conf",
                 f"h1: NPU {second} link: hccn_tool -i {second} -link -g says DOWN (fix: check the NPU port's cabling",
                 "h1: device /dev/devmm_svm: /dev/devmm_svm is missing (fix: install (or reload) the Ascend NPU driver",
                 f"h1: NPU {third} health: npu-smi info reports Critical (fix: repair the NPU",
                 "h1: driver version: driver 23.0.3 is older than 24.1.0, the oldest the image's CANN supports "
                 "(fix: upgrade the Ascend driver and firmware to 24.1.0 or newer"):
        assert any(p.startswith(line) for p in problems), f"{line!r} not in {problems}"
    assert len(problems) == 5, problems
    # /dev/infiniband is absent but no container of this plan gets it (KV pool not over rdma)
    assert not any("infiniband" in p for p in problems)


def test_warning_health_deploys_with_a_warning_and_versions_side_by_side(plan):
    npu = engine_npus(plan)[0]

    def warned(p):
        with_versions(p, firmware="6.4.12.1.241")
        p["npu_health"][str(npu)] = "Warning"
        p["images"][0]["Labels"] = {"io.pymotor.cann.version": "8.5.1"}

    result = judge(plan, probes_of(plan, h1=warned))
    assert result["problems"] == []
    assert f"h1: NPU {npu} health: npu-smi info reports Warning; deploying anyway (fix: see npu-smi info -t health " \
           "-i <card> for the alarm)" in result["warnings"]
    assert any(w.startswith("h1: driver version: the image declares CANN 8.5.1; the host has driver 24.1.0.3, "
                            "firmware 6.4.12.1.241") for w in result["warnings"]), result["warnings"]
    assert any(w.startswith("h1: firmware version: firmware 6.4.12.1.241 is outside the driver 24.1.0.3's compatible "
                            "range [7.0.0,7.5.99]") for w in result["warnings"]), result["warnings"]


def test_rdma_device_is_checked_where_a_container_gets_it(plan):
    engine = next(c for c in plan["containers"] if c["host"] == "h1")
    engine["devices"] = engine["devices"] + ["/dev/infiniband:/dev/infiniband:rwm"]
    try:
        problems = judge(plan, probes_of(plan, h1=with_versions))["problems"]
    finally:
        engine["devices"] = engine["devices"][:-1]
    assert any(p.startswith("h1: device /dev/infiniband: /dev/infiniband is missing (fix: install the RDMA") for p in problems)


def test_tls_switch_and_device_addresses_across_the_job():
    plan = {"containers": [{"name": "p0-0", "host": "a", "npu_ids": [0, 1]}, {"name": "d0-0", "host": "b", "npu_ids": [0, 1]},
                           {"name": "controller", "host": "c", "npu_ids": []}]}
    probes = {"a": {"npu_network": {"0": {"ip": "29.1.0.1", "tls": "0"}, "1": {"ip": "29.1.0.2", "tls": "0"}}},
              "b": {"npu_network": {"0": {"ip": "29.1.0.1", "tls": "1"}, "1": {"ip": "29.2.0.2", "tls": "0"}}}}
    found = job_network_findings(plan, probes, True)
    assert sorted(found) == ["b"]
    checks = {check: (what, fix) for check, what, fix in found["b"]}
    assert checks["NPU 0 TLS"][0] == "hccn_tool -i 0 -tls -g says tls switch[1], most planned NPUs of the job have [0]"
    assert checks["NPU 0 TLS"][1] == "set the same switch on every NPU: hccn_tool -i 0 -tls -s enable 0"
    assert checks["NPU 0 address"][0].startswith("device IP 29.1.0.1 is also NPU 0's on a")
    assert job_network_findings(plan, probes, False) == {}


def test_hccl_ranges_in_the_ephemeral_range_not_reserved_are_a_warning(plan):
    engines = [c for c in plan["containers"] if c["host"] == "h1"]

    def ephemeral(p):
        p["local_ports"] = {"range": ["32768", "60999"], "reserved": "60000-60031"}

    result = judge(plan, probes_of(plan, h1=ephemeral))
    assert result["problems"] == []
    hccl = sorted(c["port_map"]["hccl"] for c in engines)
    assert hccl == [60000, 60032]  # the first range is reserved, the second is not
    second = next(c['name'] for c in engines if c['port_map']['hccl'] == 60032)
    assert result["warnings"] == [
        f"h1: HCCL ports: 60032-60063 ({second}) lie in the ephemeral port range 32768-60999 and are not reserved "
        "(fix: reserve them, keeping what is reserved already: sysctl -w net.ipv4.ip_local_reserved_ports=60000-60063 "
        "(and the same value in /etc/sysctl.d/ to keep it after a reboot))"]


def test_hccl_hint_is_one_sysctl_per_host_merging_ranges_and_keeping_the_reserved_list():
    containers = [{"name": "p0", "port_map": {"hccl": 40000}}, {"name": "p1", "port_map": {"hccl": 40032}},
                  {"name": "d0", "port_map": {"hccl": 50000}}, {"name": "ctl", "port_map": {}}]
    probe = {"local_ports": {"range": ["32768", "60999"], "reserved": "8080,50010-50020"}}
    found = hccl_port_findings(containers, probe)
    assert len(found) == 1  # one finding, one command, for every range of the host
    check, what, fix = found[0]
    assert what == ("40000-40031 (p0), 40032-40063 (p1), 50000-50031 (d0) lie in the ephemeral port range "
                    "32768-60999 and are not reserved")
    # sysctl -w replaces the list: the one value keeps 8080 and the already reserved 50010-50020
    assert "sysctl -w net.ipv4.ip_local_reserved_ports=8080,40000-40063,50000-50031 " in fix
    assert fix.count("sysctl -w") == 1
    # the host's list not read: a command that reads it first and appends to it
    del probe["local_ports"]["reserved"]
    fix = hccl_port_findings(containers, probe)[0][2]
    assert ('current=$(sysctl -n net.ipv4.ip_local_reserved_ports); sysctl -w net.ipv4.ip_local_reserved_ports='
            '"${current:+$current,}40000-40063,50000-50031"') in fix
    # everything reserved: nothing to say
    probe["local_ports"]["reserved"] = "40000-40063,50000-50031"
    assert hccl_port_findings(containers, probe) == []


def test_a3_needs_a_super_device_id_per_planned_npu_as_hccl_tools_does(plan):
    a3 = json.loads(json.dumps(plan))
    a3["hosts"]["h1"]["hardware_type"] = "800I_A3"
    first, second = engine_npus(a3)[:2]

    def spod(p, missing=()):
        with_versions(p)
        p["npu_spod"] = {str(n): {"sdid": str(100 + n)} for n in p["npu_devices"] if n not in missing}
        for n in missing:
            p["npu_spod"][str(n)] = {"sdid": "", "error": "Error: spod-info is not supported."}

    assert judge(a3, probes_of(a3, h1=spod))["problems"] == []
    problems = judge(a3, probes_of(a3, h1=lambda p: spod(p, (second,))))["problems"]
    assert problems == [f"h1: NPU {second} super pod: npu-smi info -t spod-info -i {second // 2} -c {second % 2} "
                        "gives no SDID (Error: spod-info is not supported.) (fix: upstream's hccl_tools.py needs it "
                        "at every engine start on A3: update the NPU driver and firmware until npu-smi answers it (a "
                        "host that is no A3: its real motor_hardware_type in the inventory))"], problems
    assert first != second
    # an A2 host asks nothing of spod-info, whatever its probe says
    assert judge(plan, probes_of(plan, h1=lambda p: spod(p, (second,))))["problems"] == []
