# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The one table of a job's healing rules (pure data, standard library only).

Every agent runs its rules from here: the controller's healer and every engine pod's (``plugin_utils/heal.py``,
``agent`` ``controller`` / ``pod``), the per-host healer (``module_utils/motor_host_healer.py``, ``host``); the KV
watcher (``roles/motor_service/files/motor_kv_watcher.py``, ``kv_watcher``) is one file of its own and its rule is
listed here for the README and the operators. This file is copied next to each healer in its container's config
directory (the healers import it there), so a change of a rule changes their config hash: they restart once.

A rule: ``name``; ``agent``; ``watches`` (what it reads); ``condition`` (when it acts); ``action``; ``budget``
(``settle``: seconds the condition holds in a row; ``backoff``: seconds between actions, by the number of actions
in the last hour, the last one repeating; ``per_hour``: actions an hour, after which the agent only alarms, or
None); ``report``: True for a rule that only reports (its agent acts on no container); ``readme``: the start of
each row of README's "What heals by itself" table the rule heals (a unit test checks both ways).
"""

from __future__ import annotations

HOUR = 3600

# upstream's coordinator reads every engine's /metrics in a sequential pass with a 2 s timeout
# (engine_server_api_client.py:28) and drops the whole instance from that pass when one endpoint misses it
# (metrics_collector.py:586-603); a pass repeats every reuse_time = 3 s (motor/config/coordinator.py:155)
ENGINE_METRICS_TIMEOUT = 2.0
COLLECTOR_PASS = 3.0
UNROUTED_PASSES = 2
# after a controller start upstream counts instance ids from 1 and only re-registrations raise the counter
# (instance_assembler.py:83,306,317,377-378): a fresh registration in this window may reuse a live id
ID_WINDOW = 60
# how often every engine pod's healer reads npu-smi's health of its NPUs (one npu-smi run, about 0.1 CPU s on the
# simulated hosts; the per-host healer reports what it read; nothing acts on it, so no hurry)
NPU_READ_EVERY = 30

RULES = (
    {"name": "stalled_pod_controller", "agent": "controller",
     "watches": "every engine pod's node manager /node-manager/status and engines",
     "condition": "a pod's start command never came (motor_health.pod_verdict 'stalled') and no pod of its "
                  "instance is unreachable",
     "action": "restart the controller (it forgets the instance; the pod registers anew)",
     "budget": {"settle": 75, "backoff": (80, 160, 320, 600), "per_hour": 3},
     "readme": ("an engine pod's main process dies",)},
    {"name": "coordinator_not_ready", "agent": "controller",
     "watches": "the coordinator's /readiness; the management /status of every prefill/union engine",
     "condition": "the coordinator says ready: false while every engine of a prefill/union instance answers normal",
     "action": "restart the controller (its process ends; Docker's restart policy starts it again)",
     "budget": {"settle": 40, "backoff": (80, 160, 320, 600), "per_hour": 3},
     "readme": ("the coordinator restarted, PD hybrid", "the control host's Docker engine restarted")},
    {"name": "lost_add", "agent": "controller",
     "watches": "the coordinator's /readiness and /metrics?type=dp; every engine's management /status and /metrics",
     "condition": "the coordinator is ready but does not route an instance whose engines all answer normal, over "
                  "%d of its collector's passes, while the healer itself reads every engine's /metrics of that "
                  "instance within %g s" % (UNROUTED_PASSES, ENGINE_METRICS_TIMEOUT),
     "action": "restart the controller",
     "budget": {"settle": 40, "backoff": (80, 160, 320, 600), "per_hour": 3},
     "readme": ("upstream's controller lost an instance's `add`",)},
    {"name": "stalled_pod", "agent": "pod",
     "watches": "its own node manager and engines; its peers' node managers; the controller's /readiness",
     "condition": "its start command never came, every peer of a multi-host instance has started, and the controller "
                  "started more than %d s ago (instance ids cannot collide)" % ID_WINDOW,
     "action": "freeze its processes for 20 s (the controller separates the instance), then end them; Docker's "
               "restart policy starts the pod again",
     "budget": {"settle": 30, "backoff": (60, 120, 240, 480, 600), "per_hour": None}, "hold": 20,
     "readme": ("a node manager dropped at start", "an engine pod's main process dies",
                "an engine host's Docker engine restarted")},
    {"name": "unhealthy", "agent": "host",
     "watches": "the Docker health of the job's containers on its host",
     "condition": "Docker reports it unhealthy past its start period",
     "action": "docker restart",
     "budget": {"settle": 0, "backoff": (30, 60, 120, 300), "per_hour": None},
     "readme": ("the coordinator or the controller hangs",)},
    {"name": "missing_device", "agent": "host",
     "watches": "the last start error of the job's containers on its host; the host's /dev",
     "condition": "its last start failed for a device it maps, and every device it maps exists now",
     "action": "docker start",
     "budget": {"settle": 0, "backoff": (30, 60, 120, 300), "per_hour": None},
     "readme": ("an engine host rebooted before its `/dev/davinci*` devices exist",)},
    {"name": "npu_unhealthy", "agent": "host",
     "watches": "the npu-smi health of every planned NPU of its host, as each engine pod's healer reads it in that pod "
                "(every %d s; the pod has its NPUs and the driver's read-only mounts, this healer none)" % NPU_READ_EVERY,
     "condition": "npu-smi reports a planned NPU's health other than OK (Warning, Alarm, Critical, ...)",
     "action": "report only: a log line when it starts and when it clears, motor_npu_unhealthy in its metrics file, "
               "the NPU HEALTH column of status.yml; nothing restarts (a restart cannot repair hardware)",
     "budget": {"settle": 0, "backoff": (0,), "per_hour": None}, "report": True,
     "readme": ("an NPU's health turns bad while the job serves",)},
    {"name": "kv_registrations", "agent": "kv_watcher",
     "watches": "the KV conductor's GET /services",
     "condition": "the conductor may have restarted (connection broke, unreachable) and lacks registrations the "
                  "coordinator made",
     "action": "POST /register of each missing registration (the coordinator's own body)",
     "budget": {"settle": 0, "backoff": (2,), "per_hour": None},
     "readme": ("the KV conductor restarted", "the control host's Docker engine restarted")},
)

AGENTS = ("controller", "pod", "host", "kv_watcher")


def rules_of(agent):
    """The rules ``agent`` runs, in the table's order (its checks run in that order; the first due one acts)."""
    return [rule for rule in RULES if rule["agent"] == agent]


def rule(name):
    """The rule named ``name`` (KeyError when none)."""
    for entry in RULES:
        if entry["name"] == name:
            return entry
    raise KeyError(name)


def backoff(budget, actions, now):
    """When an agent may act again under ``budget``: ``budget["backoff"][n - 1]`` s after the last of its ``n``
    actions in the last hour (the last step repeating); 0 with none."""
    recent = sorted(t for t in actions if now - t < HOUR)
    if not recent:
        return 0.0
    steps = budget["backoff"]
    return recent[-1] + steps[min(len(recent), len(steps)) - 1]


def spent(budget, actions, now):
    """Whether ``budget["per_hour"]`` actions happened in the last hour (then the agent only alarms)."""
    cap = budget.get("per_hour")
    return cap is not None and len([t for t in actions if now - t < HOUR]) >= cap
