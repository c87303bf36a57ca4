# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A rolling image upgrade (or rollback): what the roll waits for and what it prints (pure functions, no I/O).

An image change with the same own config recreates the control plane in its tier step and leaves the engines
running: upstream's node managers re-register with a restarted controller (``heartbeat_manager.py``
``_report_heartbeat_loop``: a 503 -> ``_reregister``; ``instance_assembler.py`` ``reregister``) and it adds their
instances to the coordinator again. The engine instances then roll one at a time (``diff.reconcile``: mode
``rolling``); before the first one stops, the whole service must serve again (``wait``), and the time from the start
of the tier steps until then is the control plane's unavailable window, printed at the end of the deploy.

Each instance of the roll stops all its pods first, waits ``SEPARATION_S`` and only then starts the new ones
(``roll_instance.yml``): upstream's controller answers a pod that registers while it still holds the instance ACTIVE
``Instance already registered`` (``motor/controller/core/instance_assembler.py:289-301``, ASSEMBLED meaning ACTIVE in
the instance manager, ``instance_assembler.py:400-403``, ``instance_manager.py:537-543``), and such a pod stays
stranded until the healers restart it (30 s / 75 s).
"""

from __future__ import annotations

from collections import Counter

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_ROLES, Problem

# When upstream's controller has separated an instance whose pods all stopped (ACTIVE -> INACTIVE, after which a new
# registration creates the instance anew). Upstream exposes no instance state on the controller's API (only
# /observability/inventory, which is off unless observability is enabled), so the roll waits this bound:
# - the heartbeat timeout of an ACTIVE instance: DEFAULT_ACTIVE_HEARTBEAT_TIMEOUT = 10 s
#   (motor/common/resources/instance.py:27, read by is_all_endpoints_alive, instance.py:293-299; the controller's
#   instance_config.instance_heartbeat_timeout is not passed to it, instance_manager.py:593);
# - the management loop that checks it every instance_manager_check_interval = 1 s (motor/config/controller.py:74,
#   instance_manager.py:583-601), counted twice (the check just missed, and the loop's own pass);
# - on a timeout it asks every node manager of the instance once before separating it (_handle_inactive ->
#   _check_node_managers_status, instance_manager.py:623-646, 687-730): a stopped pod's port refuses at once, a
#   black-holed one takes SafeHTTPSClient's 5 s timeout (motor/common/http/http_client.py:43).
# The heartbeats stop when the pods stop, so the bound counts from the end of the stop.
HEARTBEAT_TIMEOUT_S = 10
CHECK_INTERVAL_S = 1
STATUS_QUERY_S = 5
SEPARATION_S = HEARTBEAT_TIMEOUT_S + 2 * CHECK_INTERVAL_S + STATUS_QUERY_S

# After the restarted control plane reports ready with every engine normal, how long the coordinator may take to route
# every running instance before the roll restarts the controller (decide.lost_add_repair): the controller adds an
# instance as soon as its node managers re-registered (their next heartbeat after the 503 of the new controller,
# heartbeat_manager.py), the coordinator's metrics collector lists it within reuse_time = 3 s
# (motor/config/coordinator.py:155) plus one pass over every endpoint's /metrics.
ROUTES_SETTLE_S = 30


def image_only(old: dict, new: dict) -> bool:
    """Whether a container's hash parts (``labels.parse_parts``) changed for a new image with the same own config
    (the shared part names the image, so it may change too)."""
    return bool(old.get("image") and new.get("image") and old["image"] != new["image"]
                and old.get("spec") == new.get("spec"))


def outage_problems(plan: dict, result: dict) -> list:
    """The roll of an instance that is the only running instance of its role: a whole model load with that role
    serving nothing (every request fails meanwhile). ``[Problem]``, one per role. Instances created by this deploy
    do not serve yet; with two or more running instances the roll (one at a time) keeps the others serving."""
    rolling = {inst["job_name"]: inst for inst in result.get("rolling") or []}
    created = {r["job_name"] for r in result.get("actions") or [] if r["action"] == "create"}
    problems = []
    for role in ENGINE_ROLES:
        serving = sorted({i["job_name"] for i in plan.get("instances") or []
                          if i.get("role") == role and i.get("job_name") not in created})
        if len(serving) == 1 and serving[0] in rolling:  # with two or more, the roll keeps all but one serving
            problems.append(Problem(
                "motor_roll_allow_outage",
                "the roll restarts %s, the only running %s instance: no %s instance serves for a whole model load (%s)"
                % (", ".join(serving), role, role, rolling[serving[0]]["reason"]),
                "scale the role to 2 instances first and re-run (the roll then keeps one serving), or accept the "
                "outage with -e motor_roll_allow_outage=true"))
    return problems


def images_of(existing: dict) -> dict:
    """Container name -> the image it was created from (Docker's ``Image`` of the list)."""
    return {str(name)[1:]: str(item.get("Image") or "") for items in (existing or {}).values() for item in items or []
            for name in (item.get("Names") or [])[:1]}


def previous_image(existing: dict, names) -> str:
    """The image most of the containers ``names`` run."""
    images = images_of(existing)
    seen = Counter(images.get(n, "") for n in names)
    seen.pop("", None)
    return seen.most_common(1)[0][0] if seen else ""


def engine_names(result: dict) -> list:
    return [r["container"] for r in result.get("actions") or [] if r["role"] in ENGINE_ROLES]


def left_behind(result: dict, existing: dict) -> frozenset:
    """The engine containers of the roll that run another image than most of the job's engines: what a failed roll
    left behind (the broken new instance a rollback replaces). The wait before the roll leaves them out."""
    images = images_of(existing)
    usual = previous_image(existing, engine_names(result))
    return frozenset(m["name"] for inst in result.get("rolling") or [] for m in inst["containers"]
                     if images.get(m["name"], usual) != usual)


def upgrade_work(result: dict, existing: dict, image: str, readiness: list, repair: dict | None = None) -> dict:
    """What the roll of ``result`` (``diff.reconcile``) needs: ``control_plane``, the control-plane containers this
    deploy restarts; ``wait``, the readiness checks that must hold before the first engine instance stops (when the
    control plane restarts, else none; without the engines ``left_behind``); ``order``, the instances in roll
    order; ``previous_image`` and ``image`` (empty when the roll is no image change); ``rollback``, what to run
    when the roll stops; ``separation_s``, the seconds each instance waits between the stop of its pods and the
    start of the new ones (``SEPARATION_S``); ``repair``, when the control plane restarts: the check that the
    coordinator routes every running instance after ``wait`` and the controller's restart when it does not
    (``decide.lost_add_repair``; the KV conductor's checks then move from ``wait`` to its ``after``)."""
    rolling = result.get("rolling") or []
    control = [r["container"] for r in result.get("actions") or []
               if r["role"] not in ENGINE_ROLES and r["action"] in ("create", "recreate")]
    before = previous_image(existing, engine_names(result))
    upgrade = bool(rolling) and bool(before) and before != image
    rollback = ("roll back with the same deploy command plus -e motor_image=%s (the previous image is still on every "
                "host); the instances not yet replaced still run it" % before) if upgrade else ""
    repair = (repair or {}) if rolling and control else {}
    wait = [c for c in readiness if not repair or c["until"] != "endpoints"]
    return {"control_plane": control, "wait": wait if rolling and control else [],
            "order": [inst["job_name"] for inst in rolling], "previous_image": before if upgrade else "",
            "image": image if upgrade else "", "rollback": rollback, "separation_s": SEPARATION_S,
            "repair": repair}
