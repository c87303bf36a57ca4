# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""env.json: sections, value types, and the per-role environment PyMotor's deployer builds."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import describe, is_int, join_path, suggest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.schema import (
    ENV_NAME_RE,
    ENV_SECTIONS,
    ENV_VERSION,
    ROLE_ENV_SECTIONS,
)


def _env_value(ctx, value, path):
    if isinstance(value, bool):  # PyMotor's generator exports a non-string as Python prints it: JSON true -> True
        return "True" if value else "False"
    if isinstance(value, str):
        return value
    if is_int(value):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    ctx.error(path, "expected a scalar (string, number or boolean), got %s" % describe(value),
              "environment variables are flat strings")
    return None


def _normalize_env_section(ctx, section, path):
    result = {}
    for key, value in section.items():
        key_path = join_path(path, key)
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            ctx.error(key_path, "%s is not a valid environment variable name" % describe(key),
                      "use letters, digits and '_' and do not start with a digit")
            continue
        text = _env_value(ctx, value, key_path)
        if text is not None:
            result[key] = text
    return result


def normalize_env(ctx, env_config):
    """Validate env.json; return it with string values (unknown sections dropped)."""
    if env_config is None:
        return {}
    if not isinstance(env_config, dict):
        ctx.error("env_config", "expected an object, got %s" % describe(env_config), "env.json is a JSON object")
        return {}
    result = {}
    if "version" in env_config:
        if env_config["version"] != ENV_VERSION:
            ctx.error("env_config.version", "unsupported version %s" % describe(env_config["version"]),
                      'env.json uses "version": "2.0.0"')
        result["version"] = ENV_VERSION
    for name, section in env_config.items():
        path = join_path("env_config", name)
        if name == "version":
            continue
        if name not in ENV_SECTIONS:
            guess = suggest(name, ENV_SECTIONS)
            ctx.error(path, "unknown env.json section: its variables would reach no container",
                      "did you mean '%s'?" % guess if guess else "known: " + ", ".join(ENV_SECTIONS))
            continue
        if not isinstance(section, dict):
            ctx.error(path, "expected an object, got %s" % describe(section), "a section maps NAME to value")
            continue
        result[name] = _normalize_env_section(ctx, section, path)
    return result


def role_env(ctx, env_config, automatic):
    """Per-role environment: common (+ deployer values) overlaid by the role's section."""
    common = dict(env_config.get("motor_common_env", {}))
    for key, value in automatic.items():
        if key in common and common[key] != value:
            ctx.warn("env_config.motor_common_env." + key, "replaced by the deployer's value %s" % json.dumps(value),
                     "the deployer sets %s itself" % key)
        common[key] = value
    roles = {"common": dict(sorted(common.items()))}
    for role, section_name in ROLE_ENV_SECTIONS:
        section = env_config.get(section_name)
        if role == "union" and section is None:
            section = env_config.get("motor_engine_prefill_env")  # PyMotor's fallback
        merged = dict(common)
        merged.update(section or {})
        roles[role] = dict(sorted(merged.items()))
    return roles
