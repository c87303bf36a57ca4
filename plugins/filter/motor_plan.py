# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shims: place every PyMotor container on hosts, NPUs and ports (logic in plugin_utils).

One documentation file per filter: plugins/filter/<filter name>.yml (ansible-doc -t filter pymotor.ascend.<name>)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import MotorPlanError, build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import cert_dirs, model_dirs, plan_table, weight_dir
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.vip import vip_host_work


def motor_plan(config, hosts, previous=None):
    """Build the deployment plan (keeping the ``previous`` placement where possible); raise AnsibleFilterError."""
    try:
        return build_plan(config, hosts, previous)
    except MotorPlanError as err:
        raise AnsibleFilterError(str(err)) from err


def motor_plan_table(plan):
    """Render a plan as a fixed-width text table."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_plan_table: expects the output of pymotor.ascend.motor_plan")
    return plan_table(plan)


def motor_plan_model_dirs(source):
    """Model directories needed by the given plan entries, or named by a whole normalized config."""
    return model_dirs(source)


def motor_plan_weight_dir(user_config):
    """Host directory of the model weights of a user_config."""
    return weight_dir(user_config)


def motor_plan_cert_dirs(source):
    """Host directories of the CA and the certificate script when ENABLE_GEN_CERT is true (normalized config or plan)."""
    if not isinstance(source, dict):
        raise AnsibleFilterError("motor_plan_cert_dirs: expects a normalized config or a plan")
    return cert_dirs(source)


def motor_plan_vip(plan, host, interface, image, config_dir, virtual_router_id=0):
    """The keepalived and HAProxy files and containers of one host of a master/standby plan (none elsewhere)."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_plan_vip: expects the output of pymotor.ascend.motor_plan")
    if not plan.get("standby"):
        return {"job_id": str(plan.get("job_id", "")) + "-vip", "files": {}, "containers": []}
    if not interface:
        raise AnsibleFilterError("motor_plan_vip: no interface for the VIP on %s (motor_vip_interface, else motor_nic)"
                                 % host)
    return vip_host_work(plan, host, str(interface), str(image), str(config_dir), int(virtual_router_id or 0) or None)


class FilterModule:
    """The pymotor.ascend.motor_plan filter and its companions."""

    def filters(self):
        """Return the filters of this plugin."""
        return {"motor_plan": motor_plan, "motor_plan_table": motor_plan_table,
                "motor_plan_model_dirs": motor_plan_model_dirs, "motor_plan_weight_dir": motor_plan_weight_dir,
                "motor_plan_cert_dirs": motor_plan_cert_dirs, "motor_plan_vip": motor_plan_vip}
