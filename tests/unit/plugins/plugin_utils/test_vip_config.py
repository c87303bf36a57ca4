# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The virtual IP's rendered configuration (plan/vip.py): HAProxy frontends on the VIP with the replicas' own ports,
health-checked on upstream's /readiness; keepalived with unicast VRRP peers, tracking the local HAProxy; the
containers with NET_ADMIN + NET_RAW + SETGID only for keepalived and no capability for HAProxy."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.vip import (
    METRICS_PORT,
    frontends,
    haproxy_config,
    keepalived_config,
    router_id,
    vip_containers,
    vip_host_work,
    vip_hosts,
)

_SPEC = importlib.util.spec_from_file_location("standby_plan_helpers", Path(__file__).with_name("test_standby_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)
standby_config, standby_hosts, VIP = _HELPERS.standby_config, _HELPERS.standby_hosts, _HELPERS.VIP


def plan_of(*sections, **kwargs):
    return build_plan(standby_config(*sections, **kwargs), standby_hosts())


def listen_blocks(cfg):
    """{listen name: its lines}"""
    blocks, current = {}, None
    for line in cfg.splitlines():
        if line.startswith("listen "):
            current = blocks.setdefault(line.split()[1], [])
        elif not line.startswith(" "):
            current = None
        elif current is not None:
            current.append(line.strip())
    return blocks


def test_every_control_port_is_a_frontend_on_the_vip_checked_on_readiness():
    plan = plan_of()
    blocks = listen_blocks(haproxy_config(plan))
    ctrl, coord = plan["controller"], plan["coordinator"]
    expected = {"controller_api": (ctrl["api_port"], ctrl["api_port"]), "controller_obs": (ctrl["obs_port"], ctrl["api_port"]),
                "coordinator_infer": (coord["infer_port"], coord["mgmt_port"]),
                "coordinator_mgmt": (coord["mgmt_port"], coord["mgmt_port"]),
                "coordinator_obs": (coord["obs_port"], coord["mgmt_port"])}
    # checked once per answer that counts: the other ports of a replica follow its check (HAProxy track)
    tracks = {"controller_obs": "controller_api", "coordinator_obs": "coordinator_mgmt"}
    for name, (port, check) in expected.items():
        lines = blocks[name]
        assert f"bind {VIP}:{port} transparent" in lines
        role = name.split("_", maxsplit=1)[0]
        servers = [x for x in lines if x.startswith("server ")]
        if name in tracks:
            assert servers == [f"server job-{role} 10.0.1.1:{port} track {tracks[name]}/job-{role}",
                               f"server job-{role}-2 10.0.1.2:{port} track {tracks[name]}/job-{role}-2"]
            assert not [x for x in lines if "check" in x]
            continue
        # the inference frontend wants "ready": true (a master without its instances answers chat with 503)
        expect = 'http-check expect rstring "\\"ready\\": ?true"' if name == "coordinator_infer" else \
            "http-check expect status 200"
        assert "option httpchk GET /readiness" in lines and expect in lines
        assert servers == [f"server job-{role} 10.0.1.1:{port} check inter 1s fall 2 rise 2 port {check}",
                           f"server job-{role}-2 10.0.1.2:{port} check inter 1s fall 2 rise 2 port {check}"]
    metaserver = sorted(n for n in blocks if n.startswith("coordinator_metaserver_"))
    assert metaserver and all(f"bind {VIP}:" in blocks[n][0] for n in metaserver)
    assert all(line.endswith("track coordinator_mgmt/" + line.split()[1]) for n in metaserver
               for line in blocks[n] if line.startswith("server "))
    # 3 checks per replica pair, however many ports: the control plane's /readiness is not asked once per port
    assert haproxy_config(plan).count(" check inter ") == 6
    # nothing else listens wider than the VIP; HAProxy's own liveness is on loopback only
    binds = re.findall(r"^\s+bind (\S+)", haproxy_config(plan), re.M)
    assert all(b.startswith(VIP + ":") for b in binds if not b.startswith("127.0.0.1:")), binds
    assert "bind 127.0.0.1:61080" in haproxy_config(plan) and "monitor-uri /healthz" in haproxy_config(plan)


def test_haproxys_prometheus_exporter_listens_on_its_hosts_own_address_only():
    plan = plan_of()
    for host in ("c1", "c2"):
        cfg = haproxy_config(plan, host=host)
        metrics = cfg.split("frontend pymotor_metrics\n", 1)[1].split("listen ", 1)[0]
        assert f"bind {plan['hosts'][host]['ip']}:{METRICS_PORT}\n" in metrics
        assert "use-service prometheus-exporter if { path /metrics }" in metrics and "http-request deny" in metrics
        binds = re.findall(r"^\s+bind (\S+)", cfg, re.M)
        assert [b for b in binds if not b.startswith((VIP + ":", "127.0.0.1:"))] == [
            f"{plan['hosts'][host]['ip']}:{METRICS_PORT}"]
        assert vip_host_work(plan, host, "eth0", "vip:1", "/etc/pymotor/vip/job")["files"]["haproxy.cfg"] == cfg


def test_only_the_replicated_role_gets_frontends():
    plan = plan_of("motor_coordinator_config")
    assert {f["name"].split("_", maxsplit=1)[0] for f in frontends(plan)} == {"coordinator"}
    assert frontends(build_plan(_HELPERS.contract_config(), standby_hosts())) == []


def test_keepalived_unicast_peers_priorities_and_the_haproxy_check():
    plan = plan_of()
    assert vip_hosts(plan) == ["c1", "c2"]
    first, second = (keepalived_config(plan, h, "eth1") for h in ("c1", "c2"))
    for cfg, own, peer, priority in ((first, "10.0.1.1", "10.0.1.2", 150), (second, "10.0.1.2", "10.0.1.1", 140)):
        assert f"unicast_src_ip {own}" in cfg
        assert re.search(r"unicast_peer \{\s+%s\s+\}" % re.escape(peer), cfg), cfg
        assert f"priority {priority}" in cfg and "state BACKUP" in cfg and "nopreempt" in cfg
        assert f"{VIP}/32 dev eth1" in cfg and "interface eth1" in cfg
        assert "</dev/tcp/127.0.0.1/61080" in cfg and "track_script" in cfg
        assert f"virtual_router_id {router_id('job')}" in cfg
    assert 1 <= router_id("job") <= 255 and router_id("job") == router_id("job")
    assert "virtual_router_id 42" in keepalived_config(plan, "c1", "eth1", 42)


def test_containers_least_privilege():
    plan = plan_of()
    keepalived, haproxy = vip_containers(plan, "c1", "pymotor-vip:1", "/etc/pymotor/vip")
    assert keepalived["cap_drop"] == haproxy["cap_drop"] == ["ALL"]
    assert keepalived["cap_add"] == ["NET_ADMIN", "NET_RAW", "SETGID"] and haproxy["cap_add"] == []
    for cont in (keepalived, haproxy):
        assert cont["read_only"] and cont["security_opt"] == ["no-new-privileges:true"]
        assert "privileged" not in cont
        assert all(v.endswith(":ro") for v in cont["volumes"])
    assert vip_containers(plan, "e1", "pymotor-vip:1", "/etc/pymotor/vip") == []


def test_host_work_files_containers_and_their_hashes():
    plan = plan_of()
    work = vip_host_work(plan, "c1", "eth0", "pymotor-vip:1", "/etc/pymotor/vip/job")
    assert work["job_id"] == "job-vip" != plan["job_id"]  # not the job's label: the deploy's reconcile would remove them
    assert sorted(work["files"]) == ["haproxy.cfg", "keepalived.conf"]
    assert "interface eth0" in work["files"]["keepalived.conf"]
    keepalived, haproxy = work["containers"]
    for cont in (keepalived, haproxy):
        assert cont["labels"]["io.pymotor.job"] == "job-vip"
        assert re.fullmatch(r"[0-9a-f]{64}", cont["labels"]["io.pymotor.config-hash"])
    again = vip_host_work(plan, "c1", "eth0", "pymotor-vip:1", "/etc/pymotor/vip/job")
    assert again == work  # the same plan: the same hashes (a second deploy changes nothing)
    other_nic = vip_host_work(plan, "c1", "eth1", "pymotor-vip:1", "/etc/pymotor/vip/job")
    # a keepalived.conf change recreates keepalived only
    assert other_nic["containers"][0]["labels"] != keepalived["labels"]
    assert other_nic["containers"][1]["labels"] == haproxy["labels"]
    nothing = {"job_id": "job-vip", "files": {}, "containers": []}
    assert vip_host_work(plan, "e1", "eth0", "pymotor-vip:1", "/x") == nothing


def test_the_filter_defaults_to_nothing_without_master_standby():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.pymotor.ascend.plugins.filter.motor_plan import motor_plan_vip

    off = build_plan(_HELPERS.contract_config(), standby_hosts())
    assert motor_plan_vip(off, "c1", "", "img", "/x")["containers"] == []
    with pytest.raises(AnsibleFilterError, match="no interface"):
        motor_plan_vip(plan_of(), "c1", "", "img", "/x")
    assert len(motor_plan_vip(plan_of(), "c1", "eth0", "img", "/x")["containers"]) == 2
