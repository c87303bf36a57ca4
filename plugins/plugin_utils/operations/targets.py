# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The URLs the day-2 verbs and the readiness waits talk to, with the TLS settings of each (pure, no I/O).

PyMotor serves a port over https when the ``motor_deploy_config.tls_config`` section that covers it has
``enable_tls`` (upstream ``motor/config/config_utils.py``; the servers load ``cert_file``/``key_file`` and trust
``ca_file``): ``mgmt_tls_config`` covers the controller API, the coordinator's management port, the node managers
and the engines' management ports (``/status``, ``/metrics``); ``infer_tls_config`` covers the coordinator's
inference port and the engines' service ports. The Mooncake conductor serves plain http. Clients use the same
CA / client certificate / key, as upstream's probe (``examples/deployer/probe/probe.py``) does.

A target is ``{"url": ..., "tls": None | {"ca_file", "cert_file", "key_file", "passwd_file", "check_hostname"}}``:
``passwd_file`` holds the password of an encrypted ``key_file`` (upstream reads it in clear, stripped:
``motor/common/http/password_utils.py:45-47``, ``cert_util.py:797-805``); every client of ours reads it the same way.

The paths are those the ``tls_config`` sections name: paths inside the containers (mounted from the hosts), which is
what the healers, the health checks and verify's affinity probe read. Our clients on the Ansible controller (the
readiness waits, verify's reads, the roll's drain, the benchmark: the motor_wait and motor_bench actions) read the
controller's copies instead when the ``motor_tls_*`` variables name them (``controller_tls``, ``CONTROLLER_TLS_VARS``).
"""

from __future__ import annotations

import os

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import ROUTES_PATH
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_wait import tls_kwargs
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import kv_endpoint_urls
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import url_host
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import plan_user_config

SECTIONS = {"mgmt": "mgmt_tls_config", "infer": "infer_tls_config"}


def _enabled(value) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


def tls_settings(plan: dict, check_hostname: bool = True) -> dict:
    """``{"mgmt": tls or None, "infer": tls or None}`` from the plan's user_config."""
    deploy = (plan_user_config(plan or {}).get("motor_deploy_config") or {})
    section = deploy.get("tls_config") if isinstance(deploy.get("tls_config"), dict) else {}
    out = {}
    for kind, key in SECTIONS.items():
        cfg = section.get(key) if isinstance(section.get(key), dict) else {}
        out[kind] = ({"ca_file": cfg.get("ca_file") or "", "cert_file": cfg.get("cert_file") or "",
                      "key_file": cfg.get("key_file") or "", "passwd_file": cfg.get("passwd_file") or "",
                      "check_hostname": bool(check_hostname)}
                     if _enabled(cfg.get("enable_tls")) else None)
    return out


# The controller-side copy of each file of a tls_config section: one variable per field, for every section that is on
# (mgmt and infer); an unset or empty one leaves the section's own path (the same path on the controller).
CONTROLLER_TLS_VARS = {"ca_file": "motor_tls_ca_file", "cert_file": "motor_tls_cert_file",
                       "key_file": "motor_tls_key_file", "passwd_file": "motor_tls_passwd_file"}


def controller_tls(tls, variables: dict):
    """A target's ``tls`` (``tls_settings``' form, or None for plain http) with the files the Ansible controller reads:
    each field whose ``CONTROLLER_TLS_VARS`` variable is set in ``variables`` takes its value."""
    if not tls:
        return tls
    out = dict(tls)
    for field, name in CONTROLLER_TLS_VARS.items():
        value = (variables or {}).get(name)
        if value not in (None, ""):
            out[field] = os.path.expanduser(str(value))
    return out


def controller_targets(value, variables: dict):
    """``value`` (a target, or any list / mapping of them, e.g. motor_wait's arguments) with every ``tls`` mapping in
    it turned into the controller's (``controller_tls``): the one rule the controller-side actions apply."""
    if isinstance(value, dict):  # a request's body is data, not targets
        return {k: controller_tls(v, variables) if k == "tls" and isinstance(v, dict)
                else v if k == "body" else controller_targets(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [controller_targets(v, variables) for v in value]
    return value


def controller_tls_variables(task_vars: dict, template=None) -> dict:
    """The ``CONTROLLER_TLS_VARS`` variables of an action's ``task_vars`` (templated by ``template`` when given)."""
    out = {}
    for name in CONTROLLER_TLS_VARS.values():
        value = (task_vars or {}).get(name)
        out[name] = template(value) if template is not None and value not in (None, "") else value
    return out


def controller_tls_problems(plan: dict, variables: dict, exists=os.path.isfile) -> list:
    """The TLS files our controller-side clients would open (``tls_settings`` of the sections that are on, through
    ``controller_tls``) that are no file on the controller (``exists``), each once: found before anything changes,
    not when a readiness wait cannot connect. A ``passwd_file`` only when its variable names it (upstream takes a
    missing one for a key that is not encrypted)."""
    out, seen = [], set()
    for kind, tls in tls_settings(plan).items():
        mapped = controller_tls(tls, variables)
        for field, name in CONTROLLER_TLS_VARS.items():
            path = (mapped or {}).get(field)
            named = (variables or {}).get(name) not in (None, "")
            if not path or (field, path) in seen or (field == "passwd_file" and not named) or exists(path):
                continue
            seen.add((field, path))
            where = name if named else "motor_deploy_config.tls_config.%s.%s" % (SECTIONS[kind], field)
            out.append("%s: %s is no file on the Ansible controller, whose clients (readiness waits, the roll's drain, "
                       "verify, benchmark) open it%s" % (where, path, "" if named else (
                           "; copy it to the controller and name the copy in %s" % name)))
    return out


def api_key_settings(plan: dict) -> dict:
    """How our clients present ``motor_api_key`` to the coordinator: api_key_config's ``enabled``, ``header_name``
    and ``key_prefix`` (upstream's defaults, motor/config/coordinator.py:195-198, when unset) from the coordinator's
    rendered config (the only one that has api_key_config). Upstream checks the key on the inference routes only
    (inference_server.py:353-382): readiness, /metrics and the management API take none."""
    coordinator = next((c for c in (plan or {}).get("containers") or [] if c.get("role") == "coordinator"), {})
    cfg = ((coordinator.get("user_config") or {}).get("motor_coordinator_config") or {}).get("api_key_config")
    cfg = cfg if isinstance(cfg, dict) else {}
    prefix = cfg.get("key_prefix")
    return {"enabled": _enabled(cfg.get("enable_api_key")), "header_name": str(cfg.get("header_name") or "Authorization"),
            "key_prefix": "Bearer " if prefix is None else str(prefix)}


def target(ip, port, path="", tls=None) -> dict:
    return {"url": "%s://%s:%s%s" % ("https" if tls else "http", url_host(str(ip)), port, path), "tls": tls}


def service_targets(plan: dict, check_hostname: bool = True) -> dict:
    """Every management / inference target of a job: ``controller``, ``coordinator`` (readiness), ``inference``
    (chat completions), ``conductor`` (base URL), ``routes`` (the coordinator's ``/metrics?type=dp``: the instances
    it routes to, ``motor_health.routed_instances``), ``node_managers`` ``{container: target}``, ``engines``
    ``{"<container>/<dp_rank>": target of /status}`` (the single container's keys: ``node_manager_ports``,
    ``engine_endpoints``), ``metrics`` ``{"<container>/<dp_rank>": [targets]}`` of the
    KV-event publishing engines (PyMotor's management /metrics, then vLLM's on the service port) and ``tokenize``
    (the first publishing engine's vLLM /tokenize)."""
    tls = tls_settings(plan, check_hostname)
    mgmt, infer = tls["mgmt"], tls["infer"]
    controller = plan.get("controller") or {}
    coordinator = plan.get("coordinator") or {}
    conductor = plan.get("kv_conductor") or {}
    events_role = (plan.get("kv_events") or {}).get("role")
    out = {
        "tls": tls,
        "api_key": api_key_settings(plan),
        "controller": target(controller.get("ip"), controller.get("api_port"), "/readiness", mgmt),
        "coordinator": target(coordinator.get("ip"), coordinator.get("mgmt_port"), "/readiness", mgmt),
        "inference": target(coordinator.get("ip"), coordinator.get("infer_port"), "/v1/chat/completions", infer),
        "conductor": target(conductor.get("ip"), conductor.get("port")) if conductor else None,
        # plain http: upstream's observability server takes no TLS settings (observability_server.py:126-135)
        "routes": target(coordinator.get("ip"), coordinator.get("obs_port"), ROUTES_PATH) if coordinator.get(
            "obs_port") else None,
        "node_managers": {}, "engines": {}, "metrics": {}, "tokenize": None,
    }
    for c in plan.get("containers") or []:
        if c.get("tier") != 2:
            continue
        for key, port in node_manager_ports(c):
            out["node_managers"][key] = target(c["ip"], port, "/node-manager/status", mgmt)
        for key, ep in engine_endpoints(c):
            out["engines"][key] = target(c["ip"], ep.get("mgmt_port"), "/status", mgmt)
            if events_role and c.get("role") == events_role:
                out["metrics"][key] = [target(c["ip"], ep.get("mgmt_port"), "/metrics", mgmt),
                                       target(c["ip"], ep.get("service_port"), "/metrics", infer)]
                if out["tokenize"] is None:
                    out["tokenize"] = target(c["ip"], ep.get("service_port"), "/tokenize", infer)
    return out


def node_manager_ports(container: dict) -> list:
    """``[(key, port)]`` of a container's node managers: ``<container>`` of an engine pod; ``<container>/<job_name>``
    of each node manager of the single container (plan/single.py), which is no engine pod: no pod healer, stall
    repair or rolling restart looks it up by its name."""
    if container.get("node_managers"):
        return [("%s/%s" % (container["name"], nm["job_name"]), nm["node_manager_port"])
                for nm in container["node_managers"]]
    return [(container["name"], (container.get("port_map") or {}).get("node_manager"))]


def engine_endpoints(container: dict) -> list:
    """``[(key, endpoint)]`` of a container's engines: ``<container>/<dp_rank>`` of an engine pod; of the single
    container (plan/single.py), whose node managers each start their own ranks, ``<container>/<job_name>/<dp_rank>``."""
    if container.get("node_managers"):
        return [("%s/%s/%s" % (container["name"], nm["job_name"], ep["dp_rank"]), ep)
                for nm in container["node_managers"] for ep in nm["endpoints"]]
    return [("%s/%s" % (container["name"], ep["dp_rank"]), ep) for ep in container.get("endpoints") or []]


def uri_args(tgt) -> dict:
    """The TLS arguments of ansible.builtin.uri / open_url for a target (empty for plain http): the readiness
    wait's own rule, so both clients present the same CA and client certificate."""
    return tls_kwargs((tgt or {}).get("tls"))


def probe_args(plan: dict, settings: dict, check_hostname: bool = True) -> dict:
    """The arguments of roles/motor_operations/files/motor_ops_probe.py: the targets it talks to (paths of the TLS
    files as the tls_config sections name them: the probe runs inside a prefill container) and ``settings``
    (model, model_path, block_size, prefixes, shared, unrelated, prefix_chars, seconds, max_tokens)."""
    targets = service_targets(plan, check_hostname)
    conductor = targets["conductor"]
    out = dict(settings or {})
    out.update(endpoints=kv_endpoint_urls(plan), coordinator=dict(targets["inference"], api_key=targets["api_key"]),
               tokenize=targets["tokenize"],
               conductor=dict(conductor, url=conductor["url"] + "/query") if conductor else None,
               engines=targets["metrics"])
    return out
