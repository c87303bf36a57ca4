# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Attributes shared by the phase entry points (action plugins that run on the controller, no module run)."""

from __future__ import annotations


class ModuleDocFragment:
    """Documentation fragment pymotor.ascend.controller_action."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Reads only, or reports what it would write; the same decision in check mode.
  diff_mode:
    support: none
    description: No diff is returned.
  action:
    support: full
    description: Implemented as an action plugin running on the controller, with no module run.
"""
