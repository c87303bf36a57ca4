# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""KV registration watcher of a pymotor.ascend job: the container <job_id>-kv-watcher on the KV conductor's host.

Why: PyMotor's coordinator registers each prefill/union DP rank with the Mooncake conductor once, when the
controller hands it the instance (motor/coordinator/api_client/conductor_api_client.py), and the conductor keeps its
registrations in memory only. After a conductor crash (its restart policy brings it back empty) or a reboot of the
control host that starts the coordinator before the conductor listens, nothing registers the ranks again: KV-cache
affinity is silently gone.

What: every ``interval`` seconds it reads the conductor's ``GET /services`` and remembers, per planned KV-event
endpoint, the registration the coordinator made (the conductor lists every field of it). When the conductor comes
back without them (it was unreachable, or it lost every remembered registration at once, or this watcher itself
restarted), it posts the remembered registrations to ``POST /register``: the same body the coordinator sent.
Registrations the coordinator withdrew while the conductor was up (an instance deleted) are forgotten, never
re-registered. What it remembers survives its own restarts (a file in the container's own filesystem, which lives
as long as the container); it listens on nothing and needs only the Python standard library.

Usage: ``python3 motor_kv_watcher.py <config.json>``; the config (written by the deploy from the plan):
``{"conductor": "http://<ip>:<port>", "interval": 2, "endpoints": ["tcp://<ip>:<port>", ...],
"state": "/var/tmp/motor_kv_watcher.json"}`` (``endpoints``: every KV-event endpoint a planned rank may publish on).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

DEFAULT_STATE = "/var/tmp/motor_kv_watcher.json"
TIMEOUT = 2.0  # seconds per request, as the coordinator's own conductor client


def log(message, **fields):
    print(json.dumps(dict({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "msg": message}, **fields), sort_keys=True),
          flush=True)


def register_body(service):
    """The POST /register body of a conductor /services entry (Go field names -> the JSON names of RegisterReq):
    what the coordinator sent (upstream conductor_api_client.register_post)."""
    body = {"endpoint": service.get("Endpoint", ""), "type": service.get("Type", ""),
            "modelname": service.get("ModelName", ""), "block_size": service.get("BlockSize", 0),
            "instance_id": service.get("InstanceID", ""), "dp_rank": service.get("DPRank", 0)}
    if service.get("ReplayEndpoint"):
        body["replay_endpoint"] = service["ReplayEndpoint"]
    if service.get("TenantID") and service["TenantID"] != "default":
        body["tenant_id"] = service["TenantID"]
    if service.get("LoraName"):
        body["lora_name"] = service["LoraName"]
    if service.get("AdditionalSalt"):
        body["additionalsalt"] = service["AdditionalSalt"]
    return body


def instance_number(service):
    """The controller's instance id in ``vllm-prefill-<id>`` (ids grow: the larger one is the newer instance)."""
    tail = str(service.get("InstanceID", "")).rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


class Watcher:
    """One poll at a time (``poll``); ``run`` loops. ``request(method, url, body)`` -> parsed JSON or raises."""

    def __init__(self, config, request=None):
        self.base = str(config["conductor"]).rstrip("/")
        self.endpoints = set(config.get("endpoints") or [])
        self.interval = float(config.get("interval") or 2)
        self.state_path = config.get("state") or DEFAULT_STATE
        self.request = request or http_request
        self.known = {}  # endpoint -> the /services entry the coordinator registered for it
        self.suspect = False  # the conductor may have lost registrations (it was down, or this watcher restarted)
        self.reachable = None
        self._load()

    def _load(self):
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except (OSError, ValueError):
            return
        if isinstance(saved, dict):
            self.known = {ep: svc for ep, svc in saved.items() if ep in self.endpoints and isinstance(svc, dict)}
            # restarted (a crash, or the control host's Docker engine restarted): the conductor may be new too
            self.suspect = bool(self.known)
            log("registrations remembered", count=len(self.known), state=self.state_path)

    def _save(self):
        tmp = self.state_path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(self.known, handle, sort_keys=True)
            os.replace(tmp, self.state_path)
        except OSError as exc:
            log("cannot save the registrations", state=self.state_path, error=str(exc))

    def poll(self):
        """Read /services once, learn, and re-register what the conductor lost. Returns the endpoints registered."""
        try:
            answer = self.request("GET", self.base + "/services", None)
            services = answer.get("services") or [] if isinstance(answer, dict) else []
        except (OSError, ValueError) as exc:
            if self.reachable is not False:
                log("conductor unreachable", url=self.base, error=str(exc))
            self.reachable, self.suspect = False, True
            return []
        if self.reachable is False:
            log("conductor answers again", url=self.base)
        self.reachable = True
        listed = {}
        for service in services:
            endpoint = service.get("Endpoint")
            if endpoint in self.endpoints and instance_number(service) >= instance_number(listed.get(endpoint, {})):
                listed[endpoint] = service
        lost = sorted(ep for ep in self.known if ep not in listed)
        # lost while the conductor stayed up and others survived: the coordinator withdrew them (instance deleted).
        # Every one lost at once, with the conductor up, is a restart between two polls: re-register them. (With a
        # single publishing instance the two look alike; a withdrawn one re-registered is harmless: the coordinator
        # only reads the conductor's matches of its own instance ids.)
        if lost and not self.suspect and len(lost) < len(self.known):
            for endpoint in lost:
                log("registration withdrawn, forgotten", endpoint=endpoint,
                    instance_id=self.known[endpoint].get("InstanceID"), dp_rank=self.known[endpoint].get("DPRank"))
            lost = []
        registered, failed = [], []
        for endpoint in lost:
            body = register_body(self.known[endpoint])
            try:
                self.request("POST", self.base + "/register", body)
            except (OSError, ValueError) as exc:
                log("re-registration failed, the next poll retries", request=body, error=str(exc))
                failed.append(endpoint)
                continue
            log("re-registered a DP rank the conductor had lost", request=body)
            listed[endpoint] = self.known[endpoint]
            registered.append(endpoint)
        known = dict(listed, **{endpoint: self.known[endpoint] for endpoint in failed})
        self.suspect = bool(failed)
        if known != self.known:
            self.known = known
            self._save()
        return registered

    def run(self):
        log("watching the KV conductor", url=self.base, endpoints=sorted(self.endpoints), interval=self.interval)
        while True:
            self.poll()
            time.sleep(self.interval)


def http_request(method, url, body):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:  # nosec B310: the plan's http:// URL
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise OSError("HTTP %s: %s" % (exc.code, exc.read()[:300].decode(errors="replace"))) from exc
    return json.loads(raw) if raw.strip() else {}


def main(argv):
    if len(argv) != 2:
        print("usage: motor_kv_watcher.py <config.json>", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    Watcher(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
