# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The virtual IP that follows the master (docs/ha.md, kolla-ansible's model): the keepalived and HAProxy
configuration and containers of each replica host of a master/standby plan (``plan["standby"]``, plan/standby.py).

keepalived holds ``motor_vip`` on the host whose HAProxy answers (unicast VRRP between the replica hosts: no
multicast on the control network). HAProxy listens on the VIP with the replicas' own ports and sends to the replica
whose upstream ``/readiness`` answers 200: the controller's standby answers 503 "Not master"
(controller/api_server/controller_api.py:322-342), the coordinator's too (coordinator/api_server/
management_server.py:208-235, 51-55). TCP mode: the frontends pass TLS through unchanged.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import zlib

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import url_host

# HAProxy marks a replica down after 2 failed checks 1 s apart and up after 2 good ones (docs/ha.md: failover ≈ etcd
# TTL 10 s + a standby round ≤ 5 s + 2 s)
CHECK = "check inter 1s fall 2 rise 2"
# HAProxy's own liveness for keepalived, on loopback only
MONITOR_PORT = 61080
# HAProxy's Prometheus exporter (Debian's haproxy is built with USE_PROMEX), on the host's own address only
METRICS_PORT = 61081
KEEPALIVED_CONF = "/etc/keepalived/keepalived.conf"
HAPROXY_CFG = "/etc/haproxy/haproxy.cfg"
# the io.pymotor.job label of a job's keepalived and HAProxy: not the job's own, whose containers the deploy's
# reconcile owns (a container of the job's label that is not in the plan is removed as a stray)
VIP_JOB_SUFFIX = "-vip"
# HAProxy's runtime API (admin: a pair move drains a leaving replica, pair_roll.handover) in the container's own
# /dev/shm, mode 600: reachable only through `docker exec`, nothing listens on a port for it
ADMIN_SOCKET = "/dev/shm/haproxy-admin.sock"
# the coordinator's inference frontend: checked for "ready": true, not the status alone - a master without its
# instances yet answers 200 with "ready": false (management_server.py:208-235) and would answer chat with 503
INFER_FRONTEND = "coordinator_infer"
INFER_READY = r'"\"ready\": ?true"'


def vip_job_id(job_id: str) -> str:
    return str(job_id) + VIP_JOB_SUFFIX


def haproxy_name(job_id: str) -> str:
    return f"{job_id}-haproxy"


def router_id(job_id: str) -> int:
    """The VRRP virtual router id of a job (1-255), stable: jobs on one network take different ids (mostly: give
    ``motor_vip_router_id`` to be sure)."""
    return zlib.crc32(str(job_id).encode()) % 255 + 1


def frontends(plan: dict) -> list[dict]:
    """One HAProxy frontend per port of a replicated role: {name, port, check_port, track, servers: [(container,
    ip)]}. The coordinator's ports are checked on its management port, where ``/readiness`` is. ``track`` names the
    frontend whose check a frontend's servers follow (HAProxy ``track``), None when they are checked themselves: each
    replica is checked once per answer that counts (the controller's API; the coordinator's inference, which wants
    "ready": true, and its management port), not once per port, so HAProxy does not ask the control plane's
    ``/readiness`` several times a second for the same answer."""
    standby = plan.get("standby") or {}
    out = []
    for role in standby.get("roles") or []:
        servers = [(r["container"], r["ip"]) for r in standby["replicas"][role]]
        if role == "controller":
            api = plan["controller"]["api_port"]
            ports = [("controller_api", api), ("controller_obs", plan["controller"]["obs_port"])]
            # checked: the frontends whose servers have their own check; the others track ``tracked``
            check, checked, tracked = api, {"controller_api"}, "controller_api"
        else:
            coord = plan["coordinator"]
            check, checked, tracked = coord["mgmt_port"], {INFER_FRONTEND, "coordinator_mgmt"}, "coordinator_mgmt"
            ports = [(INFER_FRONTEND, coord["infer_port"]), ("coordinator_mgmt", check),
                     ("coordinator_obs", coord["obs_port"])]
            replica = next(c for c in plan["containers"] if c["name"] == servers[0][0])
            base = coord.get("metaserver_base_port") or 0
            # the workers' metaserver ports (engines reach them on COORDINATOR_SERVICE)
            ports += [(f"coordinator_metaserver_{p - base}", p) for p in replica["ports"]
                      if base and p >= base and p not in (coord["infer_port"], check, coord["obs_port"])]
        out += [{"name": name, "port": port, "check_port": check, "servers": servers,
                 "track": None if name in checked else tracked} for name, port in ports if port]
    return out


def haproxy_config(plan: dict, monitor_port: int = MONITOR_PORT, host: str | None = None,
                   metrics_port: int = METRICS_PORT) -> str:
    """haproxy.cfg of a replica host: the frontends (the same on each) bind the VIP with ``transparent``; with
    ``host``, HAProxy's Prometheus exporter on that host's own address (``/metrics``; nothing else answers there)."""
    vip = url_host(plan["standby"]["vip"])
    lines = [
        "# Rendered by pymotor.ascend (plan/vip.py); do not edit on the host.",
        "global",
        "    log stdout format raw local0 info",
        # each connection takes two descriptors: 8000 fits Docker's usual nofile limit without raising it
        "    maxconn 8000",
        f"    stats socket {ADMIN_SOCKET} mode 600 level admin",
        "defaults",
        "    mode tcp",
        "    log global",
        "    option tcplog",
        "    timeout connect 3s",
        # long inference streams: the client and the replica decide when a request ends
        "    timeout client 1h",
        "    timeout server 1h",
        "    timeout check 2s",
        "frontend pymotor_monitor",
        "    mode http",
        f"    bind 127.0.0.1:{int(monitor_port)}",
        "    monitor-uri /healthz",
    ]
    if host is not None:
        lines += [
            "frontend pymotor_metrics",
            "    mode http",
            f"    bind {url_host(plan['hosts'][host]['ip'])}:{int(metrics_port)}",
            "    http-request use-service prometheus-exporter if { path /metrics }",
            "    http-request deny",
        ]
    for front in frontends(plan):
        # transparent: IP_FREEBIND, the VIP bound on the host that does not hold it (no ip_nonlocal_bind sysctl)
        lines += [f"listen {front['name']}", f"    bind {vip}:{front['port']} transparent"]
        if front["track"]:
            lines += [f"    server {name} {url_host(ip)}:{front['port']} track {front['track']}/{name}"
                      for name, ip in front["servers"]]
            continue
        lines += [
            "    option httpchk GET /readiness",
            f"    http-check expect rstring {INFER_READY}" if front["name"] == INFER_FRONTEND else
            "    http-check expect status 200",
        ]
        lines += [f"    server {name} {url_host(ip)}:{front['port']} {CHECK} port {front['check_port']}"
                  for name, ip in front["servers"]]
    return "\n".join(lines) + "\n"


def vip_hosts(plan: dict) -> list[str]:
    """The hosts that run keepalived and HAProxy: every host of a replica, in the plan's order."""
    hosts = []
    for role in (plan.get("standby") or {}).get("roles") or []:
        for replica in plan["standby"]["replicas"][role]:
            if replica["host"] not in hosts:
                hosts.append(replica["host"])
    return hosts


def keepalived_config(plan: dict, host: str, interface: str, virtual_router_id: int | None = None,
                      monitor_port: int = MONITOR_PORT) -> str:
    """keepalived.conf of one replica host: BACKUP everywhere with priorities in host order and no preemption (a
    host that comes back does not take the VIP back: one move per failure), unicast to the other replica hosts,
    the VIP held only while the local HAProxy answers."""
    hosts = vip_hosts(plan)
    ips = {name: plan["hosts"][name]["ip"] for name in hosts}
    vip = ipaddress.ip_address(plan["standby"]["vip"])
    rid = int(virtual_router_id or router_id(plan["job_id"]))
    peers = [ips[name] for name in hosts if name != host]
    return "\n".join([
        "# Rendered by pymotor.ascend (plan/vip.py); do not edit on the host.",
        "global_defs {",
        f"    router_id {host}",
        # the check runs as root (the container has no capability to change uid), /bin/bash is root's
        "    enable_script_security",
        "    script_user root",
        "}",
        "vrrp_script pymotor_haproxy {",
        f"    script \"/bin/bash -c '</dev/tcp/127.0.0.1/{int(monitor_port)}'\"",
        "    interval 1",
        "    timeout 2",
        "    fall 2",
        "    rise 2",
        "}",
        f"vrrp_instance pymotor_{plan['job_id'].replace('-', '_')} {{",
        "    state BACKUP",
        "    nopreempt",
        f"    interface {interface}",
        f"    virtual_router_id {rid}",
        f"    priority {150 - 10 * hosts.index(host)}",
        "    advert_int 1",
        f"    unicast_src_ip {ips[host]}",
        "    unicast_peer {",
        *[f"        {peer}" for peer in peers],
        "    }",
        "    virtual_ipaddress {",
        f"        {vip}/{vip.max_prefixlen} dev {interface}",
        "    }",
        "    track_script {",
        "        pymotor_haproxy",
        "    }",
        "}",
    ]) + "\n"


def vip_containers(plan: dict, host: str, image: str, config_dir: str) -> list[dict]:
    """The keepalived and HAProxy containers of one replica host, one dict each (the motor_containers spec; the
    role adds the config-hash label): host network (the VIP is the host's address, VRRP runs on its NIC), every
    capability dropped, keepalived given back only NET_ADMIN (add and remove the VIP), NET_RAW (the VRRP socket)
    and SETGID (see below), HAProxy none (ports above 1024; ``transparent`` binds the VIP with IP_FREEBIND, which
    needs neither a capability nor the host's ip_nonlocal_bind)."""
    if host not in vip_hosts(plan):
        return []
    job = plan["job_id"]
    common = {"image": image, "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "read_only": True,
              "restart_policy": "unless-stopped", "labels": {"io.pymotor.job": vip_job_id(job)}}
    return [
        # SETGID: keepalived drops supplementary groups before each check script (it fails every check without);
        # pid files in the container's own /dev/shm: a kept file makes a restarted keepalived think it runs already
        dict(common, name=f"{job}-keepalived", cap_add=["NET_ADMIN", "NET_RAW", "SETGID"],
             command=["keepalived", "--dont-fork", "--log-console", "--vrrp", "--use-file", KEEPALIVED_CONF,
                      "--pid", "/dev/shm/keepalived.pid", "--vrrp_pid", "/dev/shm/vrrp.pid"],
             volumes=[f"{config_dir}/keepalived.conf:{KEEPALIVED_CONF}:ro"]),
        dict(common, name=haproxy_name(job), cap_add=[],
             command=["haproxy", "-W", "-db", "-f", HAPROXY_CFG],
             volumes=[f"{config_dir}/haproxy.cfg:{HAPROXY_CFG}:ro"]),
    ]


def vip_host_work(plan: dict, host: str, interface: str, image: str, config_dir: str,
                  virtual_router_id: int | None = None) -> dict:
    """What the VIP role does on one host: ``files`` ({name: text} under ``config_dir``) and the ``containers`` of
    ``vip_containers``, each labelled with the hash of its own dict and the file it mounts (motor_containers
    recreates a container only when that hash changed), and the ``job_id`` of their label. Empty for a host that
    runs no replica."""
    if host not in vip_hosts(plan):
        return {"job_id": vip_job_id(plan["job_id"]), "files": {}, "containers": []}
    files = {"keepalived.conf": keepalived_config(plan, host, interface, virtual_router_id),
             "haproxy.cfg": haproxy_config(plan, host=host)}
    containers = []
    for cont, own in zip(vip_containers(plan, host, image, config_dir), ("keepalived.conf", "haproxy.cfg")):
        digest = hashlib.sha256((json.dumps(cont, sort_keys=True) + files[own]).encode()).hexdigest()
        containers.append(dict(cont, labels=dict(cont["labels"], **{"io.pymotor.config-hash": digest})))
    return {"job_id": vip_job_id(plan["job_id"]), "files": files, "containers": containers}
