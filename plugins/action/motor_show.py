# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Show lines to the operator as they are: the collection's one way to print tables, warnings and reports (no YAML
quoting, no wrapping at 80 columns, whatever the callback and its result format)."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint


def plain_lines(lines) -> list:
    """A string (split on its newlines) or a list of strings (each may hold newlines) -> the lines to print."""
    if lines is None:
        return []
    items = [lines] if isinstance(lines, str) else list(lines)
    return [line for item in items for line in str(item).splitlines()]


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_show (documentation in plugins/modules/motor_show.py)."""

    ARGUMENT_SPEC = {"lines": {"type": "raw", "required": True}, "title": {"type": "str", "default": ""}}
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        lines = plain_lines(args["lines"])
        if args["title"]:
            lines.insert(0, args["title"])
        self.show_lines(lines)
        return {"lines": len(lines)}
