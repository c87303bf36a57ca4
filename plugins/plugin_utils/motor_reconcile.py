# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What a (re-)deploy must do with every container of a job: pure functions, no I/O.

Inputs are the plan (motor_plan), the parts every container's hash is made of (image id, own spec digest, the
role settings shared by all containers) and the containers Docker reports per host. Output: per container an
action (create, recreate, start, keep, remove) with the reason, and how it is carried out:

- ``first``: removed before any tier starts: containers the plan no longer has, engines whose controller or KV
  pool restarts (they would re-register with the new controller before being replaced), copies on a wrong host;
- ``drain``: prefill/union containers the plan no longer has while the KV conductor stays: their DP ranks are
  unregistered from the conductor first, then they are removed (scale-in);
- ``parallel``: started in their tier on all hosts at once (new containers, stopped ones, control-plane changes;
  ``tier_steps`` says which consecutive tiers share one host and so start in one step);
- ``rolling``: engine instances whose own config changed, recreated one instance at a time with a readiness
  wait in between (all pods of the instance together: its pods assemble as one engine).

Instance counts (``*_instances_num``) are left out of the spec digest: every container's user_config carries
them, and scaling must not restart the containers that stay (their files are rewritten in place, like
deploy.py --update_instance_num refreshes the ConfigMap only).
"""

from __future__ import annotations

import hashlib
import json

HASH_LABEL = "io.pymotor.config-hash"
PARTS_LABEL = "io.pymotor.config-parts"
PLACEMENT_LABEL = "io.pymotor.placement"
CONTAINER_LABEL = "io.pymotor.container"
PORTS_LABEL = "io.pymotor.ports"

ENGINE_ROLES = ("prefill", "decode", "union", "encode")
PUBLISHING_ROLES = ("prefill", "union")
SCALE_KEYS = ("p_instances_num", "d_instances_num", "hybrid_instances_num", "e_instances_num")
# Direct dependencies: when one of these restarts, the dependent container must restart too. Engines register
# with the controller and store KV blocks in the pool; the coordinator keeps its own list of what it
# registered at the conductor.
DEPENDS_ON = {
    "coordinator": ("kv_conductor",),
    **{role: ("controller", "kv_pool") for role in ENGINE_ROLES},
}
PART_NAMES = ("image", "spec", "shared", "deps")
PART_REASONS = {
    "image": "image changed",
    "spec": "own config changed",
    "shared": "role settings changed",
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


# user_config sections each role reads (every container gets the whole file, like PyMotor's ConfigMap); a change
# in a section only the others read rewrites the file in place but restarts nobody else. Top-level keys not
# listed under any role (version, motor_deploy_config, unknown ones) count for every container.
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
    return _sha(_canonical(entry))


def config_parts(containers: list, image_id: str, shared_spec: dict) -> dict:
    """The hash parts of the containers of one host: the image id, the spec digest of each plan entry and the digest
    of the role settings every container shares (the same text as Jinja's ``to_json(sort_keys=true) | hash``)."""
    shared = hashlib.sha256(json.dumps(shared_spec, sort_keys=True).encode("utf-8")).hexdigest()
    return {c["name"]: {"image": image_id, "shared": shared, "spec": spec_digest(c)} for c in containers}


def placement_label(container: dict) -> str:
    """The label the next plan reads back to keep the container where it is (see motor_plan ``previous``)."""
    return _canonical({"npu_ids": container.get("npu_ids") or [], "port_map": container.get("port_map") or {}})


DEFAULT_LOG_PATH = "/root/ascend/log"


def container_spec(container: dict, result: dict, settings: dict) -> dict:
    """The pymotor.ascend.motor_containers spec of a plan entry (no user_config: it may hold secrets).

    ``result`` is the reconcile result (config hash and parts labels), ``settings`` the role settings: image,
    command, job_id, log_root, weight_dir, mounts (engine mounts present on the container's host), extra_volumes,
    restart_policy, log_max_size, log_max_file.
    """
    name = container["name"]
    env = container.get("env") or {}
    config_dir = container["configmap_path"]
    volumes = [f"{config_dir}:{config_dir}:ro",
               f"{settings['log_root']}/{settings['job_id']}/{name}:{env.get('MOTOR_LOG_ROOT_PATH') or DEFAULT_LOG_PATH}:rw"]
    if container.get("needs_weights"):
        volumes.append(f"{settings['weight_dir']}:{settings['weight_dir']}:ro")
    if container.get("mounts_profile") == "engine":
        volumes += [f"{path}:{path}:ro" for path in settings.get("mounts") or []]
    volumes += list(settings.get("extra_volumes") or [])
    return {
        "name": name,
        "image": settings["image"],
        "command": list(settings.get("command") or []),
        "env": {str(k): str(v) for k, v in env.items()},
        "devices": list(container.get("devices") or []),
        "volumes": volumes,
        "ipc_mode": container.get("ipc_mode") or None,
        "shm_size": container.get("shm_size") or None,
        "restart_policy": settings["restart_policy"],
        "log_driver": "json-file",
        "log_options": {"max-size": str(settings["log_max_size"]), "max-file": str(settings["log_max_file"])},
        "group": container["tier"],  # containers of one tier start together on their host
        "labels": {
            "io.pymotor.job": settings["job_id"],
            "io.pymotor.role": container["role"],
            CONTAINER_LABEL: name,
            PORTS_LABEL: ",".join(str(p) for p in container.get("ports") or []),
            HASH_LABEL: result["hashes"][name],
            PARTS_LABEL: result["parts"][name],
            PLACEMENT_LABEL: placement_label(container),
        },
    }


def configmaps(containers: list, env_functions: dict) -> list:
    """The config directory (CONFIGMAP_PATH) of each plan entry, as M(pymotor.ascend.motor_containers) renders it:
    ``functions`` (script -> the set_*_env functions PyMotor's deployer injects into it; the container's env in
    set_common_env and in the function of its own role, the others empty) and ``files`` (user_config.json,
    env.json as PyMotor writes them)."""
    out = []
    for c in containers or []:
        env = c.get("env") or {}
        own = ("set_common_env", "set_%s_env" % c["role"])
        functions = {script: {name: env if name in own else {} for name in names}
                     for script, names in (env_functions or {}).items()}
        out.append({"name": c["name"], "path": c["configmap_path"], "functions": functions,
                    "files": {"user_config.json": _nice_json(c.get("user_config") or {}),
                              "env.json": _nice_json(env)}})
    return out


def _nice_json(value) -> str:
    """The text of Ansible's ``to_nice_json(indent=2)`` plus a newline."""
    return json.dumps(value, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"


def _name_of(docker_container: dict) -> str:
    labels = docker_container.get("Labels") or {}
    if labels.get(CONTAINER_LABEL):
        return labels[CONTAINER_LABEL]
    names = docker_container.get("Names") or [""]
    return str(names[0]).lstrip("/")


def previous_placement(existing: dict) -> dict:
    """``{host: [docker containers]}`` -> ``{name: {host, npu_ids, port_map}}`` from the placement labels.

    Unreadable labels are skipped: such a container is simply planned fresh."""
    out = {}
    for host, containers in sorted((existing or {}).items()):
        for item in containers or []:
            raw = (item.get("Labels") or {}).get(PLACEMENT_LABEL)
            if not raw:
                continue
            try:
                data = json.loads(raw)
            except (TypeError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            out[_name_of(item)] = {"host": host, "npu_ids": list(data.get("npu_ids") or []),
                                   "port_map": dict(data.get("port_map") or {})}
    return out


def _dependencies(plan: dict) -> dict:
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
        own[c["name"]] = _sha("\n".join(str(p.get(k, "")) for k in ("image", "spec", "shared")))
    deps = _dependencies(plan)
    hashes, labels = {}, {}
    for name, digest in own.items():
        dep_digest = _sha(",".join(own[d] for d in deps[name])) if deps[name] else "-"
        hashes[name] = digest if dep_digest == "-" else _sha(digest + "," + dep_digest)
        p = parts.get(name) or {}
        values = [str(p.get(k, ""))[:12] for k in ("image", "spec", "shared")] + [dep_digest[:12]]
        labels[name] = ",".join(f"{k}={v}" for k, v in zip(PART_NAMES, values))
    return hashes, labels


def _parse_parts(label) -> dict:
    out = {}
    for item in str(label or "").split(","):
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def _state(docker_container: dict) -> str:
    return str(docker_container.get("State") or "").lower()


def reconcile(plan: dict, parts: dict, existing: dict) -> dict:
    """Decide the action of every container; see the module docstring."""
    hashes, labels = container_hashes(plan, parts)
    deps = _dependencies(plan)
    planned = {c["name"]: c for c in plan.get("containers", [])}
    found = {}
    strays = []
    for host, containers in sorted((existing or {}).items()):
        for item in containers or []:
            name = _name_of(item)
            if name in planned and planned[name]["host"] == host and name not in found:
                found[name] = (host, item)
            else:
                strays.append((host, name, item))

    actions = {}
    for name, c in planned.items():
        row = {"container": name, "host": c["host"], "role": c["role"], "tier": c["tier"],
               "job_name": c.get("job_name"), "action": "keep", "reason": "", "mode": "none"}
        cur = found.get(name)
        if cur is None:
            moved = [stray[0] for stray in strays if stray[1] == name]
            row.update(action="create", reason=f"moved from {moved[0]}" if moved else "new", mode="parallel")
        else:
            labels_now = cur[1].get("Labels") or {}
            if labels_now.get(HASH_LABEL) == hashes[name]:
                if _state(cur[1]) != "running":
                    row.update(action="start", reason=f"was {_state(cur[1]) or 'not running'}", mode="parallel")
            else:
                old, new = _parse_parts(labels_now.get(PARTS_LABEL)), _parse_parts(labels[name])
                reasons = [PART_REASONS[k] for k in ("image", "spec", "shared") if old.get(k) != new.get(k)]
                if not reasons and old.get("deps") != new.get("deps"):
                    reasons = ["dependency changed"]
                row.update(action="recreate", reason=", ".join(reasons) or "config changed", mode="parallel")
        actions[name] = row

    # A dependency that restarts restarts its dependents; engines must be gone before their controller returns.
    for name, row in actions.items():
        restarting = [d for d in deps[name] if actions[d]["action"] in ("create", "recreate")]
        if not restarting or row["action"] == "create":
            continue
        why = "restarts with " + ", ".join(restarting)
        own = row["reason"] if row["action"] == "recreate" and row["reason"] != "dependency changed" else ""
        row.update(action="recreate", reason=f"{own}; {why}" if own else why,
                   mode="first" if row["role"] in ENGINE_ROLES else "parallel")

    # Engine instances whose own config changed roll one at a time; all pods of such an instance go together.
    rolling_jobs = []
    for name, row in actions.items():
        if row["role"] in ENGINE_ROLES and row["action"] == "recreate" and row["mode"] == "parallel":
            if row["job_name"] not in rolling_jobs:
                rolling_jobs.append(row["job_name"])
    for name, row in actions.items():
        if row["role"] in ENGINE_ROLES and row["job_name"] in rolling_jobs and row["mode"] != "first":
            if row["action"] in ("keep", "start"):
                row.update(action="recreate", reason=f"pod of {row['job_name']}, which restarts")
            row["mode"] = "rolling"

    conductor_stays = any(c["role"] == "kv_conductor" and actions[c["name"]]["action"] == "keep"
                          for c in planned.values())
    removals = []
    for host, name, item in strays:
        role = (item.get("Labels") or {}).get("io.pymotor.role", "")
        reason = f"moved to {planned[name]['host']}" if name in planned else "not in the plan any more"
        drain = (role in PUBLISHING_ROLES and name not in planned and bool(plan.get("affinity")) and conductor_stays)
        ports = [int(p) for p in str((item.get("Labels") or {}).get(PORTS_LABEL, "")).split(",") if p.strip().isdigit()]
        removals.append({"container": name, "host": host, "role": role, "tier": None, "job_name": None,
                         "action": "remove", "reason": reason, "mode": "drain" if drain else "first",
                         "ip": ((plan.get("hosts") or {}).get(host) or {}).get("ip"), "ports": ports})

    rows = list(actions.values()) + removals
    first, start = {}, {}
    for row in rows:
        if row["mode"] in ("first", "drain"):  # drained ones are unregistered before this removal
            first.setdefault(row["host"], []).append(row["container"])
        if row["mode"] in ("parallel", "first") and row["action"] != "remove":
            start.setdefault(row["host"], []).append(row["container"])
    rolling = []
    for job in rolling_jobs:
        members = [r for r in actions.values() if r["job_name"] == job and r["mode"] == "rolling"]
        rolling.append({"job_name": job, "role": members[0]["role"],
                        "reason": "; ".join(sorted({r["reason"] for r in members})),
                        "containers": [{"name": r["container"], "host": r["host"]} for r in members]})
    return {
        "hashes": hashes,
        "parts": labels,
        "tier_steps": tier_steps(plan),
        "actions": rows,
        "first": first,
        "drain": [r for r in removals if r["mode"] == "drain"],
        "start": start,
        "rolling": rolling,
        "changes": [r for r in rows if r["action"] != "keep"],
    }


def tier_steps(plan: dict) -> list:
    """The tiers in start order, grouped into steps: consecutive tiers whose containers all run on one and the same
    host start in one step (one module run there, in plan order); any other tier waits for the previous step on
    every host. With one control host: [[0, 1], [2]]; control plane spread over hosts: [[0], [1], [2]]."""
    by_tier = {}
    for c in plan.get("containers", []):
        by_tier.setdefault(c["tier"], set()).add(c["host"])
    steps, step_hosts = [], set()
    for tier in sorted(by_tier):
        if steps and len(step_hosts | by_tier[tier]) == 1:
            steps[-1].append(tier)
        else:
            steps.append([tier])
            step_hosts = set()
        step_hosts |= by_tier[tier]
    return steps


def drain_requests(drain: list, services: list) -> list:
    """The conductor ``/unregister`` bodies for the DP ranks the drained containers publish.

    ``services``: the conductor's ``GET /services`` list (Go field names: Endpoint, InstanceID, TenantID, DPRank)."""
    owned = {f"tcp://{d['ip']}:{port}" for d in drain or [] for port in d.get("ports", [])}
    out = []
    for svc in services or []:
        if not isinstance(svc, dict) or svc.get("Endpoint") not in owned:
            continue
        body = {"instance_id": svc.get("InstanceID"), "dp_rank": svc.get("DPRank", 0)}
        if svc.get("TenantID"):
            body["tenant_id"] = svc["TenantID"]
        out.append(body)
    return out


def drained_endpoints(drain: list, services: list) -> list:
    """Endpoints of the drained containers the conductor still lists (empty once the drain is complete)."""
    owned = {f"tcp://{d['ip']}:{port}" for d in drain or [] for port in d.get("ports", [])}
    return sorted(s.get("Endpoint") for s in services or [] if isinstance(s, dict) and s.get("Endpoint") in owned)


CHANGE_COLUMNS = [("host", "HOST"), ("container", "CONTAINER"), ("action", "ACTION"), ("mode", "HOW"),
                  ("reason", "WHY")]


def change_table(result: dict) -> str:
    """The containers a deploy touches (or would touch), one line each; a single line when nothing changes."""
    rows = (result or {}).get("changes") or []
    if not rows:
        return "no container changes: every container runs with its planned config"
    keys = [key for key, _title in CHANGE_COLUMNS]
    titles = [title for _key, title in CHANGE_COLUMNS]
    cells = [[str(r.get(key) or "") for key in keys] for r in rows]
    widths = [max(len(title), *(len(row[i]) for row in cells)) for i, title in enumerate(titles)]
    lines = ["  ".join(t.ljust(w) for t, w in zip(titles, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)
