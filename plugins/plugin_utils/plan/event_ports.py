# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""KV-event ports of the publishing role: one base (and replay base) for every pod, a rank pool per pod.

Upstream gives a pod its DP ranks in registration order (motor/controller/core/instance_assembler.py
``id_offset = get_endpoints_num()``) and the engine binds ``base + dp_rank``, so a publishing pod may bind any port of
``base + its instance's rank pool`` on its host (docs/design.md, "Fleet scale"). The pool is the same ``range`` for
every pod of an instance and the ranks of a host merge into a few spans: every check and reservation here works on
those spans, so its cost grows with the pods, not with pods x instance size.
"""

from __future__ import annotations

import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import PORT_MAX, PORT_MIN, ROLE_LETTER
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import as_int

OVERFLOW = -1  # _rank_clash: a port passes PORT_MAX before any port clashes


def overlaps(lo, hi, spans):
    """True when lo..hi meets one of the inclusive ``spans``."""
    return any(a <= hi and lo <= b for a, b in spans)


class EventPorts:
    """The shared KV-event (and replay) base of the publishing role, free for every rank of every host."""

    def _assign_event_base(self):
        """One event (and replay) base port for the publishing role, free for all its ranks on all hosts."""
        if self.events_role is None:
            return
        spec = self.engines[self.events_role]
        prefix, base = spec["events"]["endpoint"]
        kv_events = self.config.get("kv_events") or {}
        base = as_int(kv_events.get("endpoint_port")) or base
        ranks_by_host = [(h, h.rank_spans()) for h in self.hosts if h.event_ranks]
        kept = self._previous_event_base("kv_events", ranks_by_host, base, None)
        base = kept if kept is not None else self._free_base(ranks_by_host, base, None)
        self.shared_ports["kv_events"] = base
        self.shared_ports["kv_events_prefix"] = prefix
        replay = spec["events"]["replay"]
        if replay is not None:
            rbase = as_int(kv_events.get("replay_port")) or replay[1]
            kept = self._previous_event_base("kv_events_replay", ranks_by_host, rbase, base)
            rbase = kept if kept is not None else self._free_base(ranks_by_host, rbase, base)
            self.shared_ports["kv_events_replay"] = rbase
            self.shared_ports["kv_events_replay_prefix"] = replay[0]
        for pod in self.pods:
            if pod["role"] != self.events_role:
                continue
            pool = pod["rank_pool"]
            pod["host"].take_span(base + pool.start, len(pool), pod["name"])
            if replay is not None:
                pod["host"].take_span(self.shared_ports["kv_events_replay"] + pool.start, len(pool), pod["name"])

    def _previous_event_base(self, key, ranks_by_host, preferred, other):
        """The base most previous publishing pods had (ties: the lowest) when still free for every rank, else None."""
        if not self.previous:
            return None
        pattern = re.compile(rf"{re.escape(self.job_id)}-{ROLE_LETTER[self.events_role]}\d+-\d+")
        votes = {}
        for name, entry in self.previous.items():
            port_map = entry.get("port_map") if isinstance(entry, dict) else None
            if isinstance(name, str) and pattern.fullmatch(name) and isinstance(port_map, dict):
                value = as_int(port_map.get(key))
                if value is not None:
                    votes[value] = votes.get(value, 0) + 1
        if not votes:
            return None
        base = min(votes, key=lambda v: (-votes[v], v))
        if base < preferred:
            return None
        for host, spans in ranks_by_host:
            for lo, hi in spans:
                first, last = base + lo, base + hi
                if first < PORT_MIN or last > PORT_MAX or host.busy(first, last):
                    return None
                if other is not None and overlaps(first - other, last - other, spans):
                    return None
        return base

    def _free_base(self, ranks_by_host, base, other):
        """The lowest base from ``base`` up where every rank's port is free on its host (and, for the replay base,
        not one of the event ports ``other + rank`` of the same host)."""
        base = max(base, 1)
        while True:
            for host, spans in ranks_by_host:
                nxt = self._rank_clash(host, spans, base, other)
                if nxt == OVERFLOW:
                    self._fail_port(host, "KV event ports")
                    return base
                if nxt is not None:
                    base = nxt
                    break
            else:
                return base

    @staticmethod
    def _rank_clash(host, spans, base, other):
        """None when every port ``base + rank`` of ``host`` is free; else the next base worth trying, or OVERFLOW
        when, going up the ports, one passes PORT_MAX before any is taken."""
        for lo, hi in spans:
            first, last = base + lo, base + hi
            if first < PORT_MIN:
                return max(base + 1, PORT_MIN - lo)
            top = min(last, PORT_MAX)
            if first <= top and (host.busy(first, top)
                                 or (other is not None and overlaps(first - other, top - other, spans))):
                return base + 1
            if last > PORT_MAX:
                return OVERFLOW
        return None
