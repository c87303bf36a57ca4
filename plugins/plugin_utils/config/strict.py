# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Every key checked at every level: PyMotor's own sections against the fields its config classes accept, the
conductor's and the KV pool's keys, and vLLM's engine arguments (lists in ``config/known_keys.py``).

PyMotor's loaders drop a key they do not know without a word (a typo in ``scheduler_type`` silently gives the
load_balance scheduler), so an unknown key in a section PyMotor reads into a dataclass is an error with its path and
a did-you-mean. Where our list is not read from the consumer's own source (the Mooncake store keys) or may lag the
engine's version (vLLM), a key close to a known one is an error and a key far from every known one a warning.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import join_path, suggest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.known_keys import (
    CLASS_FIELDS,
    CONDUCTOR_KEYS,
    CONDUCTOR_SERVICE_KEYS,
    CONTROLLER_SECTIONS,
    COORDINATOR_SECTIONS,
    DEPLOY_TLS_SECTIONS,
    KV_POOL_KEYS,
    NESTED_FIELDS,
    NODE_MANAGER_SECTIONS,
    VLLM_KEYS,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_SECTIONS

ENCODE_SECTION = "motor_engine_encode_config"


def did_you_mean(key, known):
    """The hint of an unknown key: the close known key, else the known keys (a short list) or a pointer."""
    guess = suggest(key, known)
    if guess:
        return "did you mean '%s'?" % guess
    known = sorted(known)
    if len(known) <= 12:
        return "known keys: %s" % ", ".join(known)
    return "check the spelling or remove it"


def unknown_key(ctx, key, known, path, what):
    """An unknown key where PyMotor drops it: an error."""
    ctx.error(path, "unknown key of %s: PyMotor would drop it without a word" % what, did_you_mean(key, known))


def _check_class(ctx, mapping, cls, path):
    fields = CLASS_FIELDS[cls]
    for key, value in mapping.items():
        key_path = join_path(path, key)
        if key not in fields:
            unknown_key(ctx, key, fields, key_path, "%s (%s)" % (path, cls.split(".")[1]))
            continue
        nested = NESTED_FIELDS.get((cls, key))
        if nested and isinstance(value, dict):
            _check_class(ctx, value, nested, key_path)


def _check_sections(ctx, mapping, sections, path):
    if not isinstance(mapping, dict):
        return  # a wrong type is reported where the section is read
    for key, value in mapping.items():
        key_path = join_path(path, key)
        if key not in sections:
            unknown_key(ctx, key, sections, key_path, path)
            continue
        if sections[key] and isinstance(value, dict):
            _check_class(ctx, value, sections[key], key_path)


def _check_conductor(ctx, section):
    path = "kv_conductor_config"
    if not isinstance(section, dict):
        return
    for key, value in section.items():
        if key not in CONDUCTOR_KEYS:
            unknown_key(ctx, key, CONDUCTOR_KEYS, join_path(path, key), "the KV conductor's config")
        elif key == "kvevent_instance" and isinstance(value, dict):
            for name, service in value.items():
                service_path = join_path(join_path(path, key), name)
                for field in service if isinstance(service, dict) else ():
                    if field not in CONDUCTOR_SERVICE_KEYS:
                        unknown_key(ctx, field, CONDUCTOR_SERVICE_KEYS, join_path(service_path, field),
                                    "a conductor event source")


def near_or_far(ctx, mapping, known, path, what, far_hint):
    """Keys of a list that may lag its consumer: close to a known key -> error, far from all -> warning."""
    for key in mapping:
        key_path = join_path(path, key)
        if key in known:
            continue
        guess = suggest(key, known)
        if guess:
            ctx.error(key_path, "unknown %s, close to '%s'" % (what, guess), "did you mean '%s'?" % guess)
        else:
            ctx.warn(key_path, "not a %s this collection knows" % what, far_hint)


def check_sections(ctx, uc):
    """PyMotor's own sections, the conductor's and the KV pool's keys (errors and warnings into ``ctx``)."""
    _check_sections(ctx, uc.get("motor_controller_config"), CONTROLLER_SECTIONS, "motor_controller_config")
    _check_sections(ctx, uc.get("motor_coordinator_config"), COORDINATOR_SECTIONS, "motor_coordinator_config")
    _check_sections(ctx, uc.get("motor_nodemanger_config"), NODE_MANAGER_SECTIONS, "motor_nodemanger_config")
    deploy = uc.get("motor_deploy_config")
    if isinstance(deploy, dict):
        _check_sections(ctx, deploy.get("tls_config"), DEPLOY_TLS_SECTIONS, "motor_deploy_config.tls_config")
    for section_name in list(ENGINE_SECTIONS.values()) + [ENCODE_SECTION]:
        section = uc.get(section_name)
        if not isinstance(section, dict):
            continue
        _check_sections(ctx, section.get("motor_nodemanger_config"), NODE_MANAGER_SECTIONS,
                        section_name + ".motor_nodemanger_config")
        if isinstance(section.get("health_check_config"), dict):
            _check_class(ctx, section["health_check_config"], "endpoint.HealthCheckConfig",
                         section_name + ".health_check_config")
    _check_conductor(ctx, uc.get("kv_conductor_config"))
    pool = uc.get("kv_cache_pool_config")
    if isinstance(pool, dict):
        near_or_far(ctx, pool, KV_POOL_KEYS, "kv_cache_pool_config", "KV pool (Mooncake) key",
                    "it is passed to Mooncake as written; check it against Mooncake's store config")


def check_vllm_keys(ctx, engine_config, path):
    """engine_config of a vLLM engine (keys in the underscore spelling): vLLM's own arguments."""
    near_or_far(ctx, engine_config, VLLM_KEYS, path, "vLLM engine argument",
                "vLLM refuses an unknown argument at engine start; keep it only if your image's vLLM has it")
