# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Docker health checks from upstream's Kubernetes probes (one place for the probed roles and the thresholds).

Upstream declares probes on the controller and the coordinator only (``examples/deployer/yaml_template/
controller_template.yaml:86-111``, ``coordinator_template.yaml:51-76``, the same in ``infer_service_template.yaml:
111-125, 242-258``); its engine, KV pool, KV conductor and mf_store templates declare none, so those containers get no
health check here either (the single container, which runs the controller and the coordinator, gets both probes,
as ``single_container_template.yaml:41-67`` declares them) (restarting an engine that is loading a model would be the loop upstream avoids). Each probe
runs ``$CONFIGMAP_PATH/probe.sh <startup|readiness|liveness>`` -> ``probe.py <role> <type>`` (``probe/probe.sh:27``),
a GET of ``/<type>`` on the role's API port (``probe/probe.py:199-259``), 200 = success.

Docker has one health check per container; it maps to the liveness probe (what restarts a container), and the
startup probe becomes its start period:
- ``livenessProbe``: ``periodSeconds: 10``, ``timeoutSeconds: 30``, ``failureThreshold: 5`` -> Interval 10 s,
  Timeout 30 s, Retries 5;
- ``startupProbe``: ``periodSeconds: 10`` x ``failureThreshold: 100`` = 1000 s during which a failure does not count
  (upstream's startup grace) -> StartPeriod 1000 s (Docker ends it at the first success, as the startup probe does).

Docker only reports the health (``docker ps``: ``(healthy)`` / ``(unhealthy)``); the host's healer acts on it.
The probe is ``plugin_utils/probe.py`` (standard library; upstream's probe.py needs httpx and ``POD_IP``), written into
the container's config directory with its target; both count in the container's config hash (``specs.own_files``).
"""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils import probe
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import target, tls_settings
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.single import SINGLE_ROLE

PROBE_SCRIPT = "motor_probe.py"
PROBE_CONFIG = "motor_probe.json"
# role -> the port_map key of the API port upstream's probe.py reads (api_config.<role>_api_port)
PROBED_PORTS = {"controller": "api", "coordinator": "mgmt"}
# upstream's livenessProbe and startupProbe (see the module docstring), in seconds
LIVENESS = {"interval": 10, "timeout": 30, "retries": 5}
STARTUP_GRACE = 10 * 100


# the single container (plan/single.py): upstream's probe is "probe.sh liveness coordinator && probe.sh liveness
# controller" every 5 s, 4 s each, 12 failures; startup 5 s x 100 (single_container_template.yaml:41-67)
SINGLE_PROBED = ("mgmt", "controller_api")  # its port_map keys: the coordinator's management, the controller's API
SINGLE_LIVENESS = {"interval": 5, "timeout": 9, "retries": 12}  # two probes of at most 4 s each, one after the other
SINGLE_PROBE_TIMEOUT = 4
SINGLE_STARTUP_GRACE = 5 * 100


def _probe_configs(container: dict) -> list:
    """``[(file name, port_map key, timeout)]`` of the container's probes, in upstream's order (empty: none)."""
    if container.get("role") == SINGLE_ROLE:
        return [("motor_probe_%s.json" % key, key, SINGLE_PROBE_TIMEOUT) for key in SINGLE_PROBED]
    if container.get("role") in PROBED_PORTS:
        return [(PROBE_CONFIG, PROBED_PORTS[container["role"]], LIVENESS["timeout"])]
    return []


def healthcheck(container: dict):
    """The motor_containers ``healthcheck`` of a plan entry (seconds), or None when upstream declares no probe."""
    configs = _probe_configs(container)
    if not configs:
        return None
    path = container["configmap_path"]
    if container.get("role") == SINGLE_ROLE:
        script = " && ".join("python3 %s/%s %s/%s" % (path, PROBE_SCRIPT, path, name) for name, _key, _t in configs)
        return dict(SINGLE_LIVENESS, test=["CMD", "bash", "-c", script], start_period=SINGLE_STARTUP_GRACE)
    return dict(LIVENESS, test=["CMD", "python3", "%s/%s" % (path, PROBE_SCRIPT), "%s/%s" % (path, configs[0][0])],
                start_period=STARTUP_GRACE)


def probe_files(plan: dict) -> dict:
    """``{container: {file: text}}``: the probe script and its target (``/liveness`` on the role's API port, the
    management TLS settings; the host name is not checked: the probe dials the plan's IP address)."""
    with open(probe.__file__, encoding="utf-8") as handle:
        script = handle.read()
    mgmt = tls_settings(plan, check_hostname=False)["mgmt"]
    out = {}
    for c in (plan or {}).get("containers") or []:
        configs = _probe_configs(c)
        if not configs:
            continue
        out[c["name"]] = {PROBE_SCRIPT: script}
        for name, key, timeout in configs:
            config = {"target": target(c["ip"], (c.get("port_map") or {}).get(key), "/liveness", mgmt),
                      "timeout": timeout}
            out[c["name"]][name] = json.dumps(config, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"
    return out
