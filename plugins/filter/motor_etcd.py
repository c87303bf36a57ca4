# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shim of the etcd member changes (logic in plugin_utils/etcd_members.py).

One documentation file per filter: plugins/filter/<filter name>.yml (ansible-doc -t filter pymotor.ascend.<name>)."""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.etcd_members import member_plan


def _parsed(value):
    """etcdctl's JSON output as text (a failed command: empty or not JSON) or already parsed."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _flag(value):
    """A flag that templating may have turned into text."""
    return value.strip().lower() in ("true", "yes", "1") if isinstance(value, str) else bool(value)


def motor_etcd_member_plan(probes, target):
    """The member changes from the probes of the play's hosts to the member set ``target``."""
    if not isinstance(probes, dict):
        raise AnsibleFilterError("motor_etcd_member_plan: expects a dict of host -> {data, peer_url, members, health}")
    parsed = {host: {"data": _flag((probe or {}).get("data")), "members": _parsed((probe or {}).get("members")),
                     "health": _parsed((probe or {}).get("health"))} for host, probe in probes.items()}
    peer_urls = {host: (probe or {}).get("peer_url", "") for host, probe in probes.items()}
    return member_plan(list(target or []), peer_urls, parsed)


class FilterModule:
    """The pymotor.ascend.motor_etcd_member_plan filter."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_etcd_member_plan": motor_etcd_member_plan}
