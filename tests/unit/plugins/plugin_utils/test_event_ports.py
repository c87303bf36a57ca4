"""KV-event rank pools as ranges (issue 44): a publishing pod's pool is reserved and checked as one span of ports,
and the shared base found from the spans is the one the per-rank rule finds (every rank of every host, one by one)."""

from __future__ import annotations

import random

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import PORT_MAX, PORT_MIN
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.event_ports import EventPorts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.hosts import Host, merge_ranges


class Bases(EventPorts):
    """The event-base search alone; a failure records the host it names."""

    def __init__(self):
        self.failed = None

    def _fail_port(self, host, what, *_args):
        self.failed = (host.name, what)


def per_rank_base(ranks_by_host, base, other):
    """The rule by definition: bump the base while a rank's port is out of range, reserved, taken, or (replay) the
    event port of a rank of the same host; (host, base) when a port passes PORT_MAX first."""
    base = max(base, 1)
    while True:
        for host, ranks in ranks_by_host:
            clash = None
            for rank in ranks:
                port = base + rank
                if port > PORT_MAX:
                    return (host.name, base)
                if port < PORT_MIN:
                    clash = max(base + 1, PORT_MIN - rank)
                elif host.is_reserved(port) or host.owner(port) is not None or (
                        other is not None and port - other in ranks):
                    clash = base + 1
                if clash is not None:
                    break
            if clash is not None:
                base = clash
                break
        else:
            return base


def random_host(rng, index, near):
    host = Host(f"h{index}", index)
    reserved = [(lo, lo + rng.randrange(4)) for lo in (near + rng.randrange(200) for _n in range(rng.randrange(3)))]
    host.reserved = merge_ranges(reserved)
    host.reserved_lo = [lo for lo, _hi in host.reserved]
    for _n in range(rng.randrange(4)):
        host.take(near + rng.randrange(200), 1 + rng.randrange(3), "other")
    if rng.random() < 0.3:
        start = near + rng.randrange(200)
        host.take_span(start, 1 + rng.randrange(20), "earlier-pool")
    for _n in range(1 + rng.randrange(2)):  # one or two publishing pods: pools from 0 or, made up, from elsewhere
        lo = 0 if rng.random() < 0.7 else rng.randrange(30)
        host.event_ranks.append(range(lo, lo + 1 + rng.randrange(24)))
    return host


@pytest.mark.parametrize("seed", range(40))
def test_spans_find_the_base_the_per_rank_rule_finds(seed):
    rng = random.Random(seed)
    near = rng.choice([PORT_MIN - 40, 5000, PORT_MAX - 150])
    hosts = [random_host(rng, i, near) for i in range(1 + rng.randrange(5))]
    start = near + rng.randrange(60) - 30
    other = None if rng.random() < 0.5 else start + rng.randrange(20)
    spans = [(h, h.rank_spans()) for h in hosts]
    ranks = [(h, sorted({r for pool in h.event_ranks for r in pool})) for h in hosts]
    bases = Bases()
    found = bases._free_base(spans, start, other)
    expected = per_rank_base(ranks, start, other)
    if isinstance(expected, tuple):
        assert bases.failed == (expected[0], "KV event ports") and found == expected[1]
    else:
        assert bases.failed is None and found == expected


def test_a_pool_span_blocks_its_ports_and_names_its_pod():
    host = Host("h0", 0)
    host.take_span(5557, 256, "job-p0-3")  # base + the 256 ranks any pod of a 32-pod instance may get
    assert host.busy(5600, 5600) and host.busy(5500, 5557) and not host.busy(5813, 5900)
    assert host.owner(5812) == "job-p0-3" and host.owner(5813) is None
    assert host.blocker(5700, 2) == 5813
    assert host.alloc(5556, 2, "job-d0-0") == 5813  # 5556-5557 meets the pool: the first free pair above it
    assert host.alloc(5555, 2, "job-d1-0") == 5555


def test_pools_of_a_host_merge_and_clash_by_range():
    host = Host("h0", 0)
    host.event_ranks.extend([range(0, 16), range(16, 24), range(40, 48)])
    assert host.rank_spans() == [(0, 23), (40, 47)]
    assert host.shares_rank(range(20, 30)) and host.shares_rank(range(0, 1))
    assert not host.shares_rank(range(24, 40)) and not host.shares_rank(range(48, 60))
