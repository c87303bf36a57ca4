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
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import pod_verdict, routed_instances, unrouted
except ImportError:  # in a container's config directory, next to its copy (reconcile/healer.py)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from motor_health import pod_verdict, routed_instances, unrouted  # type: ignore[no-redef]

# roles whose live instance makes upstream's coordinator ready (only_prefill is ready; only_decode is not)
READY_ROLES = ("prefill", "union")
DEFAULTS = {"interval": 5, "settle": 40, "backoff_max": 600, "stop_grace": 10,
            "state": "/var/tmp/motor_healer.json"}
# an engine pod whose start command never came ends itself after POD_SETTLE s (it registers anew); the controller
# restarts after CONTROLLER_POD_SETTLE s of the same (it still holds the pod's instance as assembled), later than the
# pod's own repair so that a pod the controller merely dropped at start (the registration race) costs no restart of it
POD_SETTLE = 30
CONTROLLER_POD_SETTLE = 75
# an engine pod's repair first freezes its processes (SIGSTOP) for POD_HOLD s, then ends them: its node manager does
# not answer for that long, so the controller, which asks it on every round of an instance whose heartbeats timed out
# (instance_manager.py _handle_inactive), surely finds it down and separates the instance (DEL to the coordinator);
# a restart alone keeps it down for about a second, which a loaded controller misses, and then the controller's own
# healer restarts the controller, which leaves the stale instance in the coordinator
POD_HOLD = 20
STALLED_POD = ("its node manager answers normal with no endpoint and none of its engines answers: its start command "
               "never came (upstream's controller answers the registration of an assembled instance 'already "
               "registered', instance_assembler.py register, and keeps it ACTIVE while its node managers answer "
               "normal, instance_manager.py _handle_inactive)")


def stranded_coordinator(readiness, instances, routed=None):
    """The repair rule: why the controller must restart, or None.

    ``readiness``: the coordinator's /readiness answer (a dict; None when it did not answer 200 with JSON);
    ``instances``: ``{instance job name: {"role": ..., "live": bool (every engine answers normal), "ips", "need"}}``;
    ``routed``: the instances the coordinator routes (``motor_health.routed_instances`` of its /metrics?type=dp), or
    None when not read.

    Two cases: the coordinator says ready: false while a prefill/union instance serves (the SET rule above); or it
    says ready while a live instance is not routed: upstream's controller adds an instance once
    (``event_pusher.py:117-121``) and does not retry an add the coordinator refused
    (``coordinator_api_client.py:48-51``), e.g. one sent while a restarted coordinator did not listen yet, and a
    ready coordinator gets no SET."""
    if not isinstance(readiness, dict):
        return None
    if readiness.get("ready") is False:
        live = sorted(name for name, inst in instances.items()
                      if inst.get("live") and inst.get("role") in READY_ROLES)
        if not live:
            return None
        return ("the coordinator says ready: false while instance(s) %s serve: upstream's controller re-sends its "
                "instances only with a prefill instance (event_pusher.py _event_consumer); a restarted controller "
                "adds each one again" % ", ".join(live))
    if readiness.get("ready") is not True or routed is None:
        return None
    missing = unrouted(routed, [dict(name=name, role=inst.get("role"), ips=inst.get("ips"), need=inst.get("need"))
                                for name, inst in sorted(instances.items()) if inst.get("live") and inst.get("ips")])
    if not missing:
        return None
    return ("the coordinator is ready but does not route live instance(s) (%s): upstream's controller adds an "
            "instance once and does not retry a refused add (event_pusher.py, coordinator_api_client.py); a "
            "restarted controller adds each one again" % "; ".join(missing))


def next_allowed(actions, settle, backoff_max, now):
    """When the healer may act again: after its last action, ``settle`` s doubled for each action in the last hour
    (at most ``backoff_max``): 80, 160, 320, 600 s with the defaults."""
    recent = [t for t in actions if now - t < 3600]
    if not recent:
        return 0.0
    return max(recent) + min(settle * 2 ** len(recent), backoff_max)


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
        instances[name] = {"role": inst["role"], "live": live, "ips": inst.get("ips"), "need": inst.get("need")}
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


class Healer:
    """The controller's healer (``coordinator``, ``instances_file``) or an engine pod's (``pod``, ``node_manager``,
    ``engines``)."""

    def __init__(self, config, get=get_json, clock=time.time, act=None, answer=get_answer, text=get_text):
        self.config = dict(DEFAULTS, **config)
        self.get, self.clock, self.answer, self.text = get, clock, answer, text
        self.act = act or (lambda: end_controller(self.config["stop_grace"], hold=self.config.get("hold", 0)))
        self.since = None  # when the coordinator rule started to hold (in a row)
        self.stalled = {}  # pod -> since when its start command has not come (reset only once it came)
        self.served = False  # this round a watched pod got its start command (its own healer: the repair worked)

    def _stalled_pods(self, pods, now, groups=None):
        """The pods stalled now, with how long (a pod that restarts, "unknown" for a moment, stays stalled). With
        ``groups`` (instance -> its pod names): a pod whose instance has a pod that does not answer at all is not
        counted, it waits for that peer (a host down), which no restart here repairs."""
        out = {}
        self.served = False
        verdicts = {name: pod_state(pod, self.answer) for name, pod in sorted(pods.items())}
        waiting = {m for members in (groups or {}).values() if any(verdicts.get(m) == "unknown" for m in members)
                   for m in members}
        for name, verdict in verdicts.items():
            if verdict == "started":
                self.stalled.pop(name, None)
                self.served = True
            elif verdict == "stalled" and name in waiting:
                self.stalled.pop(name, None)
            elif verdict == "stalled":
                out[name] = now - self.stalled.setdefault(name, now)
        return out

    def judge(self, now):
        """(what, why, how long it held, settle) of the repair due now, or None."""
        config = self.config
        if config.get("pod"):
            held = self._stalled_pods({config["pod"]: config}, now).get(config["pod"])
            if held is None:
                return None
            return ("restarting this engine pod %s (its processes freeze for %s s, so the controller finds its node "
                    "manager down and separates the instance, then end; Docker's restart policy starts it again and "
                    "its node manager registers anew)" % (config["pod"], config.get("hold", 0)), STALLED_POD, held,
                    config["settle"])
        if config.get("instances_file"):  # rewritten by a deploy that scales: read every round
            config = dict(config, instances=_load(config["instances_file"]))
        pods = {name: pod for inst in config["instances"].values() for name, pod in (inst.get("pods") or {}).items()}
        groups = {job: list(inst.get("pods") or {}) for job, inst in config["instances"].items()}
        stalled = self._stalled_pods(pods, now, groups)
        what = "restarting the controller container (its process ends, Docker's restart policy starts it again)"
        if stalled:
            name = max(stalled, key=stalled.get)
            return (what, "pod %s: %s; a restarted controller forgets the instance, so the pod registers anew"
                    % (name, STALLED_POD), stalled[name], config.get("pod_settle", CONTROLLER_POD_SETTLE))
        why = stranded_coordinator(*observe(config, self.get, self.text))
        if why is None:
            self.since = None
            return None
        self.since = self.since if self.since is not None else now
        return what, why, now - self.since, config["settle"]

    def step(self):
        """One round: True when it acted."""
        now = self.clock()
        judged = self.judge(now)
        if judged is None and self.config.get("pod") and self.served:
            self._forget_actions()  # the pod serves: its restarts helped, a later fault starts the backoff anew
        if judged is None or judged[2] < judged[3]:
            return False
        what, why, held = judged[:3]
        state = _load(self.config["state"])
        actions = list(state.get("actions") or [])
        allowed = next_allowed(actions, self.config["settle"], self.config["backoff_max"], now)
        if now < allowed:
            return False
        actions = [t for t in actions if now - t < 3600] + [now]
        _save(self.config["state"], {"actions": actions})
        log(what, "%s; for %d s; action %d in the last hour" % (why, held, len(actions)), now)
        self.act()
        return True

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
    while True:
        time.sleep(healer.config["interval"])
        try:
            healer.step()
        except Exception as exc:  # pylint: disable=broad-except  # a healer that dies heals nothing
            log("round failed", repr(exc))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
