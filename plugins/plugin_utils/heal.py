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

# roles whose live instance makes upstream's coordinator ready (only_prefill is ready; only_decode is not)
READY_ROLES = ("prefill", "union")
DEFAULTS = {"interval": 5, "settle": 40, "backoff_max": 600, "stop_grace": 10,
            "state": "/var/tmp/motor_healer.json"}


def stranded_coordinator(readiness, instances):
    """The repair rule: why the controller must restart, or None.

    ``readiness``: the coordinator's /readiness answer (a dict; None when it did not answer 200 with JSON);
    ``instances``: ``{instance job name: {"role": ..., "live": bool (every engine answers normal)}}``."""
    if not isinstance(readiness, dict) or readiness.get("ready") is not False:
        return None
    live = sorted(name for name, inst in instances.items() if inst.get("live") and inst.get("role") in READY_ROLES)
    if not live:
        return None
    return ("the coordinator says ready: false while instance(s) %s serve: upstream's controller re-sends its "
            "instances only with a prefill instance (event_pusher.py _event_consumer); a restarted controller adds "
            "each one again" % ", ".join(live))


def next_allowed(actions, settle, backoff_max, now):
    """When the healer may act again: after its last action, ``settle`` s doubled for each action in the last hour
    (at most ``backoff_max``): 80, 160, 320, 600 s with the defaults."""
    recent = [t for t in actions if now - t < 3600]
    if not recent:
        return 0.0
    return max(recent) + min(settle * 2 ** len(recent), backoff_max)


def _context(tls):
    if not tls:
        return None
    ctx = ssl.create_default_context(cafile=tls.get("ca_file") or None)
    ctx.check_hostname = bool(tls.get("check_hostname"))
    if tls.get("cert_file"):
        ctx.load_cert_chain(tls["cert_file"], tls.get("key_file") or None)
    return ctx


def get_json(target, timeout=3):
    """The JSON body of a 200 answer to GET ``target["url"]``, else None (http.client: this file runs alone)."""
    url = urllib.parse.urlsplit(target["url"])
    if url.scheme == "https":
        conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout, context=_context(target.get("tls")))
    else:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request("GET", url.path + ("?" + url.query if url.query else ""))
        resp = conn.getresponse()
        body = resp.read()
        return json.loads(body) if resp.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def observe(config, get=get_json):
    """(coordinator readiness, {instance: {"role", "live"}}) now."""
    instances = {}
    for name, inst in (config.get("instances") or {}).items():
        answers = [get(t) for t in inst["engines"]]
        live = bool(answers) and all(isinstance(a, dict) and a.get("status") == "normal" for a in answers)
        instances[name] = {"role": inst["role"], "live": live}
    return get(config["coordinator"]), instances


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


def end_controller(grace, own_pid=None, proc="/proc", kill=os.kill, sleep=time.sleep):
    """End every process of the container but PID 1 (upstream's boot.sh, which then ends) and this one: SIGTERM,
    SIGKILL after ``grace`` s. Returns the pids signalled."""
    own_pid = own_pid or os.getpid()
    pids = sorted(int(p) for p in os.listdir(proc) if p.isdigit() and int(p) not in (1, own_pid))
    for sig in (signal.SIGTERM, signal.SIGKILL):
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
    def __init__(self, config, get=get_json, clock=time.time, act=None):
        self.config = dict(DEFAULTS, **config)
        self.get, self.clock = get, clock
        self.act = act or (lambda: end_controller(self.config["stop_grace"]))
        self.since = None  # when the rule started to hold (in a row)

    def step(self):
        """One round: True when it acted."""
        now = self.clock()
        config = self.config
        if config.get("instances_file"):  # rewritten by a deploy that scales: read every round
            config = dict(config, instances=_load(config["instances_file"]))
        readiness, instances = observe(config, self.get)
        why = stranded_coordinator(readiness, instances)
        if why is None:
            self.since = None
            return False
        self.since = self.since if self.since is not None else now
        if now - self.since < self.config["settle"]:
            return False
        state = _load(self.config["state"])
        actions = list(state.get("actions") or [])
        allowed = next_allowed(actions, self.config["settle"], self.config["backoff_max"], now)
        if now < allowed:
            return False
        actions = [t for t in actions if now - t < 3600] + [now]
        _save(self.config["state"], {"actions": actions})
        log("restarting the controller container (its process ends, Docker's restart policy starts it again)",
            "%s; for %d s; action %d in the last hour" % (why, now - self.since, len(actions)), now)
        self.act()
        return True


def main(argv):
    if len(argv) != 2:
        print("usage: motor_healer.py <healer.json>", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        config = json.load(handle)
    healer = Healer(config)
    log("watching the coordinator and the prefill/union instances of %s" % config.get("instances_file"),
        "settle %s s, interval %s s" % (healer.config["settle"], healer.config["interval"]))
    while True:
        time.sleep(healer.config["interval"])
        try:
            healer.step()
        except Exception as exc:  # pylint: disable=broad-except  # a healer that dies heals nothing
            log("round failed", repr(exc))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
