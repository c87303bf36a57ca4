"""Edits a bad-input corpus case applies to a config document: set or delete a dotted/bracketed path, and a deep
merge. Shared by the filter's unit tests and the deploy-level bad-input test (tests/integration)."""

from __future__ import annotations

import copy
import re

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def segments(path):
    """``a.b[2].c`` -> ``['a', 'b', 2, 'c']``."""
    return [int(index) if index else key for key, index in _SEGMENT.findall(path)]


def set_path(document, path, value, delete_on_none=True):
    """Set (or delete, when value is None) a dotted/bracketed path, creating dicts on the way."""
    *parents, last = segments(path)
    node = document
    for segment in parents:
        node = node[segment] if isinstance(segment, int) else node.setdefault(segment, {})
    if value is None and delete_on_none:
        if isinstance(last, int):
            del node[last]
        else:
            node.pop(last, None)
    else:
        node[last] = value


def deep_merge(base, patch):
    """Dicts merge, lists and scalars replace, None deletes."""
    for key, value in patch.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base
