# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The decide step of a deploy, on the controller: the prechecks of every host, what happens to every container,
and the work each host and the controller do after it (pure, no I/O; the action motor_decide reads the inventory).

``decide()`` returns one dict the playbooks only loop over:

- ``problems``: every precheck problem of every host (the deploy stops before anything is written); ``warnings``:
  what the precheck lets deploy but shows (an NPU in Warning health, driver/firmware/CANN versions side by side);
- ``reconcile``: motor_reconcile's result (actions and reasons, ``first``, ``drain``, ``start``, ``rolling``);
- ``steps``: the tier steps in start order (``tiers``), the same list for every host, so that a loop over it runs
  each step on every host before the next (linear strategy);
- ``work``: per host ``steps``: per step the arguments of that host's pymotor.ascend.motor_containers run, or None
  (nothing to remove, render or start there); ``needs``: per container of the host the hosts it needs
  (``reconcile/degraded.py``: what stays unstarted when a host fails during the tier steps). When containers must go before any tier starts, the first step is
  that removal on every host. A host renders its config directories in its first step that has containers of it,
  together with that step's starts;
- ``upgrade``: what a roll waits for first and prints (``reconcile/upgrade.py``); ``readiness``: the motor_wait
  checks of the service; ``rolling``: per engine instance whose own config changed,
  its starts per host and its readiness checks; ``pairs``: the master/standby roles that move as a pair
  (``pair_work``); ``stalls`` and ``repairs``: the engine pods the readiness wait watches
  for upstream's registration race and, per engine instance, the runs that restart its pods (``stall_work``);
  ``containers``: name, host and role of every planned container
  (no user_config: the rescue of a readiness wait picks the log tails from it); ``states``: the state of every
  container of the job as the discovery read it (the summary's starting point);
- ``conductor_url``: the KV conductor's management URL (drain; the Mooncake conductor serves plain http only);
- ``registrations``: None, or what the conductor lacks of the ranks of running engines and the repair
  (``reconcile/registrations.py``: the KV watcher re-registers them, or the coordinator restarts).
"""

from __future__ import annotations

import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import kv_endpoint_ranges
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.routing import routes_expected
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import engine_endpoints, service_targets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.healer import is_host_agent, with_host_healers
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import weight_dir, plan_user_config
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.single import SINGLE_ROLE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.degraded import (
    unreachable_hosts,
    with_needs,
    without_hosts,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import reconcile, tier_steps
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.pair_roll import PAIR_STOP_TIMEOUT_S, handover, \
    pair_targets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import fold_files, hash_parts, runtime_settings
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import container_name
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.precheck import judge_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.registrations import repair_registrations
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.healer import with_instances
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import configmaps, container_spec, own_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.roll_drain import (
    DRAIN_TIMEOUT_S,
    drain_context,
    roll_drain,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.upgrade import (
    ROUTES_SETTLE_S,
    left_behind,
    outage_problems,
    upgrade_work,
)


def precheck(plan: dict, hosts: list, probes: dict, defaults: dict, overrides: dict) -> dict:
    """The prechecks of every host (``judge_hosts``) with the config hash parts of every container."""
    judged = judge_hosts(plan, hosts, probes, defaults, overrides)
    return {"problems": judged["problems"], "warnings": judged["warnings"], "parts": hash_parts(plan, judged),
            "hosts": judged["hosts"]}


def _check(name, until, tgt, timeout, waiting_for, endpoints=None, host=None) -> dict:
    """One motor_wait check of a target (``service_targets``): its URL and TLS files (``host``: the inventory host
    it talks to, named when it fails)."""
    check = dict(_target(tgt), name=name, until=until, timeout=int(timeout), waiting_for=list(waiting_for))
    if host:
        check["host"] = host
    if endpoints is not None:
        check["endpoints"] = endpoints
    return check


def tracks_ranks(plan: dict) -> bool:
    """Whether the KV conductor tracks the prefill/union DP ranks (KV-cache affinity with a conductor and events)."""
    return bool(plan.get("affinity") and plan.get("kv_conductor") and plan.get("kv_events"))


def _services(targets: dict) -> dict:
    return dict(targets["conductor"], url=targets["conductor"]["url"] + "/services")


def readiness_checks(plan: dict, timeouts: dict, skip: frozenset = frozenset()) -> list:
    """The motor_wait checks of a deploy: the controller answers, the coordinator is ready, the KV conductor lists
    every publishing DP rank; ``timeouts``: ``ready`` and ``port`` (seconds). https with the CA / client cert / key
    of the tls_config section that covers a port (``service_targets``). ``skip``: engine containers left out (what a
    failed roll left behind: ``upgrade.left_behind``)."""
    targets = service_targets(plan)
    checks = [
        _check("the controller port answers", "answers", targets["controller"], timeouts["port"],
               ["controller", "coordinator", SINGLE_ROLE], host=(plan.get("controller") or {}).get("host")),
        _check("the coordinator reports ready (instances assembled; model loading can take long)", "ready",
               targets["coordinator"], timeouts["ready"],
               ["coordinator", "controller", "prefill", "decode", "union", SINGLE_ROLE],
               host=(plan.get("coordinator") or {}).get("host")),
    ]
    if plan.get("standby"):  # HAProxy sends chat only to a master whose /readiness says "ready": true (plan/vip.py),
        # twice 1 s apart: until then the VIP's inference port closes connections without an answer
        checks.append(_check("the coordinator's inference port answers through the VIP", "answers",
                             targets["inference"], timeouts["ready"], ["coordinator", "controller"]))
    checks += engine_checks(plan, targets, timeouts,
                            [c["name"] for c in plan.get("containers") or [] if c["name"] not in skip] if skip else None)
    if tracks_ranks(plan):
        checks.append(_check("the KV conductor lists every prefill/union DP rank", "endpoints", _services(targets),
                             timeouts["ready"], ["kv_conductor", "coordinator", "prefill", "union"],
                             endpoints=[e for e in kv_endpoint_ranges(plan) if e["container"] not in skip],
                             host=(plan.get("kv_conductor") or {}).get("host")))
    return checks


def engine_checks(plan: dict, targets: dict, timeouts: dict, names=None) -> list:
    """Every engine endpoint (of the containers ``names``, default all) reports normal on its management /status:
    the coordinator reports ready with one instance of a role, and a node manager whose start command never came
    (upstream's controller drops one it cannot reach when it registers) still says its endpoints are normal."""
    checks = []
    for c in plan.get("containers") or []:
        if c.get("tier") != 2 or (names is not None and c["name"] not in names):
            continue
        for key, ep in engine_endpoints(c):
            checks.append(_check("the engine of %s (endpoint %s) reports normal" % (c["name"], key.split("/", 1)[1]),
                                 "status_ok", targets["engines"][key], timeouts["ready"], [c["role"]], host=c["host"]))
    return checks


def routes_checks(plan: dict, timeout, jobs=None, name="the coordinator routes every engine instance",
                  context: dict | None = None) -> list:
    """The ``routes`` check (none without a coordinator observability port) that the coordinator routes the engine
    instances ``jobs`` (default all): upstream's controller adds an instance to it once (``event_pusher.py:117-121``),
    so a coordinator that was not listening then reports ready with the others and never routes it. ``context``:
    ``roll_drain.drain_context(plan)`` (built here when not given)."""
    context = context or drain_context(plan)
    targets = context["targets"]
    expected = routes_expected(plan, jobs, context["pods"])
    if not targets.get("routes") or not expected:
        return []
    return [_check(name, "routes", targets["routes"], timeout, ["coordinator", "controller"], endpoints=expected,
                   host=(plan.get("coordinator") or {}).get("host"))]


def instance_checks(plan: dict, instance: dict, members: list, timeouts: dict, context: dict | None = None) -> list:
    """The motor_wait checks after one engine instance of a rolling restart: its node managers report normal, the
    KV conductor lists its DP ranks, the coordinator is ready and routes it (ready holds with the role's other
    instances alone). ``context``: ``roll_drain.drain_context(plan)``, built once per roll (built here when not
    given)."""
    context = context or drain_context(plan)
    targets = context["targets"]
    checks = [_check("the node manager of %s reports normal" % c["name"], "status_ok",
                     targets["node_managers"][c["name"]], timeouts["ready"], [c["role"]]) for c in members]
    checks += engine_checks(plan, targets, timeouts, [c["name"] for c in members])
    if tracks_ranks(plan):
        names = [c["name"] for c in members]
        checks.append(_check("the KV conductor lists the DP ranks of %s" % instance["job_name"], "endpoints",
                             _services(targets), timeouts["ready"], ["kv_conductor"],
                             endpoints=[e for e in kv_endpoint_ranges(plan) if e["container"] in names]))
    checks.append(_check("the coordinator reports ready", "ready", targets["coordinator"], timeouts["ready"],
                         ["coordinator"]))
    return checks + routes_checks(plan, timeouts["ready"], {instance["job_name"]},
                                  "the coordinator routes %s" % instance["job_name"], context)


def _spec_settings(plan: dict, settings: dict, mounts: list) -> dict:
    """What container_spec needs of a host's settings."""
    return {"image": settings["image"], "command": settings["command"], "job_id": plan["job_id"],
            "log_root": settings["log_root"], "weight_dir": weight_dir(plan_user_config(plan)),
            "extra_volumes": settings["extra_volumes"], "restart_policy": settings["restart_policy"],
            "log_max_size": settings["log_max_size"], "log_max_file": settings["log_max_file"], "mounts": mounts,
            "driver_dir": settings["driver_dir"], "cpusets": settings.get("cpusets") or {}, "init": bool(settings.get("init")),
            "etcd_tls_dir": settings.get("etcd_tls_dir") or "",
            **runtime_settings(settings)}


def _configmap(plan: dict, own: list, settings: dict, image_id: str, startup: dict, files: dict,
               running: frozenset) -> dict:
    """The configmap argument of motor_containers: the config directories of a host's containers (``running``: the
    containers that keep running unchanged, whose user_config.json stays as it is)."""
    return {
        "startup_dir": "%s/%s" % (startup["cache"], re.sub(r"[^A-Za-z0-9]+", "-", image_id)),
        "image": image_id, "in_image": startup["in_image"], "dir_mode": "0750", "file_mode": "0640",
        "dirs": ["%s/%s/%s" % (settings["log_root"], plan["job_id"], c["name"]) for c in own],
        "containers": configmaps(own, settings["env_functions"], files, running),
    }


def _spec(container: dict, result: dict, spec_settings: dict, restarting: set) -> dict:
    """The motor_containers spec of a container the step starts (``restart`` when the repair restarts it)."""
    spec = container_spec(container, result, spec_settings)
    return dict(spec, restart=True) if container["name"] in restarting else spec


def host_work(plan: dict, result: dict, judged: dict, steps: list, startup: dict, files: dict | None = None) -> dict:
    """Per host its motor_containers run per step (None: no run). When any host removes containers before the tiers
    start, the first step is that removal (``tiers`` empty), on every host before any tier starts. A host's healer
    (plan/healer.py) joins its host's last step with containers there, started after them (its tier is the last
    start group of the run): what it watches runs first, without one more run on every host."""
    work = {}
    restarting = {r["container"] for r in result.get("actions") or [] if r.get("action") == "restart"}
    running = frozenset(r["container"] for r in result.get("actions") or [] if r.get("action") == "keep")
    first = {h: list(names) for h, names in (result.get("first") or {}).items() if names}
    for host in judged["hosts"]:
        own = judged["own"].get(host) or []
        settings = judged["settings"][host]
        spec_settings = _spec_settings(plan, settings, judged["hosts"][host]["mounts_present"])
        starting = set((result.get("start") or {}).get(host) or [])
        rendered = False
        runs = []
        if first:
            runs.append({"job_id": plan["job_id"], "remove": first[host], "containers": []} if host in first else None)
        healers = [c for c in own if is_host_agent(c)]  # the healer and its socket proxy
        others = [c for c in own if not is_host_agent(c)]
        last = max((i for i, tiers in enumerate(steps) if any(c["tier"] in tiers for c in others)),
                   default=len(steps) - 1)
        for index, tiers in enumerate(steps):
            mine = [c for c in others if c["tier"] in tiers] + (healers if index == last else [])
            run = {"job_id": plan["job_id"],
                   "containers": [_spec(c, result, spec_settings, restarting) for c in mine if c["name"] in starting]}
            if mine and not rendered:
                run["configmap"] = _configmap(plan, own, settings, judged["hosts"][host]["image_id"], startup, files,
                                              running)
                rendered = True
            runs.append(run if run["containers"] or "configmap" in run else None)
        work[host] = {"steps": runs}
    return work


def engine_step_waits(plan: dict, timeouts: dict) -> list:
    """The motor_wait checks run once before the first step that starts engines without the control plane: the
    controller, the coordinator and the KV conductor answer. Upstream's controller pushes an assembled instance to
    the coordinator once (a coordinator still starting misses it and never reports ready), the coordinator
    registers each prefill DP rank with the conductor once, and a node manager that cannot reach the controller
    gives up after 5 heartbeats: engines that come up before the control plane listens are lost to it. None when
    no container of its own runs the controller (deploy_mode single_container: it starts with the engines, in the
    one container whose script starts it first, plan/single.py)."""
    if not any(c.get("role") == "controller" for c in plan.get("containers") or []):
        return []
    targets = service_targets(plan)
    checks = [_check("the controller answers before the engines start", "answers", targets["controller"],
                     timeouts["port"], ["controller"])]
    if targets.get("coordinator"):
        checks.append(_check("the coordinator answers before the engines start", "answers", targets["coordinator"],
                             timeouts["port"], ["coordinator"]))
    if tracks_ranks(plan):
        checks.append(_check("the KV conductor answers before the engines start", "answers", _services(targets),
                             timeouts["port"], ["kv_conductor"]))
    return checks


def step_list(result: dict, steps: list, waits: list | None = None) -> list:
    """The steps every host runs in order: the removal first when there is one, then the tier steps. The first step
    that starts engines (tier 2) without the control plane (tier 1) carries ``wait``: ``waits``, checked once on the
    controller before the step (when one step starts both, a host runs them in tier order itself)."""
    named = [{"tiers": [], "name": "remove what must go first"}] if any((result.get("first") or {}).values()) else []
    named += [{"tiers": tiers, "name": "tiers " + ", ".join(str(t) for t in tiers)} for tiers in steps]
    first_engines = next((step for step in named if 2 in step["tiers"]), None)
    if first_engines is not None and 1 not in first_engines["tiers"] and waits:
        first_engines["wait"] = list(waits)
    return [dict(step, index=i) for i, step in enumerate(named)]


def _instance_runs(plan: dict, members: list, result: dict, judged: dict, restart: bool = False) -> list:
    """The motor_containers runs (one per host) that start the pods ``members`` of one engine instance; with
    ``restart``, containers that already run as planned restart."""
    starts = {}
    for c in members:
        settings = judged["settings"][c["host"]]
        spec = container_spec(c, result, _spec_settings(plan, settings, judged["hosts"][c["host"]]["mounts_present"]))
        starts.setdefault(c["host"], []).append(dict(spec, restart=True) if restart else spec)
    return [{"host": host, "job_id": plan["job_id"], "containers": specs} for host, specs in starts.items()]


def idle_checks(plan: dict, targets: dict, members: list, timeout) -> list:
    """After an instance's ``del``: each of its engine endpoints reports no running and no waiting request (vLLM's
    gauges on its management /metrics, the address upstream's coordinator reads, ``metrics_collector.py:600``), for
    at most ``timeout`` s (``motor_roll_drain_timeout``)."""
    checks = []
    for c in members:
        for ep in c.get("endpoints") or []:
            status = targets["engines"]["%s/%s" % (c["name"], ep["dp_rank"])]
            metrics = dict(status, url=status["url"].rsplit("/", 1)[0] + "/metrics")
            checks.append(_check("the engine of %s (endpoint %d) holds no request" % (c["name"], ep["local_index"]),
                                 "idle", metrics, timeout, [c["role"]], host=c["host"]))
    return checks


def rolling_work(plan: dict, result: dict, judged: dict, timeouts: dict) -> list:
    """Per engine instance of the rolling restart: its motor_containers runs per host, its readiness checks and how
    it leaves the coordinator's routing before its pods stop (``roll_drain``)."""
    by_name = {c["name"]: c for c in plan.get("containers") or []}
    drains = drain_context(plan) if result.get("rolling") else None
    out = []
    for instance in result.get("rolling") or []:
        members = [by_name[m["name"]] for m in instance["containers"] if m["name"] in by_name]
        stuck = [{"name": c["name"], "host": c["host"]} for c in members]
        stuck += [{"name": c["name"], "host": c["host"]} for c in by_name.values() if c["role"] == "coordinator"]
        out.append({"job_name": instance["job_name"], "reason": instance["reason"],
                    "runs": _instance_runs(plan, members, result, judged),
                    "checks": instance_checks(plan, instance, members, timeouts, drains), "stuck": stuck,
                    "drain": roll_drain(plan, instance, members, drains)})
        if out[-1]["drain"]["how"] == "del":
            out[-1]["drain"]["idle"] = idle_checks(plan, drains["targets"], members,
                                                   timeouts.get("drain", DRAIN_TIMEOUT_S))
    return out


def pair_work(plan: dict, result: dict, judged: dict, timeouts: dict) -> list:
    """Per master/standby role that moves as a pair (``reconcile``'s ``pairs``, pair_roll.py), in the order the
    controller then the coordinator: its ``replicas`` (name, host, own readiness and liveness URLs, the
    motor_containers ``runs`` that recreate it), ``vip_readiness``: the role's readiness through the VIP (HTTP 200:
    a master answers there again), and ``after``: for the coordinator, that it reports ready and routes every instance
    again, before the old master is recreated."""
    by_name = {c["name"]: c for c in plan.get("containers") or []}
    targets = service_targets(plan)
    out = []
    for role in ("controller", "coordinator"):
        names = (result.get("pairs") or {}).get(role)
        if not names:
            continue
        replicas = [dict(r, runs=_instance_runs(plan, [by_name[r["name"]]], result, judged))
                    for r in pair_targets(plan, role) if r["name"] in by_name]
        after = []
        if role == "coordinator":  # a new coordinator master answers 200 before it has its instances (ready: false)
            after = [_check("the new coordinator master reports ready", "ready", targets[role], timeouts["ready"],
                            [role, "controller"])]
            after += routes_checks(plan, timeouts["ready"], None, "the new coordinator master routes every instance")
        out.append({"role": role, "replicas": replicas, "stop_timeout": PAIR_STOP_TIMEOUT_S, "after": after,
                    "vip_readiness": targets[role]["url"], "handover": handover(plan, role)})
    return out


def _upgrade(plan: dict, result: dict, judged: dict, existing: dict, timeouts: dict) -> dict:
    skip = left_behind(result, existing)
    readiness = readiness_checks(plan, timeouts, skip)
    return upgrade_work(result, existing, next(iter(judged["settings"].values()), {}).get("image", ""), readiness,
                        lost_add_repair(plan, result, judged, skip, timeouts, readiness))


def lost_add_repair(plan: dict, result: dict, judged: dict, skip: frozenset, timeouts: dict, readiness: list) -> dict:
    """After the control plane restarted for a roll, before the first instance stops: ``routes``, the check that the
    coordinator routes every running instance (but ``skip``) within ``upgrade.ROUTES_SETTLE_S``; ``runs``, the
    controller's restart when it does not; ``after``, the same check within the ready timeout with the KV conductor's
    checks of ``readiness`` (a prefill instance whose add was lost never has its ranks registered, so they wait for
    the repair: ``upgrade_work`` leaves them out of its ``wait``). The
    controller and the coordinator restart together, and an instance whose node managers re-registered before the
    new coordinator listened had its ``add`` refused, never retried
    (``motor/controller/api_client/coordinator_api_client.py:48-51``, ``event_pusher.py:144-182``); a coordinator
    ready with the other instances gets no ``set`` (``event_pusher.py:184-235``). A restarted controller takes every
    instance in anew (its node managers re-register) and adds each to the coordinator, which now listens."""
    jobs = {c["job_name"] for c in plan.get("containers") or [] if c["name"] not in skip}
    context = drain_context(plan)
    routes = routes_checks(plan, ROUTES_SETTLE_S, jobs, context=context)
    controller = [c for c in plan.get("containers") or [] if c["role"] == "controller"]
    if not routes or not controller:
        return {}
    return {"routes": routes, "runs": _instance_runs(plan, controller, result, judged, restart=True),
            "after": routes_checks(plan, timeouts["ready"], jobs, context=context)
            + [c for c in readiness if c["until"] == "endpoints"]}


def stall_work(plan: dict, result: dict, judged: dict) -> dict:
    """What the readiness wait watches for the upstream registration race, and its repair: ``stalls``, per engine
    pod its node manager and engine targets (motor_wait's ``stalls``); ``repairs``, per engine instance (job name)
    the motor_containers runs that restart all its pods (upstream keeps the pods it did not drop in an instance
    that never assembles, so they must register again too)."""
    targets = service_targets(plan)
    stalls, members = [], {}
    for c in plan.get("containers") or []:
        if c.get("tier") != 2 or c["name"] not in targets["node_managers"]:
            continue
        engines = [targets["engines"]["%s/%s" % (c["name"], ep["dp_rank"])] for ep in c.get("endpoints") or []]
        if not engines:
            continue
        stalls.append({"instance": c["job_name"], "container": c["name"],
                       "node_manager": _target(targets["node_managers"][c["name"]]), "engines": [_target(e) for e in engines]})
        members.setdefault(c["job_name"], []).append(c)
    return {"stalls": stalls,
            "repairs": {job: _instance_runs(plan, pods, result, judged, restart=True) for job, pods in members.items()}}


def _target(tgt: dict) -> dict:
    """A target (``service_targets``) as motor_wait's ``stalls`` take it."""
    out = {"url": tgt["url"]}
    if tgt.get("tls"):
        out["tls"] = {k: tgt["tls"].get(k) or "" for k in ("ca_file", "cert_file", "key_file", "passwd_file")}
    return out


def discovered_states(probes: dict) -> dict:
    """host -> container name -> state, as the discovery read the job's containers."""
    return {host: {container_name(c): c.get("State") for c in (probe or {}).get("containers") or []}
            for host, probe in (probes or {}).items()}


def decide(plan: dict, hosts: list, probes: dict, settings: dict, overrides: dict, options: dict) -> dict:
    """The decision of a deploy (see the module docstring). ``hosts``: the PyMotor hosts in inventory order;
    ``probes``: host -> motor_host_probe result; ``settings``: setting variable -> the controller's value;
    ``overrides``: host -> its own values of those variables; ``options``: ``startup_cache``,
    ``startup_in_image``, ``ready_timeout``, ``port_timeout``, ``watcher_script`` (the KV watcher's code),
    ``registrations`` (the conductor's ``GET /services`` answer, or None: a re-run repairs what it lost),
    ``max_fail_percentage`` (hosts not read or without Docker up to that share get no work: ``unreachable``),
    ``allow_outage`` (roll the only running instance of a role; without it that roll is a problem: ``outage_problems``),
    ``drain_timeout`` (seconds a rolled instance's engines may take to finish their requests after its ``del``)."""
    plan = with_host_healers(plan)  # one healer container per host (plan/healer.py)
    judged = judge_hosts(plan, hosts, probes, settings, overrides)
    unreachable = unreachable_hosts(judged, probes, hosts, options.get("max_fail_percentage") or 0)
    judged, dummy = without_hosts(judged, {}, unreachable)
    containers = plan.get("containers") or []
    decision = {"job_id": plan.get("job_id"), "problems": judged["problems"], "warnings": judged["warnings"],
                "containers": [
        {"name": c["name"], "host": c["host"], "role": c["role"]} for c in containers]}
    if judged["problems"]:
        return decision
    existing = {host: (probes.get(host) or {}).get("containers") or [] for host in hosts}
    files = own_files(plan, options.get("watcher_script") or "")
    result = reconcile(plan, fold_files(hash_parts(plan, judged, existing), files), existing)
    outage = [] if options.get("allow_outage") else outage_problems(plan, result)
    if outage:  # before anything changes: the roll would leave a role with no serving instance
        decision["problems"] = list(decision["problems"]) + [str(problem) for problem in outage]
        return decision
    registrations = repair_registrations(plan, result, options.get("registrations"))
    steps = tier_steps(plan)
    timeouts = {"ready": options["ready_timeout"], "port": options["port_timeout"],
                "drain": options.get("drain_timeout", DRAIN_TIMEOUT_S)}
    startup = {"cache": options["startup_cache"], "in_image": options["startup_in_image"]}
    conductor = service_targets(plan)["conductor"]
    work = host_work(plan, result, judged, steps, startup, with_instances(files, plan))
    decision.update({
        "reconcile": result,
        "steps": step_list(result, steps, engine_step_waits(plan, timeouts)),
        "work": with_needs(without_hosts(judged, work, unreachable)[1], plan, unreachable),
        "unreachable": unreachable,
        "readiness": readiness_checks(plan, timeouts),
        "rolling": rolling_work(plan, result, judged, timeouts),
        "pairs": pair_work(plan, result, judged, timeouts),
        "upgrade": _upgrade(plan, result, judged, existing, timeouts),
        **stall_work(plan, result, judged),
        "states": discovered_states({h: probes.get(h) for h in hosts}),
        "conductor_url": conductor["url"] if conductor else "",
        "registrations": registrations,
    })
    return decision
