# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What is read off a plan: its table, the weights and model directories."""

from __future__ import annotations

import posixpath

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import GEN_CERT_DEFAULTS, WEIGHT_MOUNT_PATH
from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import compress_numbers, natural_key, render_table


def strip_dir(path) -> str:
    text = str(path or "")
    return text.rstrip("/") or text


def weight_dir(user_config: dict) -> str:
    """Host directory of the model weights (motor_deploy_config.weight_mount_path, default /mnt/weight)."""
    deploy = (user_config or {}).get("motor_deploy_config") or {}
    return strip_dir(deploy.get("weight_mount_path") or WEIGHT_MOUNT_PATH)


def _model_dir(user_config: dict, role: str) -> str:
    if role == "coordinator":
        section = ((user_config.get("motor_coordinator_config") or {}).get("prefill_kv_event_config") or {})
        return strip_dir(section.get("model_path"))
    return strip_dir(((user_config.get(f"motor_engine_{role}_config") or {}).get("engine_config") or {}).get("model"))


def model_dirs(source) -> list:
    """The model directories that must exist on a host: of the plan entries given (those that need the weights),
    or of a whole normalized config (every engine role and the coordinator, before anything is planned)."""
    if isinstance(source, dict):
        user_config = source.get("user_config") or {}
        pairs = [(user_config, role) for role in list(source.get("engines") or {}) + ["coordinator"]]
    else:
        pairs = [(c.get("user_config") or {}, c.get("role")) for c in source or [] if c.get("needs_weights")]
    out = []
    for user_config, role in pairs:
        path = _model_dir(user_config, role)
        if path and path not in out:
            out.append(path)
    return out


def cert_dirs(source) -> list:
    """The host directories every container of the job reads when ``ENABLE_GEN_CERT`` is ``true`` in
    set_common_env (upstream's common.sh then makes the TLS certificates at boot): the CA directory ``CA_PATH`` and
    the directory of ``GEN_CERT_SCRIPT`` (defaults under /mnt/cert_scripts), a directory inside another left out.
    ``source``: a normalized config (its env.json ``common`` section) or a plan (its containers' set_common_env)."""
    if "containers" in source:
        containers = source.get("containers") or []
        common = ((containers[0].get("shell_env") or {}).get("set_common_env") or {}) if containers else {}
    else:
        common = (source.get("env") or {}).get("common") or {}
    value = common.get("ENABLE_GEN_CERT")
    if value is not True and str(value).strip() != "true":
        return []
    wanted = [str(common.get("CA_PATH") or GEN_CERT_DEFAULTS["CA_PATH"]),
              posixpath.dirname(str(common.get("GEN_CERT_SCRIPT") or GEN_CERT_DEFAULTS["GEN_CERT_SCRIPT"]))]
    wanted = sorted({posixpath.normpath(path) for path in wanted if path.startswith("/")})
    return [path for path in wanted if not any(path.startswith(other + "/") for other in wanted if other != path)]


PLAN_COLUMNS = [("host", "HOST"), ("ip", "IP"), ("name", "CONTAINER"), ("role", "ROLE"), ("tier", "TIER"),
                ("npus", "NPUS"), ("ports", "PORTS")]


def counted(number: int, noun: str) -> str:
    """'1 host', '2 hosts'."""
    return "%d %s%s" % (number, noun, "" if number == 1 else "s")


def plan_table(plan: dict) -> str:
    """The plan as a fixed-width text table: host, ip, container, role, NPUs, ports (one row per container)."""
    order = {name: i for i, name in enumerate(plan.get("hosts") or {})}
    containers = sorted(plan.get("containers") or [],
                        key=lambda c: (order.get(c["host"], len(order)), c["tier"], natural_key(c["name"])))
    rows = [{"host": c["host"], "ip": c.get("ip", ""), "name": c["name"], "role": c["role"], "tier": c["tier"],
             "npus": compress_numbers(c.get("npu_ids") or []), "ports": compress_numbers(c.get("ports") or [])}
            for c in containers]
    lines = render_table(rows, PLAN_COLUMNS).splitlines()
    coord = plan.get("coordinator") or {}
    hosts = len({c["host"] for c in containers})
    summary = [f"job {plan.get('job_id')} ({plan.get('mode')}, {plan.get('hardware_type')}): "
               f"{counted(len(containers), 'container')} on {counted(hosts, 'host')}; "
               f"OpenAI API at {coord.get('url', '?')}"]
    for warning in plan.get("warnings") or []:
        summary.append(f"WARNING: {warning}")
    return "\n".join(lines + summary)


def plan_user_config(plan: dict) -> dict:
    """The user_config of the plan (every entry carries the same one, instance counts aside)."""
    containers = plan.get("containers") or []
    return (containers[0].get("user_config") or {}) if containers else {}
