# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Every upstream deploy mode deployed or refused by name (issue 36): no mode is validated and then ignored.

Deployed: deploy_mode infer_service_set (the default) and multi_deployment (on bare metal both are the same containers:
one per control role and per engine pod), and single_container with the scheduler's pd_disaggregation_single_container
(every role in one container, plan/single.py; refused when only one of the pair is set), and master-standby (two
replicas of the controller and the coordinator electing through etcd behind motor_vip: plan/standby.py, plan/vip.py;
its inventory contract is config/standby.py's, checked by validation and the plan). Refused, with the reason: encode
(EPD) instances. Paths are upstream PyMotor's
(../shared/upstream/pymotor).
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import is_int
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.single import check_single_scheduler

ENCODE_WHY = ("encode (EPD) instances are not placed by this collection: no container would run them while the "
              "coordinator and controller expect them (upstream runs them as ROLE=encode engine pods: "
              "examples/deployer/lib/generator/engine.py:112, startup/boot.sh:18)")


def check_modes(ctx, uc):
    """Refuse, by name, the upstream modes this collection does not deploy."""
    deploy = uc.get("motor_deploy_config") if isinstance(uc.get("motor_deploy_config"), dict) else {}
    check_single_scheduler(ctx, uc)  # deployed (plan/single.py) when paired as upstream needs
    encode = uc.get("motor_engine_encode_config")
    if isinstance(encode, dict) and encode:
        ctx.error("motor_engine_encode_config", ENCODE_WHY, "remove the section (and e_instances_num)")
    if is_int(deploy.get("e_instances_num")) and deploy["e_instances_num"] > 0:
        ctx.error("motor_deploy_config.e_instances_num", ENCODE_WHY, "remove it or set it to 0")
