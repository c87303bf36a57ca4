# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""motor_user_config_overrides: deep merge onto user_config, recording which override set which path."""

from __future__ import annotations

import copy
import re

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    canonical_key,
    canonical_path,
    describe,
    join_path,
)


def _record_leaves(value, path, index, record):
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _record_leaves(child, join_path(path, key), index, record)
    else:
        record[canonical_path(path)] = index


def _merge_key(result, key, path):
    # Inside engine_config, "kv-events-config" and "kv_events_config" are the same key.
    if not re.match(r"^motor_engine_[a-z]+_config\.engine_config$", path):
        return key
    for existing in result:
        if canonical_key(existing) == canonical_key(key):
            return existing
    return key


def _deep_merge(base, override, path, index, record):
    result = dict(base)
    for key, value in override.items():
        target = _merge_key(result, key, path)
        child_path = join_path(path, key)
        if value is None:
            result.pop(target, None)
            record[canonical_path(child_path)] = index
        elif isinstance(value, dict) and isinstance(result.get(target), dict):
            result[target] = _deep_merge(result[target], value, join_path(path, target), index, record)
        else:
            result[target] = copy.deepcopy(value)
            _record_leaves(value, child_path, index, record)
    return result


def apply_overrides(ctx, user_config, overrides):
    """Deep-merge every override dict onto user_config; return (merged, overridden)."""
    record = {}
    if overrides is None:
        return user_config, record
    if not isinstance(overrides, (list, tuple)):
        ctx.error("overrides", "expected a list of objects, got %s" % describe(overrides),
                  "pass a list such as [{...}, {...}]")
        return user_config, record
    merged = user_config
    for index, override in enumerate(overrides):
        if not isinstance(override, dict):
            ctx.error("overrides[%d]" % index, "expected an object, got %s" % describe(override),
                      "each override is a dict deep-merged onto user_config")
            continue
        if isinstance(merged, dict):
            merged = _deep_merge(merged, override, "", index, record)
    return merged, record
