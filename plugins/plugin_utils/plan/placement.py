# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Placement: engine pods on hosts and NPUs, the control plane on control hosts."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    CONTROL_GROUP,
    DEPLOY_KEYS,
    ENGINE_GROUP,
    Problem,
    PD_HETEROGENEOUS_LABEL_KEY,
    PD_HETEROGENEOUS_VALUE_KEYS,
    PD_HETEROGENEOUS_VALUES,
    ROLE_LETTER,
    npu_align,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int


class Placement:
    """Engine pods on hosts and NPUs (first fit, sticky where ``previous`` allows), control plane on control hosts."""

    def heterogeneous_labels(self):
        """{role: (label key, value)} when enable_pd_heterogeneous is JSON true (PyMotor's deployer reads it so),
        with PyMotor's defaults card_type / Ascend950PR / Ascend950DT; else {}."""
        deploy = self.user_config.get("motor_deploy_config")
        if not isinstance(deploy, dict) or deploy.get("enable_pd_heterogeneous") is not True:
            return {}
        key = deploy.get("pd_heterogeneous_label_key") or PD_HETEROGENEOUS_LABEL_KEY
        return {role: (key, deploy.get(PD_HETEROGENEOUS_VALUE_KEYS[role]) or value)
                for role, value in PD_HETEROGENEOUS_VALUES.items()}

    def split_engine_hosts(self):
        """The engine hosts each role may use: all of them, or the hosts labelled for it (motor_host_labels)."""
        labels = self.heterogeneous_labels()
        self.role_hosts = {}
        for role in self.engines:
            if role in labels:
                key, value = labels[role]
                self.role_hosts[role] = [h for h in self.engine_hosts if h.labels.get(key) == value]
            else:
                self.role_hosts[role] = list(self.engine_hosts)

    def label_note(self, role):
        label = self.heterogeneous_labels().get(role)
        return f" labelled {label[0]}={label[1]} (motor_host_labels)" if label else ""

    def place_engines(self):
        self.split_engine_hosts()
        need = {role: spec["count"] * spec["pods"] * spec["npus"] for role, spec in self.engines.items()}
        total_need = sum(need.values())
        available = sum(len(h.npu_ids) for h in self.engine_hosts)
        if not self.engine_hosts:
            self.problems.append(Problem("hosts", f"no {self.hw} host in group {ENGINE_GROUP}",
                                         f"add the NPU servers to {ENGINE_GROUP}, or set "
                                         f"motor_deploy_config.hardware_type to their type" + self._availability()))
            return
        for role, spec in self.engines.items():
            keys = DEPLOY_KEYS[role]
            if spec["pods"] > len(self.role_hosts[role]):
                self.problems.append(Problem(
                    f"motor_deploy_config.{keys[1]}",
                    f"each {role} instance needs {spec['pods']} pods on distinct hosts, "
                    f"but only {len(self.role_hosts[role])} {self.hw} engine hosts{self.label_note(role)} exist",
                    f"add engine hosts or use fewer pods with more NPUs each{self._availability()}"))
        if total_need > available and not self.problems:
            self.problems.append(Problem("motor_deploy_config", self._shortage_message(total_need, available),
                                         f"add engine hosts, list more motor_npu_ids, or lower the counts "
                                         f"{self._count_keys()}{self._availability()}"))
        if self.problems:
            return
        self._keep_previous_placement()
        nxt = {}
        for role, spec in self.engines.items():
            for inst in range(spec["count"]):
                if (role, inst) in self.kept:
                    continue
                if not self._place_instance(role, spec, inst, nxt):
                    keys = DEPLOY_KEYS[role]
                    why = self._shortage_message(total_need, available)
                    ranks = ", no two publishing pods that may get the same DP rank on one host" \
                        if role == self.events_role else ""
                    self.problems.append(Problem(
                        f"motor_deploy_config.{keys[0]}",
                        f"cannot place {role} instance {inst} ({spec['pods']} pods x {spec['npus']} contiguous NPUs on "
                        f"distinct hosts{self.label_note(role)}{ranks}): {why}",
                        f"add engine hosts, free NPUs, or lower the counts {self._count_keys()}"
                        f"{self._availability()}"))
                    return

    def _shortage_message(self, total_need, available):
        parts = ", ".join(f"{role} {s['count']} x {s['pods']} pods x {s['npus']}" for role, s in self.engines.items())
        return (f"{self.hw} engine hosts need {total_need} NPUs ({parts}), available {available} NPUs "
                f"on {len(self.engine_hosts)} hosts")

    def _count_keys(self):
        """The motor_deploy_config keys a shortage is fixed with: the instance counts and NPUs per pod of the roles."""
        keys = [DEPLOY_KEYS[role][i] for i in (0, 2) for role in self.engines]
        return "(motor_deploy_config." + ", ".join(keys) + ")"

    def _availability(self):
        by_hw = {}
        for host in self.hosts:
            if host.engine:
                npus, count = by_hw.get(host.hw, (0, 0))
                by_hw[host.hw] = (npus + len(host.npu_ids), count + 1)
        if not by_hw:
            return f"; no host is in {ENGINE_GROUP}"
        return "; in " + ENGINE_GROUP + ": " + ", ".join(
            f"{hw}: {npus} NPUs on {count} hosts" for hw, (npus, count) in sorted(by_hw.items()))

    def _place_instance(self, role, spec, inst, nxt):
        count = spec["npus"]
        align = npu_align(self.hw, count)
        role_hosts = self.role_hosts[role]
        n_hosts = len(role_hosts)
        skip = nxt.setdefault((count, role), list(range(n_hosts + 1)))

        def find(i):
            root = i
            while skip[root] != root:
                root = skip[root]
            while skip[i] != root:
                skip[i], i = root, skip[i]
            return root

        publishing = role == self.events_role
        chosen = []
        taken = set()
        resume = 0  # hosts before it are dead for this size or taken by this instance ...
        conflict_min = None  # ... except those skipped for a DP-rank clash, which a later pod may use
        job_name = spec["job_names"][inst]
        pool = self._rank_pool(spec)  # the DP ranks any pod of the instance may get (registration order)
        while len(chosen) < spec["pods"]:
            pod = len(chosen)
            ranks = self._ranks(spec, pod)
            idx = find(resume if conflict_min is None else min(resume, conflict_min))
            found = None
            while idx < n_hosts:
                host = role_hosts[idx]
                start = host.find_block(count, align)
                if start is None:
                    skip[idx] = idx + 1  # never fits this size again: NPUs are only ever taken
                elif idx in taken:
                    pass
                elif publishing and host.shares_rank(pool):
                    conflict_min = idx if conflict_min is None else min(conflict_min, idx)
                else:
                    found = (host, start)
                    break
                idx = find(idx + 1)
            if found is None:
                return False
            host, start = found
            taken.add(idx)
            resume = idx + 1
            npus = list(range(start, start + count))
            for npu in npus:
                host.free[npu] = False
            if publishing:
                host.event_ranks.append(pool)
            chosen.append(found)
            self._add_pod(role, inst, pod, host, npus, ranks, job_name, pool)
        return True

    def _pod_name(self, role, inst, pod):
        return f"{self.job_id}-{ROLE_LETTER[role]}{inst}-{pod}"

    def _add_pod(self, role, inst, pod, host, npus, ranks, job_name, pool):
        self.pods.append({
            "role": role, "instance": inst, "pod": pod, "host": host, "npu_ids": npus,
            "dp_ranks": ranks, "rank_pool": pool,
            "job_name": job_name, "name": self._pod_name(role, inst, pod),
        })

    def _previous_entry(self, name, host=None):
        """The previous entry of container ``name`` (a dict), only when it was on ``host`` if given."""
        entry = self.previous.get(name)
        if not isinstance(entry, dict):
            return None
        if host is not None and entry.get("host") != host.name:
            return None
        return entry

    def _previous_slot(self, name, count, align, engine_hosts):
        """(host, npu_ids) where ``previous`` puts pod ``name`` when that is still a valid block, else None."""
        entry = self._previous_entry(name)
        if entry is None or not isinstance(entry.get("host"), str):
            return None
        host = engine_hosts.get(entry["host"])
        raw = entry.get("npu_ids")
        if host is None or not isinstance(raw, list) or len(raw) != count:
            return None
        npus = [as_int(n) for n in raw]
        if None in npus:
            return None
        npus.sort()
        if npus != list(range(npus[0], npus[0] + count)) or npus[0] % align:
            return None
        if not all(host.free.get(n) for n in npus):
            return None
        return host, npus

    def _keep_previous_placement(self):
        """Reserve, before any first fit, every instance whose pods can all stay where ``previous`` puts them."""
        if not self.previous:
            return
        for role, spec in self.engines.items():
            engine_hosts = {h.name: h for h in self.role_hosts[role]}
            count = spec["npus"]
            align = npu_align(self.hw, count)
            publishing = role == self.events_role
            pool = self._rank_pool(spec)
            for inst in range(spec["count"]):
                slots = []
                for pod in range(spec["pods"]):
                    slot = self._previous_slot(self._pod_name(role, inst, pod), count, align, engine_hosts)
                    if slot is None or any(slot[0] is s[0] for s in slots):
                        break
                    if publishing and slot[0].shares_rank(pool):
                        break
                    slots.append(slot)
                if len(slots) != spec["pods"]:
                    continue
                self.kept.add((role, inst))
                for pod, (host, npus) in enumerate(slots):
                    ranks = self._ranks(spec, pod)
                    for npu in npus:
                        host.free[npu] = False
                    if publishing:
                        host.event_ranks.append(pool)
                    self._add_pod(role, inst, pod, host, npus, ranks, spec["job_names"][inst], pool)

    @staticmethod
    def _ranks(spec, pod):
        """The DP ranks of pod ``pod`` when the pods register in index order (the endpoints' labels)."""
        return list(range(pod * spec["dpl"], (pod + 1) * spec["dpl"]))

    @staticmethod
    def _rank_pool(spec):
        """Every DP rank a pod of the instance may get. The real controller gives a pod the next ``dpl`` ranks and
        the master role in the order the pods register (upstream motor/controller/core/instance_assembler.py
        ``id_offset = get_endpoints_num()``), not in pod-index order: KV-event ports (base + rank on the pod's host),
        the one-publisher-per-rank-per-host rule and the conductor's expected endpoints use this pool.

        A ``range``, made once per instance and shared by its pods: checks and reservations work on its bounds
        (``Host.shares_rank``, ``event_ports.py``), only the plan's output lists its ranks."""
        return range(spec["pods"] * spec["dpl"])

    def place_control(self):
        hosts = self.control_hosts
        if not hosts:
            if not self.engine_hosts:
                return
            hosts = [self.engine_hosts[0]]
            self.warnings.append(str(Problem("hosts", f"no host in {CONTROL_GROUP}",
                                             f"control-plane containers go to the first engine host {hosts[0].name}")))
        n = len(hosts)
        self.control = {"controller": hosts[0], "coordinator": hosts[0]}
        if self.conductor_on:
            self.control["kv_conductor"] = hosts[1 % n]
        if self.pool_on:
            self.control["kv_pool"] = hosts[2 % n]
