# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The attributes of the modules that only read (motor_host_probe, motor_job_info)."""

from __future__ import annotations


class ModuleDocFragment:
    """Documentation fragment pymotor.ascend.read_only."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs in check mode too.
  diff_mode:
    support: none
    description: Reads only; there is nothing to diff.
"""
