# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Ports: every TCP port a container binds, unique per host, outside the reservations, in range."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONDUCTOR_PORT,
    CONTROLLER_API_PORT,
    CONTROLLER_OBS_PORT,
    COORDINATOR_INFER_PORT,
    COORDINATOR_MGMT_PORT,
    COORDINATOR_OBS_PORT,
    DP_RPC_PORT,
    ENGINE_BASE_PORT,
    KV_POOL_METRICS_PORT,
    KV_POOL_PORT,
    KV_PORT_FLOOR,
    METASERVER_BASE_PORT,
    NODE_MANAGER_PORT,
    NUM_WORKERS,
    PORT_MAX,
    PORT_MIN,
    Problem,
    WATCHER_METRICS_PORT,
    WATCHER_ROLE,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int, dig, dotted, obj, user_set
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.pinned import (
    collision,
    engine_family,
    in_range,
    moved_default,
    occupants,
)


def room_below(hosts, preferred, length):
    """True when ``length`` ports starting below ``preferred`` are free on every host."""
    start = PORT_MIN
    while start < preferred and start + length - 1 <= PORT_MAX:
        blocked = [nxt for nxt in (h.blocker(start, length) for h in hosts) if nxt is not None]
        if not blocked:
            return True
        start = max(blocked)
    return False


class PortAssignment:
    """Every TCP port of every container: unique per host, outside the reservations, previous ports kept."""

    def _previous_port(self, name, key, host):
        """port_map[key] of the previous entry of ``name`` when it was on ``host``, else None."""
        entry = self._previous_entry(name, host)
        port_map = entry.get("port_map") if entry is not None else None
        return as_int(port_map.get(key)) if isinstance(port_map, dict) else None

    def _fail_port(self, host, what, source=None, preferred=None, hosts=None, length=1):
        """No free range from ``preferred`` up: blame the user_config value when a lower one would fit, else the
        host's reservations."""
        if source is not None and room_below(hosts or [host], preferred, length):
            self.problems.append(Problem(source, f"no free TCP port for {what} from {preferred} up to {PORT_MAX} "
                                                 f"on host {host.name}: the ports above are taken or reserved",
                                         "use a lower port: the plan searches only upwards from it"))
            return
        self.problems.append(Problem(f"hosts.{host.name}.motor_reserved_ports",
                                     f"no free TCP port left for {what} in {PORT_MIN}..{PORT_MAX}",
                                     "reserve fewer ports or spread the containers over more hosts"))

    def _alloc_pinned(self, hosts, preferred, length, owners, what, source, family):
        """A port the user set: taken as written on every host, or a collision problem naming both owners (pinned.py).

        Returns the port, or None when only pods of the same role (``family``) hold it: the caller searches upwards.
        """
        taken = [(host, occupants(host, preferred, length)) for host in hosts]
        foreign = [(host, [o for o in occ if o[1] is None or family is None or not family.fullmatch(o[1])])
                   for host, occ in taken]
        foreign = [(host, occ) for host, occ in foreign if occ]
        if foreign:
            host, occ = foreign[0]
            self.problems.append(collision(source, what, preferred, length, host, occ, self._port_origin))
            return preferred
        if any(occ for _host, occ in taken):
            return None
        for host in hosts:
            host.take(preferred, length, owners[host.name])
            for port in range(preferred, preferred + length):
                self._port_origin[(host.name, port)] = source
        return preferred

    def _alloc(self, host, preferred, length, owner, what, source=None, family=None):
        if source is not None and in_range(preferred, length):
            port = self._alloc_pinned([host], preferred, length, {host.name: owner}, what, source, family)
            if port is not None:
                return port
        port = host.alloc(preferred, length, owner)
        if port is None:
            self._fail_port(host, what, source, preferred, length=length)
            return preferred
        return port

    def _alloc_common(self, hosts, preferred, length, owner, what, source=None, family=None):
        """Lowest port range free on every host in ``hosts``; ``owner`` maps host -> container name."""
        if source is not None and in_range(preferred, length):
            port = self._alloc_pinned(hosts, preferred, length, owner, what, source, family)
            if port is not None:
                return port
        start = max(preferred, PORT_MIN)
        while start + length - 1 <= PORT_MAX:
            moved = False
            for host in hosts:
                nxt = host.blocker(start, length)
                if nxt is not None:
                    start = nxt
                    moved = True
                    break
            if not moved:
                for host in hosts:
                    host.take(start, length, owner[host.name])
                return start
        self._fail_port(hosts[0], what, source, preferred, hosts, length)
        return preferred

    def assign_ports(self):
        ports = self.shared_ports
        self._port_origin = {}  # (host, port) -> the user_config key that pinned it
        pool_host = self.control.get("kv_pool")
        if pool_host is not None:
            metrics = as_int(self.kv_pool.get("metrics_port")) or KV_POOL_METRICS_PORT
            if pool_host.is_reserved(metrics) or pool_host.owner(metrics) is not None:
                self.problems.append(Problem(f"hosts.{pool_host.name}.motor_reserved_ports",
                                             f"mooncake_master (kv_pool) always binds its metrics port {metrics} on this host",
                                             "do not reserve it, or list another host first in motor_control_hosts"))
            else:
                pool_host.take(metrics, 1, self._control_name("kv_pool"))
            ports["kv_pool_metrics"] = metrics
        control_ports = self._control_port_specs()
        if self.previous:
            self._keep_previous_ports(control_ports)
        self._assign_event_base()
        # control plane: the ports the user set first (only defaults move), then the coordinator first so that it
        # keeps PyMotor's 1025/1026/1027 when possible
        for label, host, owner, preferred, length, _key, warn, source in sorted(control_ports,
                                                                                key=lambda spec: spec[7] is None):
            hosts, owners = self.replica_hosts(host, owner)
            if label not in ports:
                what = "worker metaserver" if label == "coordinator_metaserver" else label
                if len(hosts) > 1:
                    ports[label] = self._alloc_common(hosts, preferred, length, owners, what, source)
                else:
                    ports[label] = self._alloc(host, preferred, length, owner, what, source)
            if warn and ports[label] != preferred:
                self.warnings.append(moved_default(label, host, preferred, ports[label]))
        for role in self.engines:  # records the raised-kv_port warnings, in role order
            self._engine_port_prefs(role, warn=True)
        # engines, instance by instance (the instances kept in place first)
        for (role, _inst), pods in self._pods_by_instance().items():
            self._assign_instance_ports(role, pods)

    def _control_port_specs(self):
        """(label, host, container, preferred, length, port_map key, warn when moved, user_config path when the user
        set the port, else None) per control-plane port.

        In allocation order; also records the coordinator's worker count (and a disabled metaserver as 0).
        """
        ports = self.shared_ports
        uc = self.user_config
        specs = []
        coord = self.control["coordinator"]
        cname = self._control_name("coordinator")
        api = obj(dig(uc, "motor_coordinator_config", "api_config"))
        workers = obj(dig(uc, "motor_coordinator_config", "inference_workers_config"))
        for key, default, label, pm_key in (("coordinator_api_infer_port", COORDINATOR_INFER_PORT, "coordinator_infer", "infer"),
                                            ("coordinator_api_mgmt_port", COORDINATOR_MGMT_PORT, "coordinator_mgmt", "mgmt"),
                                            ("coordinator_obs_port", COORDINATOR_OBS_PORT, "coordinator_obs", "obs")):
            specs.append((label, coord, cname, as_int(api.get(key)) or default, 1, pm_key, True,
                          user_set(api, key, f"motor_coordinator_config.api_config.{key}")))
        num_workers = as_int(workers.get("num_workers")) or NUM_WORKERS
        meta_pref = as_int(workers.get("worker_metaserver_base_port"))
        meta_pref = METASERVER_BASE_PORT if meta_pref is None else meta_pref
        if meta_pref > 0:
            specs.append(("coordinator_metaserver", coord, cname, meta_pref, num_workers, "metaserver", False,
                          user_set(workers, "worker_metaserver_base_port",
                                   "motor_coordinator_config.inference_workers_config.worker_metaserver_base_port")))
        else:
            ports["coordinator_metaserver"] = 0
        ports["coordinator_num_workers"] = num_workers
        ctrl = self.control["controller"]
        capi = obj(dig(uc, "motor_controller_config", "api_config"))
        for key, default, label, pm_key in (("controller_api_port", CONTROLLER_API_PORT, "controller_api", "api"),
                                            ("observability_api_port", CONTROLLER_OBS_PORT, "controller_obs", "obs")):
            specs.append((label, ctrl, self._control_name("controller"), as_int(capi.get(key)) or default, 1, pm_key, True,
                          user_set(capi, key, f"motor_controller_config.api_config.{key}")))
        if "kv_pool" in self.control:
            specs.append(("kv_pool", self.control["kv_pool"], self._control_name("kv_pool"),
                          as_int(self.kv_pool.get("port")) or KV_POOL_PORT, 1, "master", True,
                          self._set_unless_default(self.kv_pool.get("port"), KV_POOL_PORT, "kv_cache_pool_config.port")))
        if "kv_conductor" in self.control:
            specs.append(("kv_conductor", self.control["kv_conductor"], self._control_name("kv_conductor"),
                          as_int(self.kv_conductor.get("http_server_port")) or CONDUCTOR_PORT, 1, "http", True,
                          self._set_unless_default(self.kv_conductor.get("http_server_port"), CONDUCTOR_PORT,
                                                   "kv_conductor_config.http_server_port")))
        if self.plans_watcher():
            specs.append(("kv_watcher_metrics", self.control["kv_conductor"], self._control_name(WATCHER_ROLE),
                          WATCHER_METRICS_PORT, 1, "metrics", True, None))
        return specs

    def plans_watcher(self):
        """The job gets a KV watcher: the coordinator registers KV-event ranks with a conductor of the job."""
        return bool(self.affinity and "kv_conductor" in self.control and self.events_role is not None)

    @staticmethod
    def _set_unless_default(value, default, path):
        """``path`` when the value is not the default motor_config fills in (a set default cannot be told apart)."""
        return path if as_int(value) not in (None, default) else None

    def _pods_by_instance(self):
        by_instance = {}
        for pod in self.pods:
            by_instance.setdefault((pod["role"], pod["instance"]), []).append(pod)
        return by_instance

    @staticmethod
    def _keep_port(hosts, port, length, preferred, owners):
        """Take ``port`` .. ``port + length - 1`` on every host when free there and not below ``preferred``.

        Returns the port, or None (nothing taken) when it cannot be kept.
        """
        if port is None or port < preferred or any(h.blocker(port, length) is not None for h in hosts):
            return None
        for host in hosts:
            host.take(port, length, owners[host.name])
        return port

    def _keep_previous_ports(self, control_ports):
        """Before any other port: the previous ports of the containers that stay on their host, where still valid.

        A previous port is kept when it is in range, not reserved, not taken by a container handled before and
        not below the current preferred value (a raised setting wins); otherwise it is allocated as usual.
        """
        ports = self.shared_ports
        for label, host, owner, preferred, length, key, _warn, _source in control_ports:
            hosts, owners = self.replica_hosts(host, owner)  # a replicated role keeps its port on both hosts or moves
            port = self._keep_port(hosts, self._previous_port(owner, key, host), length, preferred, owners)
            if port is not None:
                ports[label] = port
        for (role, inst), pods in self._pods_by_instance().items():
            if (role, inst) not in self.kept:
                continue
            spec = self.engines[role]
            prefs = self._engine_port_prefs(role)
            hosts = [p["host"] for p in pods]
            owners = {p["host"].name: p["name"] for p in pods}
            common = [("dp_rpc", "dp_rpc", prefs["dp_rpc"], 1)]
            if spec["kv"] is not None:
                common.append(("kv_port", "kv", prefs["kv"], spec["npus"]))
            for label, key, preferred, length in common:
                values = {self._previous_port(p["name"], key, p["host"]) for p in pods}
                port = self._keep_port(hosts, values.pop(), length, preferred, owners) if len(values) == 1 else None
                if port is not None:
                    for pod in pods:
                        pod[label] = port
            own_events = prefs["own_events"]
            for pod in pods:
                host, name = pod["host"], pod["name"]
                for label, preferred, length in (("node_manager", prefs["node_manager"], 1),
                                                 ("engine_base", prefs["engine_base"], 2 * spec["dpl"])):
                    port = self._keep_port([host], self._previous_port(name, label, host), length, preferred,
                                           {host.name: name})
                    if port is not None:
                        pod[label] = port
                if own_events is None:
                    continue
                width = len(pod["rank_pool"])  # base + any rank of the instance: registration order decides
                events = [("kv_events", own_events["endpoint"])]
                if own_events["replay"] is not None:
                    events.append(("kv_events_replay", own_events["replay"]))
                for label, (_prefix, preferred) in events:
                    base = self._previous_port(name, label, host)
                    port = self._keep_port([host], base, width, preferred, {host.name: name})
                    if port is not None:
                        pod[label] = port

    def _engine_port_prefs(self, role, warn=False):
        """Preferred ports of an engine role; ``warn`` records the raised-kv_port warning (once per role).

        ``prefs["sources"]`` maps each port to the user_config path that set it (None when not set by the user):
        the port error names that key when no port fits from it upwards.
        """
        spec = self.engines[role]
        section = obj(self.user_config.get(spec["section"]))
        engine_config = obj(section.get("engine_config"))
        nm_cfg = obj(section.get("motor_nodemanger_config"))
        nm_path = f"{spec['section']}.motor_nodemanger_config"
        prefs = {
            "dp_rpc": as_int(engine_config.get("data_parallel_rpc_port")) or DP_RPC_PORT,
            "kv": None,
            "node_manager": as_int(dig(nm_cfg, "api_config", "node_manager_port")) or NODE_MANAGER_PORT[role],
            "engine_base": as_int(dig(nm_cfg, "endpoint_config", "base_port")) or ENGINE_BASE_PORT,
            "own_events": spec["events"] if role != self.events_role else None,
            "sources": {
                "dp_rpc": user_set(engine_config, "data_parallel_rpc_port",
                                   f"{spec['section']}.engine_config.data_parallel_rpc_port"),
                "kv": None,
                "node_manager": user_set(dig(nm_cfg, "api_config"), "node_manager_port",
                                         f"{nm_path}.api_config.node_manager_port"),
                "engine_base": user_set(dig(nm_cfg, "endpoint_config"), "base_port",
                                        f"{nm_path}.endpoint_config.base_port"),
            },
        }
        if spec["kv"] is not None:
            floor = KV_PORT_FLOOR[self.hw]
            pref = as_int(spec["kv"]["value"])
            kv_path = f"{spec['section']}.engine_config.{dotted(spec['kv']['path'])}.kv_port"
            if pref is None or pref < floor:
                if warn and pref is not None and role not in self._kv_warned:
                    self._kv_warned.add(role)
                    self.warnings.append(str(Problem(
                        kv_path,
                        f"{pref} is below {floor}, where the bare-metal plan starts kv_port on {self.hw}; planned from {floor}",
                        f"set kv_port to {floor} or more to silence this")))
                pref = floor
            else:
                prefs["sources"]["kv"] = kv_path
            prefs["kv"] = pref
        return prefs

    def _assign_instance_ports(self, role, pods):
        """The ports of one instance that ``_keep_previous_ports`` did not keep (all of them for a new one)."""
        spec = self.engines[role]
        prefs = self._engine_port_prefs(role)
        sources = prefs["sources"]
        hosts = [p["host"] for p in pods]
        owners = {p["host"].name: p["name"] for p in pods}
        family = engine_family(self.job_id)
        if "dp_rpc" not in pods[0]:
            dp_rpc = self._alloc_common(hosts, prefs["dp_rpc"], 1, owners, "data_parallel_rpc_port", sources["dp_rpc"],
                                        family)
            for pod in pods:
                pod["dp_rpc"] = dp_rpc
        if "kv_port" not in pods[0]:
            kv_port = None
            if spec["kv"] is not None:
                kv_port = self._alloc_common(hosts, prefs["kv"], spec["npus"], owners, "kv_port", sources["kv"], family)
            for pod in pods:
                pod["kv_port"] = kv_port
        own_events = prefs["own_events"]
        for pod in pods:
            host = pod["host"]
            name = pod["name"]
            if "node_manager" not in pod:
                pod["node_manager"] = self._alloc(host, prefs["node_manager"], 1, name, "node_manager_port",
                                                  sources["node_manager"], family)
            if "engine_base" not in pod:
                pod["engine_base"] = self._alloc(host, prefs["engine_base"], 2 * spec["dpl"], name, "engine base_port",
                                                 sources["engine_base"], family)
            width = len(pod["rank_pool"])  # base + any rank of the instance: registration order decides
            if role == self.events_role:
                pod["kv_events"] = self.shared_ports["kv_events"]
                pod["kv_events_replay"] = self.shared_ports.get("kv_events_replay")
            elif own_events is not None:
                if "kv_events" not in pod:
                    pod["kv_events"] = self._alloc(host, own_events["endpoint"][1], width, name, "kv events")
                if own_events["replay"] is None:
                    pod["kv_events_replay"] = None
                elif "kv_events_replay" not in pod:
                    pod["kv_events_replay"] = self._alloc(host, own_events["replay"][1], width, name,
                                                          "kv events replay")
            else:
                pod["kv_events"] = None
                pod["kv_events_replay"] = None
