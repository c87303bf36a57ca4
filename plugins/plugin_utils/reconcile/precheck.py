# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The host prechecks of a deploy, judged on the controller from what motor_host_probe read (no I/O).

One Problem per finding, ``<host>: <check>: <what> (fix: <how>)``, all of them at once.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import PORTS_LABEL, Problem
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import truthy
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.cpu_affinity import engine_cpusets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.npu_checks import (
    device_findings,
    hccl_port_findings,
    health_findings,
    job_network_findings,
    network_findings,
    planned_npus,
    spod_findings,
    version_findings,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import cert_dirs, model_dirs, plan_user_config, weight_dir
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import natural_key


# The settings the precheck and the container specs read, by their short names. The caller names them: a settings
# dict is keyed by variables named ``<prefix><short name>`` (the role's own names, e.g. motor_service_log_root); a
# host's own value of such a variable (inventory host or group variable) wins for that host.
SETTING_NAMES = ("image", "config_root", "docker_min_version", "driver_dir", "hccn_tool", "log_root", "min_free_log_mb",
                 "check_links", "engine_mounts", "command", "restart_policy", "log_max_size", "log_max_file",
                 "env_functions", "extra_volumes")
# Settings a caller may leave out (older playbooks of your own): short name -> the value then.
OPTIONAL_SETTINGS = {"min_driver_version": "", "npu_log_dir": "", "coredump_dir": "", "engine_cap_add": [],
                     "seccomp_profile": "", "engine_memory": "", "engine_cpu_affinity": "none", "init": False,
                     "etcd_tls_dir": ""}


class PrecheckError(ValueError):
    """The precheck cannot be judged (a setting is missing)."""


def setting_prefix(defaults: dict) -> str:
    """The prefix of the variable names of a settings dict: what precedes the first short name found."""
    for name in defaults or {}:
        for short in SETTING_NAMES:
            if str(name).endswith(short):
                return str(name)[:-len(short)]
    return ""


def host_settings(defaults: dict, overrides: dict) -> dict:
    """One host's view by short name: ``defaults`` (variable name -> the controller's value) with the host's own
    values (``overrides``, same variable names) on top."""
    prefix = setting_prefix(defaults) or setting_prefix(overrides)
    missing = [prefix + short for short in SETTING_NAMES if prefix + short not in defaults and prefix + short not in overrides]
    if missing:
        raise PrecheckError("settings missing: %s" % ", ".join(missing))
    out = {short: overrides[prefix + short] if prefix + short in overrides else defaults[prefix + short]
           for short in SETTING_NAMES}
    for short, value in OPTIONAL_SETTINGS.items():
        out[short] = overrides.get(prefix + short, defaults.get(prefix + short, value))
    # a bool the specs, the hash and the precheck read as such: -e motor_service_init=false is the string "false"
    out["init"] = truthy(out["init"])
    return out


def _version(text: str) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", str(text).split("+", maxsplit=1)[0].split("-", maxsplit=1)[0])[:3])


def _container_name(docker_container: dict) -> str:
    return ((docker_container.get("Names") or ["/"])[0]).lstrip("/")


def image_id(probe: dict) -> str:
    """The id of the image on the host, as the discovery read it ('' when absent)."""
    images = (probe or {}).get("images") or []
    return (images[0] or {}).get("Id", "") if images else ""


def mounts_present(probe: dict, engine_mounts: list) -> list:
    """The engine mounts that exist on the host, in the order of ``engine_mounts``."""
    paths = (probe or {}).get("paths") or {}
    return [path for path in engine_mounts or [] if paths.get(path)]


def _normal_ip(text) -> str:
    try:
        return str(ipaddress.ip_address(str(text).strip()))
    except ValueError:
        return str(text)


def _worth_naming(address) -> bool:
    """An address other hosts could reach this one on (not loopback, not link-local)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return True
    return not parsed.is_loopback and not parsed.is_link_local


def address_problems(planned: dict, interfaces: dict) -> list:
    """(check, what, fix) for the plan's NIC and address of a host that are not on it: ``planned`` is the host's entry
    of the plan (``nic``, ``ip``), ``interfaces`` what motor_host_probe read (name -> {ipv4, ipv6})."""
    out = []
    names = sorted(interfaces, key=natural_key)
    nic = planned.get("nic")
    if nic and nic not in interfaces:
        out.append(("nic", "motor_nic %s is not an interface of this host (it has %s)" % (nic, ", ".join(names)),
                    "set motor_nic to the interface the other hosts are reached on, or leave it unset: the plan then "
                    "takes the interface of the default route"))
    have = {}
    for name in names:
        for family in ("ipv4", "ipv6"):
            for address in (interfaces.get(name) or {}).get(family) or []:
                have.setdefault(_normal_ip(address), name)
    ip = planned.get("ip")
    if ip and _normal_ip(ip) not in have:
        shown = ["%s (%s)" % (a, n) for a, n in have.items() if _worth_naming(a)]
        out.append(("host address", "motor_host_ip %s is not an address of this host (it has %s)"
                    % (ip, ", ".join(shown) or "no address but loopback"),
                    "set motor_host_ip (or ansible_host) to one of them, or leave both unset: the plan then takes the "
                    "address of motor_nic, else of the default route's interface"))
    return out


def host_problems(host: str, containers: list, probe: dict, settings: dict, plan: dict, warnings=None) -> list:
    """Every precheck problem of one host (empty: the host may be configured and started); what deploys anyway is
    appended to ``warnings`` (a list) when given."""
    probe = probe or {}
    out = []

    def problem(check, what, fix, into=None):
        (out if into is None else into).append(str(Problem("%s: %s" % (host, check), what, "fix: " + fix)))

    read = "npu_devices" in probe
    rootless = not_root(probe)
    if not read:
        problem("host", "not read before planning", "run playbooks/deploy.yml, or playbooks/plan.yml with "
                "-e motor_plan_discover=true, which read every host first")
    elif rootless:
        # one problem instead of its follow-ons: the Docker socket, npu-smi, hccn_tool and the driver's files need
        # root, so what they would say as another user is no finding (the checks that need root are skipped)
        problem("privileges", "connected as uid %s without become: the deploy needs root on the host (Docker socket, "
                "npu-smi, hccn_tool, the driver, the config and log directories)" % probe.get("euid"),
                "set become: true (ansible_become: true for the host or group in the inventory, or run "
                "ansible-playbook with --become), with a user that may sudo to root")
    elif not probe.get("can_talk_to_docker"):
        problem("docker", "the Docker engine does not answer (%s)" % str(probe.get("msg") or "").strip(),
                "start dockerd and make sure the connecting user can reach /var/run/docker.sock")
    else:
        version = str((probe.get("host_info") or {}).get("ServerVersion") or "0")
        if _version(version) < _version(settings["docker_min_version"]):
            problem("docker version", "%s is older than %s" % (version, settings["docker_min_version"]),
                    "upgrade the Docker engine")
        # "N/A": dockerd could not run its docker-init; "" is a tini built without its git commit (Debian's)
        if containers and settings.get("init") and (probe.get("host_info") or {}).get("InitVersion") == "N/A":
            problem("docker init", "the Docker engine has no docker-init (docker info: init version N/A), which "
                    "the containers run as PID 1 (motor_service_init)",
                    "install tini as the engine's docker-init (Debian's docker.io depends on it; docker-ce ships "
                    "it), or set motor_service_init: false")
        if containers:
            if not settings["image"]:
                problem("image", "no image named",
                        "set motor_image, or motor_deploy_config.image_name in user_config.json")
            elif not image_id(probe):
                problem("image", "%s is not present on the host" % settings["image"],
                        "run playbooks/build_image.yml -e motor_image=%s to build and ship it" % settings["image"])
    interfaces = probe.get("interfaces")
    if containers and isinstance(interfaces, dict) and interfaces:  # a host that runs something listens on them
        for check, what, fix in address_problems((plan.get("hosts") or {}).get(host) or {}, interfaces):
            problem(check, what, fix)
    for c in containers:
        if not c["configmap_path"].startswith(settings["config_root"] + "/"):
            where = (c["configmap_path"], c["name"], settings["config_root"])
            problem("config dir", "%s of %s is not under motor_config_root %s" % where,
                    "set motor_config_root to where the plan puts the config directories, and re-plan")
    npus = planned_npus(containers)
    noted = []
    if read and npus and not rootless:
        found, notes = health_findings(npus, probe)
        found += device_findings(containers, probe)
        found += spod_findings(npus, probe, ((plan.get("hosts") or {}).get(host) or {}).get("hardware_type"))
        more, later = version_findings(probe, settings, (((probe.get("images") or [{}])[0]) or {}).get("Labels"))
        for check, what, fix in found + more:
            problem(check, what, fix)
        noted = notes + later + hccl_port_findings(containers, probe)
    # paths under root-only directories read as missing to another user: judged only as root
    paths = {} if rootless else probe.get("paths") or {}
    if not rootless and any(c.get("mounts_profile") == "engine" for c in containers):
        if not paths.get(settings["driver_dir"]):
            problem("driver", "%s is missing" % settings["driver_dir"], "install the Ascend NPU driver")
        if not paths.get(settings["hccn_tool"]):
            problem("hccn_tool", "%s is missing" % settings["hccn_tool"],
                    "install the Ascend driver tools or set motor_service_hccn_tool")
    if read and npus and not rootless and truthy(settings["check_links"]):
        for check, what, fix in network_findings(npus, probe):
            problem(check, what, fix)
    holders = {p: c["name"] for c in reversed(containers) for p in c.get("ports") or []}  # port -> its first planner
    by_name = {c["name"]: c for c in containers}
    # ports held by our own running containers: each records the ports it binds in its io.pymotor.ports label
    # (a container of the job without that label, from an older deploy: the ports planned for its name)
    allowed = set()
    for own in probe.get("containers") or []:
        if not str(own.get("Status") or "").startswith("Up"):
            continue
        label = (own.get("Labels") or {}).get(PORTS_LABEL) or ""
        allowed.update(int(p) for p in label.split(",") if p)
        allowed.update((by_name.get(_container_name(own)) or {}).get("ports") or [])
    for port in probe.get("listening") or []:
        if port in holders and port not in allowed:
            problem("port %s" % port, "already in use by another process, but planned for %s" % holders[port],
                    "stop that process, or add %s to motor_reserved_ports of this host and re-plan" % port)
    for path in cert_dirs(plan) if containers else []:
        if not paths.get(path, True):  # ENABLE_GEN_CERT=true: every container's boot reads the CA and the script
            problem("certificates", "%s is missing (ENABLE_GEN_CERT=true in motor_common_env of env.json)" % path,
                    "put the CA (CA_PATH) and openssl_gen_cert.sh (GEN_CERT_SCRIPT) there, or turn ENABLE_GEN_CERT off")
    weights = weight_dir(plan_user_config(plan))
    if any(c.get("needs_weights") for c in containers) and not paths.get(weights, True):
        problem("weights", "%s (motor_deploy_config.weight_mount_path) is missing" % weights,
                "mount or copy the model weights there")
    if "models" in probe and not rootless:
        for model in model_dirs(containers):
            state = (probe.get("models") or {}).get(model, "not read")
            if state != "ok":
                problem("model", "%s %s" % (model, state), "put the model (config.json, tokenizer, weights) there; "
                        "the coordinator host needs it too with KV-cache affinity")
    free_mb = probe.get("free_mb")
    if containers and free_mb is not None and free_mb < int(settings["min_free_log_mb"]):
        need = (free_mb, settings["log_root"], settings["min_free_log_mb"])
        problem("disk", "%s MiB free for logs under %s, need %s" % need,
                "free disk space or set motor_service_log_root")
    if warnings is not None:
        for check, what, fix in noted:
            problem(check, what, fix, into=warnings)
    return out


def not_root(probe: dict) -> bool:
    """The probe ran as another user than root (a connection without become); an older probe that does not say:
    False (judged as before)."""
    euid = (probe or {}).get("euid")
    return euid is not None and str(euid) != "0"


def judge_hosts(plan: dict, hosts: list, probes: dict, defaults: dict, overrides: dict) -> dict:
    """Judge every host: ``hosts`` (inventory order), ``probes`` (host -> discovery result), ``defaults`` (setting
    variable -> the controller's value), ``overrides`` (host -> its own values of those variables).

    Returns ``problems`` (all hosts), ``warnings`` (what deploys anyway: an NPU in Warning, versions side by side),
    ``hosts`` (host -> ``image_id``, ``mounts_present``, ``problems``), ``settings`` (host -> its view of the
    settings, by short name) and ``own`` (host -> its planned containers, in plan order: the one index of the
    decision, built once)."""
    own_by_host = containers_by_host(plan)
    result = {"problems": [], "warnings": [], "hosts": {}, "settings": {}, "own": own_by_host}
    job_network = job_network_findings(plan, probes, True)  # each host's own check_links decides below
    for host in checked_hosts(plan, hosts):
        own = own_by_host.setdefault(host, [])
        probe = (probes or {}).get(host) or {}
        settings = host_settings(defaults or {}, (overrides or {}).get(host) or {})
        mounts = mounts_present(probe, settings["engine_mounts"])
        problems = host_problems(host, own, probe, settings, plan, result["warnings"])
        problems += [str(Problem("%s: %s" % (host, check), what, "fix: " + fix))
                     for check, what, fix in job_network.get(host, [])
                     if truthy(settings["check_links"]) and not not_root(probe)]
        # engine cpusets from the NPUs' CPU affinity (motor_service_engine_cpu_affinity=npu; cpu_affinity.py): they
        # reach the container specs and the config hash through the host's settings
        cpusets, unplaced = engine_cpusets(own, probe, settings["engine_cpu_affinity"])
        if cpusets:
            settings = dict(settings, cpusets=cpusets)
        result["warnings"] += [str(Problem("%s: %s" % (host, check), what, "fix: " + fix)) for check, what, fix in unplaced]
        result["hosts"][host] = {"image_id": image_id(probe), "mounts_present": mounts, "problems": problems}
        result["settings"][host] = settings
        result["problems"] += problems
    return result


def containers_by_host(plan: dict) -> dict:
    """host -> its planned containers, in plan order."""
    out = {}
    for c in plan.get("containers") or []:
        out.setdefault(c["host"], []).append(c)
    return out


def checked_hosts(plan: dict, hosts: list) -> list:
    """The hosts the precheck judges: ``hosts`` (inventory order), then any other host of the plan."""
    return list(dict.fromkeys(list(hosts or []) + [c["host"] for c in plan.get("containers") or []]))
