# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render, stop, remove and start a host's containers as a standard-library script on the host (no AnsiballZ)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_configmap, motor_docker, motor_start
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import (
    CONTAINERS_ARGUMENT_SPEC,
    DOCKER_CONNECTION_REQUIRED_TOGETHER,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.host_script import HostScriptAction


class ActionModule(HostScriptAction):
    """pymotor.ascend.motor_containers (documentation in plugins/modules/motor_containers.py)."""

    SPEC = CONTAINERS_ARGUMENT_SPEC
    REQUIRED_TOGETHER = DOCKER_CONNECTION_REQUIRED_TOGETHER
    ENTRY = (motor_start, "apply")
    MODULES = (motor_docker, motor_configmap, motor_start)
