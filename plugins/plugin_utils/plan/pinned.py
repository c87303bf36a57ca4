# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Nothing the user chose moves (issue 36): a port set in user_config is taken as written, or the plan fails naming
both owners and the key to change; only defaults move, and the warning names the key that pins them.

One exception, by construction: the engine ports of an engine section (data_parallel_rpc_port, kv_port,
node_manager_port, base_port) are per pod in PyMotor (every Kubernetes pod has its own address, and PyMotor's own
examples give prefill and decode the same data_parallel_rpc_port). Engine pods that share a host cannot all bind the
value, so the first takes it and the next ones take the next free ports; any other owner of the value (a
reservation, a control-plane container) is an error.
"""

from __future__ import annotations

import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import PORT_MAX, PORT_MIN, Problem, ROLE_LETTER

# The user_config key that pins each control-plane port the plan may move (plan labels of ports.py).
PIN_KEYS = {
    "coordinator_infer": "motor_coordinator_config.api_config.coordinator_api_infer_port",
    "coordinator_mgmt": "motor_coordinator_config.api_config.coordinator_api_mgmt_port",
    "coordinator_obs": "motor_coordinator_config.api_config.coordinator_obs_port",
    "coordinator_metaserver": "motor_coordinator_config.inference_workers_config.worker_metaserver_base_port",
    "controller_api": "motor_controller_config.api_config.controller_api_port",
    "controller_obs": "motor_controller_config.api_config.observability_api_port",
    "kv_pool": "kv_cache_pool_config.port",
    "kv_conductor": "kv_conductor_config.http_server_port",
}


def engine_family(job_id):
    """The names of the job's engine pods (they may stack on a pinned per-pod port)."""
    letters = "".join(sorted(ROLE_LETTER.values()))
    return re.compile(r"%s-[%s]\d+-\d+" % (re.escape(str(job_id)), letters))


def occupants(host, start, length):
    """(port, owner) of each port of start..start+length-1 already used on ``host``; owner None = reserved."""
    out = []
    for port in range(start, start + length):
        if host.is_reserved(port):
            out.append((port, None))
        elif host.owner(port) is not None:
            out.append((port, host.owner(port)))
    return out


def in_range(start, length):
    return start >= PORT_MIN and start + length - 1 <= PORT_MAX


def collision(source, what, start, length, host, taken, origin):
    """The problem of a pinned port ``source`` whose range is taken on ``host`` (``taken``: its occupants)."""
    port, owner = taken[0]
    span = str(start) if length == 1 else "%d-%d" % (start, start + length - 1)
    if owner is None:
        other = "hosts.%s.motor_reserved_ports (reserves %d)" % (host.name, port)
        fix = "change %s, or free %d in hosts.%s.motor_reserved_ports" % (source, port, host.name)
    else:
        key = origin.get((host.name, port))
        other = "%s, which binds %d%s" % (owner, port, " (%s)" % key if key else "")
        fix = "change %s%s" % (source, " or %s" % key if key and key != source else "")
    return Problem(source, "%s for %s on host %s collides with %s: a port you set is never moved"
                   % (span, what, host.name, other), fix)


def moved_default(label, host, preferred, got):
    """The warning of a default port the plan moved, naming the key that pins it."""
    key = PIN_KEYS.get(label, "plan.ports.%s" % label)
    return str(Problem(key, "default %d is taken or reserved on host %s, the plan uses %d" % (preferred, host.name, got),
                       "clients must use the port shown in the plan; set %s to a free port to pin it" % key))
