# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Config hashes: what part of the plan and the role settings each container's hash covers."""

from __future__ import annotations

import hashlib
import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_ROLES, SCALE_KEYS
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import plan_user_config, weight_dir
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.single import SINGLE_ROLE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.pair_roll import dependency_digest


def shared_spec(settings: dict, mounts: list, plan: dict) -> dict:
    """The role settings every container of a host shares (one part of each container's config hash)."""
    return {
        "image": settings["image"],
        "command": settings["command"],
        "restart_policy": settings["restart_policy"],
        "log": [settings["log_root"], settings["log_max_size"], settings["log_max_file"]],
        "weight_dir": weight_dir(plan_user_config(plan)),
        "mounts": mounts,
        "env_functions": settings["env_functions"],
        "extra_volumes": settings["extra_volumes"],
        **({"runtime": runtime_settings(settings)} if any(runtime_settings(settings).values()) else {}),
        **({"cpusets": settings["cpusets"]} if settings.get("cpusets") else {}),  # reconcile/cpu_affinity.py
        **({"init": True} if settings.get("init") else {}),
        **({"etcd_tls_dir": settings["etcd_tls_dir"]} if settings.get("etcd_tls_dir") else {}),  # master/standby
    }


RUNTIME_SETTINGS = ("npu_log_dir", "coredump_dir", "engine_cap_add", "seccomp_profile", "engine_memory")


def runtime_settings(settings: dict) -> dict:
    """The settings reconcile/runtime.py applies (all empty: the hash part is what it was before them)."""
    return {name: settings.get(name) or "" for name in RUNTIME_SETTINGS}


# Direct dependencies: when one of these restarts, the dependent container must restart too. Engines register
# with the controller and store KV blocks in the pool; the coordinator keeps its own list of what it
# registered at the conductor.
DEPENDS_ON = {
    "coordinator": ("kv_conductor",),
    **{role: ("controller", "kv_pool") for role in ENGINE_ROLES},
}


PART_NAMES = ("image", "spec", "shared", "deps")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


# user_config sections each role reads (every container gets the whole file, like PyMotor's ConfigMap); a change
# in a section only the others read restarts nobody else (a running container keeps its file: specs.configmaps).
# Top-level keys not listed under any role (version, motor_deploy_config, unknown ones) count for every container.
ENGINE_READS = ("motor_nodemanger_config", "kv_cache_pool_config")


READS = {
    "controller": ("motor_controller_config",),
    # the coordinator derives prefill_kv_event_config from the prefill/union engine section (config_utils)
    "coordinator": ("motor_coordinator_config", "motor_engine_prefill_config", "motor_engine_union_config",
                    "kv_conductor_config"),
    "kv_conductor": ("kv_conductor_config",),
    "kv_pool": ("kv_cache_pool_config",),
    "prefill": ("motor_engine_prefill_config",) + ENGINE_READS,
    "decode": ("motor_engine_decode_config",) + ENGINE_READS,
    "union": ("motor_engine_union_config",) + ENGINE_READS,
    "encode": ("motor_engine_encode_config",) + ENGINE_READS,
}


ROLE_SECTIONS = frozenset(section for sections in READS.values() for section in sections)
READS[SINGLE_ROLE] = tuple(sorted(ROLE_SECTIONS))  # the single container runs every role: it reads every section


def spec_digest(container: dict) -> str:
    """sha256 of the plan entry of a container: user_config reduced to what its role reads, counts masked."""
    # shallow copies of the levels it changes only: a deep copy of the plan as Ansible hands it to a filter (lazy,
    # tagged containers) cost about 0.6 s per container
    entry = dict(container)
    user_config = entry.get("user_config")
    if isinstance(user_config, dict):
        reads = READS.get(entry.get("role"), ())
        entry["user_config"] = {k: v for k, v in user_config.items() if k not in ROLE_SECTIONS or k in reads}
        deploy = entry["user_config"].get("motor_deploy_config")
        if isinstance(deploy, dict):
            entry["user_config"]["motor_deploy_config"] = {k: v for k, v in deploy.items() if k not in SCALE_KEYS}
    return sha256_hex(canonical_json(entry))


def config_parts(containers: list, image_id: str, shared_spec: dict) -> dict:
    """The hash parts of the containers of one host: the image id, the spec digest of each plan entry and the digest
    of the role settings every container shares (the same text as Jinja's ``to_json(sort_keys=true) | hash``)."""
    shared = _digest(shared_spec)
    return {c["name"]: {"image": image_id, "shared": shared, "spec": spec_digest(c)} for c in containers}


def dependencies(plan: dict) -> dict:
    by_role = {}
    for c in plan.get("containers", []):
        by_role.setdefault(c["role"], []).append(c["name"])
    return {c["name"]: sorted(n for role in DEPENDS_ON.get(c["role"], ()) for n in by_role.get(role, []))
            for c in plan.get("containers", [])}


def container_hashes(plan: dict, parts: dict) -> tuple[dict, dict]:
    """Final hash and parts label of every planned container.

    ``parts``: ``{name: {image, spec, shared}}``. The final hash covers the container's own parts and the own
    hashes of its direct dependencies."""
    own = {}
    for c in plan.get("containers", []):
        p = parts.get(c["name"]) or {}
        own[c["name"]] = sha256_hex("\n".join(str(p.get(k, "")) for k in ("image", "spec", "shared")))
    deps = dependencies(plan)
    as_dependency = dependency_digest(plan, parts, own)  # a master/standby replica: its own config only
    hashes, labels = {}, {}
    for name, digest in own.items():
        dep_digest = sha256_hex(",".join(as_dependency[d] for d in deps[name])) if deps[name] else "-"
        hashes[name] = digest if dep_digest == "-" else sha256_hex(digest + "," + dep_digest)
        p = parts.get(name) or {}
        values = [str(p.get(k, ""))[:12] for k in ("image", "spec", "shared")] + [dep_digest[:12]]
        labels[name] = ",".join(f"{k}={v}" for k, v in zip(PART_NAMES, values))
    return hashes, labels


def fold_files(parts: dict, files: dict) -> dict:
    """``parts`` with the files the collection writes into a container's config directory (``specs.own_files``)
    folded into its ``spec`` part: a new watcher script or config restarts the watcher."""
    out = dict(parts)
    for name, texts in (files or {}).items():
        if name in out:
            out[name] = dict(out[name], spec=sha256_hex(str(out[name].get("spec", "")) + canonical_json(texts)))
    return out


def _digest(shared: dict) -> str:
    return hashlib.sha256(json.dumps(shared, sort_keys=True).encode("utf-8")).hexdigest()


def hash_parts(plan: dict, judged: dict, existing: dict | None = None) -> dict:
    """The hash parts of every planned container, from each host's settings, engine mounts and image id as the
    precheck judged them (``judge_hosts``).

    A new image name for the same image id (a retag: a release tag for a tested build, a registry-qualified name)
    restarts nothing: a running container whose image id (Docker's ``ImageID`` of the list, ``existing``) is the
    host's image id keeps, in its ``shared`` part, the image name it was created from (Docker's ``Image``): the
    record follows the container, so its hash is unchanged. It takes the new name when it is recreated for another
    reason. Docker lists the id instead of the name once no tag names the container's image any more: then the name
    is unknown and the container restarts, as before."""
    parts = {}
    own_by_host = judged["own"]
    for host, seen in (judged.get("hosts") or {}).items():
        own = own_by_host.get(host) or []
        shared = shared_spec(judged["settings"][host], seen["mounts_present"], plan)
        parts.update(config_parts(own, seen["image_id"], shared))
        listed = {str((item.get("Names") or ["/"])[0]).lstrip("/"): item for item in (existing or {}).get(host) or []}
        for c in own:
            item = listed.get(c["name"]) or {}
            name = str(item.get("Image") or "")
            if (seen["image_id"] and item.get("ImageID") == seen["image_id"] and name
                    and name != shared["image"] and not name.startswith("sha256:")):
                parts[c["name"]] = dict(parts[c["name"]], shared=_digest(dict(shared, image=name)))
    return parts
