# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shim of the host prechecks (logic in plugin_utils/reconcile/precheck.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: motor_precheck
short_description: Internal - judge the host prechecks of a PyMotor deploy on the controller
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - For every host, compares the plan with what the read-only discovery before planning read there
    (M(pymotor.ascend.motor_host_probe), registered as O(discovery)) - Docker engine and version, the
    image, planned NPUs and their health, driver and hccn_tool, the NPU network (device address, link, one TLS switch,
    distinct device addresses across hosts), management devices, driver/firmware versions, planned ports held
    by other processes, weights, model directories, free disk, config directories under the config root - and
    returns every problem at once, each naming the host, the check and the fix.
  - Also returns per host the image id and the engine mounts present, and the config hash parts of every planned
    container (input of P(pymotor.ascend.motor_reconcile#filter)).
  - The settings are the variables O(defaults) names (C(<role prefix><setting>), for example C(motor_service_log_root));
    a host's own value of one (inventory host or group variable) overrides the controller's, as it does for the
    discovery. deploy.yml uses the same logic through its entry point M(pymotor.ascend.motor_decide).
  - The logic lives in C(plugins/plugin_utils/reconcile/precheck.py); the filter does no I/O.
positional: _input, hosts, hostvars, defaults, discovery
options:
  _input:
    description: The deployment plan (P(pymotor.ascend.motor_plan#filter) output).
    type: dict
    required: true
  hosts:
    description: The hosts to check (the inventory's PyMotor hosts); hosts of the plan are always checked.
    type: list
    elements: str
    required: true
  hostvars:
    description: C(hostvars) - each host's discovery result (O(discovery)) and its own values of the settings.
    type: dict
    required: true
  defaults:
    description: Setting variable name to the controller's value.
    type: dict
    required: true
  discovery:
    description: The variable each host registered its M(pymotor.ascend.motor_host_probe) result under.
    type: str
    default: motor_service_docker
"""

EXAMPLES = r"""
- name: Judge the prechecks of every host
  ansible.builtin.set_fact:
    checked: "{{ motor_plan_result | pymotor.ascend.motor_precheck(groups['all'], hostvars, settings) }}"
"""

RETURN = r"""
_value:
  description:
    - C(problems) (every problem of every host, each naming the host, the check, what is wrong and the fix),
      C(warnings) (what deploys anyway, same format, e.g. an NPU in Warning health, driver and firmware versions),
      C(parts) (container name to its hash parts) and C(hosts) (host to C(image_id), C(mounts_present),
      C(problems)).
  type: dict
  sample:
    problems: []
    warnings: []
    parts:
      mindie-motor-p0-0:
        image: sha256:4f1c
        shared: 1e9caa69fe171d487d5e012f5a6f137e2687ab70e1cd2809b67a9ce6bc1fa079
        spec: bb9ed55bdec40a1a45a841e641c178752ce2e21192e7be97bfd57412e601ba8a
    hosts:
      npu-a2-01:
        image_id: sha256:4f1c
        mounts_present:
          - /usr/local/Ascend/driver
        problems: []
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import precheck
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.precheck import PrecheckError, checked_hosts


def motor_precheck(plan, hosts, hostvars, defaults, discovery="motor_service_docker"):
    """Judge the prechecks of every host; raise AnsibleFilterError when a setting is missing."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_precheck: expects the output of pymotor.ascend.motor_plan")
    names = checked_hosts(plan, hosts)
    probes, overrides = {}, {}
    for host in names:
        own = hostvars[host] if host in hostvars else {}
        probes[host] = own.get(discovery) or {}
        overrides[host] = {name: own[name] for name in defaults or {} if name in own}
    try:
        return precheck(plan, names, probes, defaults or {}, overrides)
    except PrecheckError as err:
        raise AnsibleFilterError("motor_precheck: %s" % err) from err


class FilterModule:
    """The pymotor.ascend.motor_precheck filter."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_precheck": motor_precheck}
