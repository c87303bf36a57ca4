# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The healer of a pymotor.ascend job's controller container, and its repair rule (standard library only).

Upstream's controller re-sends its instances to a restarted coordinator only through a SET event, and its
``_event_consumer`` skips that event unless some instance has role ``prefill``
(``motor/controller/core/event_pusher.py``): in PD hybrid (union instances only) a coordinator that restarted, or
missed an ``add`` while it was down, stays ``ready: false`` for good while every engine serves. A controller that
restarts recovers every instance from its node managers' re-registrations and adds each one to the coordinator
anew (``instance_assembler.py`` ``reregister``, ``instance_manager.py`` ``_handle_active`` -> INSTANCE_READY ->
``EventPusher.update``): that is the repair.

This file runs in two places:
- on the Ansible controller, where ``stranded_coordinator`` is the one rule (unit tests, the deploy's hints);
- inside the job's controller container, copied verbatim into its config directory as ``motor_healer.py`` and
  started in the background by the controller's ``boot.sh`` (``reconcile/specs.py``). Every ``interval`` seconds it
  reads the coordinator's ``/readiness`` and every prefill/union engine's management ``/status``; when the rule
  holds for ``settle`` seconds in a row, and the backoff allows, it logs one line and ends the controller process,
  so the container exits and Docker's restart policy starts it again (host-local: no Docker API, nothing listens).
  It never acts on its own container's first ``settle`` seconds, nor while engines load (none answers normal).
- inside every engine pod (same copy, with ``motor_health.py`` next to it for ``pod_verdict``), watching its own
  node manager and engines.

An engine pod that crashed (its restart policy starts it again) registers anew and upstream's controller answers
"already registered" for its assembled instance (``instance_assembler.py`` ``register``); the node manager then waits
for a start command that never comes, answers normal with no endpoint, and the controller, asking it after the
heartbeat timeout, keeps the instance ACTIVE (``instance_manager.py`` ``_handle_inactive``). Two repairs on the same
rule as the readiness wait's (``motor_health.pod_verdict``): the pod ends itself after ``POD_SETTLE`` s (it registers
anew: enough for a pod the controller dropped at start), and the controller's healer ends the controller after
``CONTROLLER_POD_SETTLE`` s (it forgets the instance; the pod's next start registers it anew).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import sys
import time
import urllib.parse

try:  # in the collection (the Ansible controller, unit tests)
    from ansible_collections.pymotor.ascend.plugins.module_utils import motor_heal_rules as rules
    from ansible_collections.pymotor.ascend.plugins.module_utils import motor_npu_smi as npu_smi
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import (
        pod_verdict, replica_role, routed_instances, unrouted)
except ImportError:  # in a container's config directory, next to its copies (reconcile/healer.py)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import motor_heal_rules as rules  # type: ignore[no-redef]
    import motor_npu_smi as npu_smi  # type: ignore[no-redef]
    from motor_health import pod_verdict, replica_role, routed_instances, unrouted  # type: ignore[no-redef]

# roles whose live instance makes upstream's coordinator ready (only_prefill is ready; only_decode is not)
READY_ROLES = ("prefill", "union")
DEFAULTS = {"interval": 5, "settle": rules.rule("lost_add")["budget"]["settle"], "stop_grace": 10,
            "state": "/var/tmp/motor_healer.json"}
# an engine pod whose start command never came ends itself after POD_SETTLE s (it registers anew); the controller
# restarts after CONTROLLER_POD_SETTLE s of the same (it still holds the pod's instance as assembled), later than the
# pod's own repair so that a pod the controller merely dropped at start (the registration race) costs no restart of it
POD_SETTLE = rules.rule("stalled_pod")["budget"]["settle"]
CONTROLLER_POD_SETTLE = rules.rule("stalled_pod_controller")["budget"]["settle"]
# an engine pod's repair first freezes its processes (SIGSTOP) for POD_HOLD s, then ends them: its node manager does
# not answer for that long, so the controller, which asks it on every round of an instance whose heartbeats timed out
# (instance_manager.py _handle_inactive), surely finds it down and separates the instance (DEL to the coordinator);
# a restart alone keeps it down for about a second, which a loaded controller misses, and then the controller's own
# healer restarts the controller, which leaves the stale instance in the coordinator
POD_HOLD = rules.rule("stalled_pod")["hold"]
STALLED_POD = ("its node manager answers normal with no endpoint and none of its engines answers: its start command "
               "never came (upstream's controller answers the registration of an assembled instance 'already "
               "registered', instance_assembler.py register, and keeps it ACTIVE while its node managers answer "
               "normal, instance_manager.py _handle_inactive)")


def coordinator_not_ready(readiness, instances):
    """Rule ``coordinator_not_ready``: why the controller must restart, or None. ``readiness``: the coordinator's
    /readiness answer (a dict; None when it did not answer 200 with JSON); ``instances``: ``{instance job name:
    {"role": ..., "live": bool (every engine answers normal), "ips", "need"}}``. The coordinator says ready: false
    while a prefill/union instance serves (upstream's SET rule, above)."""
    if not isinstance(readiness, dict) or readiness.get("ready") is not False:
        return None
    live = sorted(name for name, inst in instances.items() if inst.get("live") and inst.get("role") in READY_ROLES)
    if not live:
        return None
    return ("the coordinator says ready: false while instance(s) %s serve: upstream's controller re-sends its "
            "instances only with a prefill instance (event_pusher.py _event_consumer); a restarted controller "
            "adds each one again" % ", ".join(live))


def unrouted_instances(readiness, instances, routed):
    """``{instance: what is missing}`` of the live instances a ready coordinator does not route (``routed``:
    ``motor_health.routed_instances`` of its /metrics?type=dp, None when not read): upstream's controller adds an
    instance once (``event_pusher.py:117-121``) and does not retry an add the coordinator refused
    (``coordinator_api_client.py:48-51``), e.g. one sent while a restarted coordinator did not listen yet, and a ready
    coordinator gets no SET. Only a candidate of rule ``lost_add``: the coordinator also leaves out an instance one
    of whose engines answered its /metrics late (``Healer._lost_adds``)."""
    if not isinstance(readiness, dict) or readiness.get("ready") is not True or routed is None:
        return {}
    out = {}
    for name, inst in sorted(instances.items()):
        if inst.get("live") and inst.get("ips"):
            missing = unrouted(routed, [dict(name=name, role=inst.get("role"), ips=inst.get("ips"),
                                             need=inst.get("need"))])
            if missing:
                out[name] = missing[0]
    return out


def lost_add_why(missing):
    return ("the coordinator is ready but does not route live instance(s) (%s) over %d of its collector's passes "
            "while every engine of them answered this healer's /metrics read within %g s: upstream's controller "
            "adds an instance once and does not retry a refused add (event_pusher.py, coordinator_api_client.py); a "
            "restarted controller adds each one again"
            % ("; ".join(missing), rules.UNROUTED_PASSES, rules.ENGINE_METRICS_TIMEOUT))


def stranded_coordinator(readiness, instances, routed=None):
    """Rules ``coordinator_not_ready`` and (one pass of) ``lost_add`` on one observation: why, or None."""
    missing = unrouted_instances(readiness, instances, routed)
    return coordinator_not_ready(readiness, instances) or (lost_add_why(list(missing.values())) if missing else None)


def metrics_target(status_target):
    """The management ``/metrics`` target of an engine whose ``/status`` target is given (same port and TLS: the
    address upstream's coordinator reads, ``metrics_collector.py:600``)."""
    url = status_target["url"]
    return dict(status_target, url=url[:-len("/status")] + "/metrics" if url.endswith("/status") else url)


def key_password(tls):
    """The password of an encrypted ``key_file``: the stripped text of ``passwd_file`` when it exists, as upstream
    reads it (``password_utils.py:45-47``, ``cert_util.py:797-805``); None otherwise."""
    path = (tls or {}).get("passwd_file")
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip() or None


_TLS_ERRORS = {}  # a TLS setup error, logged once per set of files


def _context(tls):
    if not tls:
        return None
    ctx = ssl.create_default_context(cafile=tls.get("ca_file") or None)
    ctx.check_hostname = bool(tls.get("check_hostname"))
    if tls.get("cert_file"):
        password = key_password(tls) or ""  # never None: OpenSSL would ask a terminal for an encrypted key's password
        ctx.load_cert_chain(tls["cert_file"], tls.get("key_file") or None, password=lambda: password)
    return ctx


def _fetch(target, timeout=3):
    """(HTTP status, body bytes) of GET ``target["url"]``; (-1, None) when nothing answers (http.client: this file
    runs alone). A TLS setup that fails (a missing file, a wrong key password) is nothing answering too, logged once:
    the repair rule never acts on what it could not read."""
    url = urllib.parse.urlsplit(target["url"])
    conn = None
    try:
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout,
                                               context=_context(target.get("tls")))
        else:
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        conn.request("GET", url.path + ("?" + url.query if url.query else ""))
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if conn is None:
            key = json.dumps(target.get("tls"), sort_keys=True)
            if key not in _TLS_ERRORS:
                _TLS_ERRORS[key] = str(exc)
                log("cannot read %s" % target["url"], "TLS setup failed: %s" % exc)
        return -1, None
    finally:
        if conn is not None:
            conn.close()


def get_answer(target, timeout=3):
    """(HTTP status, JSON body or None) of GET ``target["url"]``; (-1, None) when nothing answers."""
    status, body = _fetch(target, timeout)
    try:
        return status, json.loads(body) if body is not None else None
    except ValueError:
        return status, None


def get_text(target, timeout=3):
    """The text of a 200 answer to GET ``target["url"]``, else None."""
    status, body = _fetch(target, timeout)
    return body.decode("utf-8", "replace") if status == 200 else None


def get_json(target, timeout=3):
    """The JSON body of a 200 answer to GET ``target["url"]``, else None."""
    status, body = get_answer(target, timeout)
    return body if status == 200 else None


def pod_state(pod, answer=get_answer):
    """``pod_verdict`` of one engine pod (``{"node_manager": target, "engines": [targets]}``) now."""
    status, body = answer(pod["node_manager"])
    return pod_verdict(status, body, lambda: any(answer(t)[0] != -1 for t in pod["engines"]))


def observe(config, get=get_json, text=get_text):
    """(coordinator readiness, {instance: {"role", "live", "ips", "need"}}, the instances it routes or None) now:
    the routes are read only from a ready coordinator, when the config names its /metrics?type=dp."""
    instances = {}
    for name, inst in (config.get("instances") or {}).items():
        answers = [get(t) for t in inst["engines"]]
        live = bool(answers) and all(isinstance(a, dict) and a.get("status") == "normal" for a in answers)
        instances[name] = {"role": inst["role"], "live": live, "ips": inst.get("ips"), "need": inst.get("need"),
                           "engines": inst["engines"]}
    readiness = get(config["coordinator"])
    routed = None
    if config.get("routes") and isinstance(readiness, dict) and readiness.get("ready") is True:
        answer = text(config["routes"])
        routed = routed_instances(answer) if answer is not None else None
    return readiness, instances, routed


def log(what, why, now=None):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now if now is not None else time.time()))
    print("%s motor-healer: %s (%s)" % (stamp, what, why), flush=True)


def _load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _save(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(state, handle)
    os.replace(tmp, path)


def end_controller(grace, own_pid=None, proc="/proc", kill=os.kill, sleep=time.sleep, hold=0):
    """End every process of the container but PID 1 (upstream's boot.sh, which then ends) and this one: SIGTERM,
    SIGKILL after ``grace`` s. With ``hold``: SIGSTOP them first, and SIGKILL them ``hold`` s later (nothing of the
    container answers meanwhile). Returns the pids signalled."""
    own_pid = own_pid or os.getpid()
    pids = sorted(int(p) for p in os.listdir(proc) if p.isdigit() and int(p) not in (1, own_pid))
    if hold:
        for pid in pids:
            try:
                kill(pid, signal.SIGSTOP)
            except OSError:
                pass
        sleep(hold)
    for sig in (signal.SIGKILL,) if hold else (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                kill(pid, sig)
                alive.append(pid)
            except OSError:
                pass
        if sig == signal.SIGTERM and alive:
            sleep(grace)
    return pids


def reaches(target, timeout=rules.ENGINE_METRICS_TIMEOUT):
    """Whether ``target`` answers 200 within ``timeout`` s (the coordinator's own timeout for an engine's /metrics)."""
    return _fetch(target, timeout)[0] == 200


def write_metrics(path, labels, alarm, actions):
    """The healer's Prometheus text file (node_exporter's textfile collector format): ``motor_healer_alarm`` 1 while
    a rule holds that the budget no longer lets it repair (the alert rule ``MotorHealerBudgetSpent`` reads it), and
    its actions of the last hour. Nothing listens: a site's node_exporter reads the file."""
    if not path:
        return
    text = "".join(str(line) + "\n" for line in (
        "# HELP motor_healer_alarm 1 while a healing rule holds and the healer's restart budget is spent",
        "# TYPE motor_healer_alarm gauge",
        "motor_healer_alarm{%s} %d" % (",".join('%s="%s"' % kv for kv in sorted(labels.items())), 1 if alarm else 0),
        "# HELP motor_healer_actions_last_hour the healer's repairs in the last hour",
        "# TYPE motor_healer_actions_last_hour gauge",
        "motor_healer_actions_last_hour{%s} %d" % (",".join('%s="%s"' % kv for kv in sorted(
            (k, v) for k, v in labels.items() if k != "rule")), actions)))
    try:
        tmp = path + ".tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        log("metrics file not written", "%s: %s" % (path, exc))


def record_npu_health(path, npus, now, read=None):
    """An engine pod's reading of its planned NPUs' health for its host's healer (rule ``npu_unhealthy`` of
    ``motor_heal_rules``, which reports and never acts): ``{"time", "npus": {id: health}, "error"}`` in ``path``, a
    file in the pod's log directory on the host. The pod has its NPUs and the driver's read-only mounts (npu-smi
    lists only the devices of the container it runs in), the host's healer neither. An NPU npu-smi does not list
    is ``absent``. Returns the record."""
    health, error = (read or npu_smi.HealthReader())()
    record = {"time": now, "npus": {str(n): health.get(str(n), "absent" if not error else "unread") for n in npus},
              "error": error}
    try:
        _save(path, record)
    except OSError as exc:
        log("NPU health not recorded", "%s: %s" % (path, exc), now)
    return record


class Healer:
    """The controller's healer (``coordinator``, ``instances_file``) or an engine pod's (``pod``, ``node_manager``,
    ``engines``, ``peers``, ``controller``). Each round it runs its agent's rules of ``motor_heal_rules.RULES`` in the
    table's order; the first whose condition held for its settle acts, within its budget."""

    def __init__(self, config, get=get_json, clock=time.time, act=None, answer=get_answer, text=get_text,
                 reach=reaches):
        self.config = dict(DEFAULTS, **config)
        self.get, self.clock, self.answer, self.text, self.reach = get, clock, answer, text, reach
        self.act = act or (lambda: end_controller(self.config["stop_grace"], hold=self.config.get("hold", 0)))
        self.agent = "pod" if self.config.get("pod") else "controller"
        self.checks = {"stalled_pod_controller": self._stalled_pod_controller, "coordinator_not_ready":
                       self._coordinator_not_ready, "lost_add": self._lost_add, "stalled_pod": self._stalled_pod}
        self.since = {}  # rule -> when its condition started to hold (in a row)
        self.stalled = {}  # pod -> since when its start command has not come (reset only once it came)
        self.served = False  # this round a watched pod got its start command (its own healer: the repair worked)
        self.unrouted = {}  # instance -> the times (one per collector pass) it was seen unrouted, its engines reached
        self.controller_up = None  # pod: when the controller answered again after not answering (None: not seen)
        self.controller_seen_down = False
        self.alarm = None  # the rule alarmed on, while the budget is spent

    def _stalled_pods(self, pods, now, groups=None, peers=None):
        """The pods stalled now, with how long (a pod that restarts, "unknown" for a moment, stays stalled). With
        ``groups`` (instance -> its pod names): a pod whose instance has a pod that does not answer at all is not
        counted, it waits for that peer (a host down), which no restart here repairs. With ``peers`` (an engine pod's
        own healer: the other pods of its instance): it waits while a peer is unknown or not started."""
        out = {}
        self.served = False
        verdicts = {name: pod_state(pod, self.answer) for name, pod in sorted(pods.items())}
        waiting = {m for members in (groups or {}).values() if any(verdicts.get(m) == "unknown" for m in members)
                   for m in members}
        if peers and "stalled" in verdicts.values() and any(  # peers asked only when it matters
                pod_state(peer, self.answer) != "started" for _name, peer in sorted(peers.items())):
            waiting |= set(pods)
        for name, verdict in verdicts.items():
            if verdict == "started":
                self.stalled.pop(name, None)
                self.served = True
            elif verdict == "stalled" and name in waiting:
                self.stalled.pop(name, None)
            elif verdict == "stalled":
                out[name] = now - self.stalled.setdefault(name, now)
        return out

    def _held(self, name, why, now):
        """(why, how long rule ``name`` has held) with ``why`` true, else None (the hold starts anew)."""
        if not why:
            self.since.pop(name, None)
            return None
        return why, now - self.since.setdefault(name, now)

    def _instances(self):
        config = self.config
        if config.get("instances_file"):  # rewritten by a deploy that scales: read every round
            return _load(config["instances_file"])
        return config.get("instances") or {}

    def _stalled_pod_controller(self, now, round_):
        instances = round_["instances"]
        pods = {name: pod for inst in instances.values() for name, pod in (inst.get("pods") or {}).items()}
        groups = {job: list(inst.get("pods") or {}) for job, inst in instances.items()}
        stalled = self._stalled_pods(pods, now, groups)
        if not stalled:
            return None
        name = max(stalled, key=stalled.get)
        return ("pod %s: %s; a restarted controller forgets the instance, so the pod registers anew"
                % (name, STALLED_POD), stalled[name])

    def _observed(self, round_):
        if "observed" not in round_:
            round_["observed"] = observe(dict(self.config, instances=round_["instances"]), self.get, self.text)
        return round_["observed"]

    def _coordinator_not_ready(self, now, round_):
        readiness, instances, _routed = self._observed(round_)
        return self._held("coordinator_not_ready", coordinator_not_ready(readiness, instances), now)

    def _lost_add(self, now, round_):
        """An instance counts as unrouted only when this healer reaches every engine of it (its /metrics within the
        coordinator's own 2 s) in at least ``UNROUTED_PASSES`` of the coordinator's collector passes: the coordinator
        leaves out an instance one of whose engines answered late (metrics_collector.py:586-603), while it serves."""
        readiness, instances, routed = self._observed(round_)
        missing = unrouted_instances(readiness, instances, routed)
        for name in list(self.unrouted):
            if name not in missing:
                del self.unrouted[name]
        for name in missing:
            engines = instances[name].get("engines") or []
            if not all(self.reach(metrics_target(t)) for t in engines):
                self.unrouted.pop(name, None)  # the coordinator may have dropped it for a late answer: not a lost add
                continue
            passes = self.unrouted.setdefault(name, [])
            if not passes or now - passes[-1] >= rules.COLLECTOR_PASS:
                passes.append(now)
        confirmed = [missing[name] for name in missing if len(self.unrouted.get(name) or []) >= rules.UNROUTED_PASSES]
        return self._held("lost_add", lost_add_why(confirmed) if confirmed else None, now)

    def _watch_controller(self, now):
        """An engine pod's view of the controller's starts: when it answers again after not answering."""
        target = self.config.get("controller")
        if not target:
            return
        if self.answer(target)[0] == -1:
            self.controller_seen_down = True
        elif self.controller_seen_down:
            self.controller_seen_down, self.controller_up = False, now

    def _stalled_pod(self, now, round_):
        config = self.config
        held = self._stalled_pods({config["pod"]: config}, now, peers=config.get("peers")).get(config["pod"])
        if held is None:
            return None
        if self.controller_up is not None and now - self.controller_up < rules.ID_WINDOW:
            # a fresh registration now may get the id of a live instance that has not re-registered yet
            return None
        return STALLED_POD, held

    def _what(self, name):
        if name == "stalled_pod":
            return ("restarting this engine pod %s (its processes freeze for %s s, so the controller finds its node "
                    "manager down and separates the instance, then end; Docker's restart policy starts it again and "
                    "its node manager registers anew)" % (self.config["pod"], self.config.get("hold", 0)))
        return "restarting the controller container (its process ends, Docker's restart policy starts it again)"

    def _settle(self, rule):
        config = self.config
        if rule["name"] == "stalled_pod_controller":
            return config.get("pod_settle", rule["budget"]["settle"])
        if rule["name"] in ("stalled_pod", "coordinator_not_ready", "lost_add"):
            return config["settle"]
        return rule["budget"]["settle"]

    def standby(self):
        """True when this controller's own replica is not the master (master/standby: ``own`` is its /readiness).
        Its rules end the controller process, which repairs only a master's state: a standby holds no instance, so
        it is never restarted, and its holds start anew (``motor_health.replica_role``: a standby answers 503 "Not
        master"; a replica that answers nothing is no master either, and the master's healer is the other one)."""
        own = self.config.get("own")
        if not own or replica_role(*self.answer(own)) == "master":
            return False
        self.since.clear()
        self.stalled.clear()
        self.unrouted.clear()
        return True

    def judge(self, now):
        """(rule, what, why, how long it held, settle) of the repair due now (or of the first rule that holds), or
        None. Every rule of the agent is checked every round (each keeps its own hold)."""
        if self.agent == "pod":
            self._watch_controller(now)
        elif self.standby():
            return None
        round_ = {"instances": self._instances() if self.agent == "controller" else {}}
        first = None
        for rule in rules.rules_of(self.agent):
            found = self.checks[rule["name"]](now, round_)
            if found is None:
                continue
            judged = (rule, self._what(rule["name"]), found[0], found[1], self._settle(rule))
            if judged[3] >= judged[4]:
                return judged
            first = first or judged
        return first

    def step(self):
        """One round: True when it acted."""
        now = self.clock()
        judged = self.judge(now)
        if judged is None and self.agent == "pod" and self.served:
            self._forget_actions()  # the pod serves: its restarts helped, a later fault starts the backoff anew
        state = _load(self.config["state"])
        actions = [t for t in state.get("actions") or [] if now - t < rules.HOUR]
        if judged is None or judged[3] < judged[4]:
            self._alarm(None, None, actions, now)
            return False
        rule, what, why, held = judged[:4]
        budget = dict(rule["budget"], per_hour=self.config.get("per_hour", rule["budget"]["per_hour"]))
        if rules.spent(budget, actions, now):
            self._alarm(rule, why, actions, now)
            return False
        if now < rules.backoff(budget, actions, now):
            return False
        actions.append(now)
        _save(self.config["state"], {"actions": actions})
        log(what, "%s; for %d s; action %d in the last hour" % (why, held, len(actions)), now)
        write_metrics(self.config.get("metrics_file"), self._labels(rule["name"]), False, len(actions))
        self.alarm = None
        self.act()
        return True

    def _labels(self, rule_name):
        return dict(self.config.get("labels") or {}, rule=rule_name or "")

    def _alarm(self, rule, why, actions, now):
        """Budget spent while ``rule`` holds: one log line when the alarm starts (and when it ends), the metric."""
        name = rule["name"] if rule else None
        if name == self.alarm:
            return
        if name:
            log("alarm: not restarting (rule %s)" % name,
                "%s; the budget of %d restarts an hour is spent (%d in the last hour): a repair by hand is due, "
                "see docs/design.md, \"A budget, then alarms\"" % (why, rule["budget"]["per_hour"], len(actions)), now)
        else:
            log("alarm cleared", "rule %s no longer holds or the budget allows a repair again" % self.alarm, now)
        write_metrics(self.config.get("metrics_file"), self._labels(name or self.alarm), bool(name), len(actions))
        self.alarm = name

    def _forget_actions(self):
        """An engine pod that serves again forgets its earlier restarts (Kubernetes resets a back-off the same way
        once a container runs), so the next fault is not held back by the last one's backoff."""
        if _load(self.config["state"]).get("actions"):
            _save(self.config["state"], {"actions": []})


def main(argv):
    if len(argv) != 2:
        print("usage: motor_healer.py <healer.json>", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        config = json.load(handle)
    healer = Healer(config)
    log("watching %s" % ("this engine pod, %s" % config["pod"] if config.get("pod") else
                         "the coordinator and the engine pods of %s" % config.get("instances_file")),
        "settle %s s, interval %s s" % (healer.config["settle"], healer.config["interval"]))
    npu_read, read_npus = 0.0, npu_smi.HealthReader()
    while True:
        time.sleep(healer.config["interval"])
        try:
            healer.step()
            now = time.time()
            if config.get("npu_health_file") and now - npu_read >= rules.NPU_READ_EVERY:
                npu_read = now
                record_npu_health(config["npu_health_file"], config.get("npus") or [], now, read_npus)
        except Exception as exc:  # pylint: disable=broad-except  # a healer that dies heals nothing
            log("round failed", repr(exc))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
