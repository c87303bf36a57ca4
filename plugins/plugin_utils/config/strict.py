# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Every key checked at every level: PyMotor's own sections against the fields its config classes accept, the
conductor's and the KV pool's keys, and vLLM's engine arguments (lists in ``config/known_keys.py``, each named with
the upstream commit it was read from).

A key close to a known one is an error with a did-you-mean: PyMotor's loaders drop a key they do not know without a
word (a typo in ``scheduler_type`` silently gives the load_balance scheduler), vLLM refuses it at engine start. A key
far from every known one is a warning naming the list's commit (a newer PyMotor or the image's vLLM may read it), or
an error with ``motor_unknown_keys=error``: the rule is ``context.unknown_key``.
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    describe,
    join_path,
    suggest,
    unknown_key,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.known_keys import (
    CONDUCTOR_KEYS,
    CONDUCTOR,
    CONDUCTOR_SERVICE_KEYS,
    DEPLOY_TLS_SECTIONS,
    KV_POOL_KEYS,
    MOONCAKE_STORE,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import ENGINE_SECTIONS

ENCODE_SECTION = "motor_engine_encode_config"


def _check_class(ctx, mapping, cls, path):
    fields = ctx.keys.class_fields.get(cls)
    if fields is None:
        return  # a class the image names but did not list (it failed to import there): nothing to check against
    for key, value in mapping.items():
        key_path = join_path(path, key)
        if key not in fields:
            unknown_key(ctx, path, key, "%s (%s)" % (path, cls.split(".")[1]), fields, ctx.keys.pymotor)
            continue
        nested = ctx.keys.nested_fields.get((cls, key))
        if nested and isinstance(value, dict):
            _check_class(ctx, value, nested, key_path)


def _check_sections(ctx, mapping, sections, path):
    if not isinstance(mapping, dict):
        return  # a wrong type is reported where the section is read
    for key, value in mapping.items():
        key_path = join_path(path, key)
        if key not in sections:
            unknown_key(ctx, path, key, path, sections, ctx.keys.pymotor)
            continue
        if sections[key] and isinstance(value, dict):
            _check_class(ctx, value, sections[key], key_path)


def _check_conductor(ctx, section):
    path = "kv_conductor_config"
    if not isinstance(section, dict):
        return
    for key, value in section.items():
        if key not in CONDUCTOR_KEYS:
            unknown_key(ctx, path, key, "the KV conductor's config", CONDUCTOR_KEYS, CONDUCTOR)
        elif key == "kvevent_instance" and isinstance(value, dict):
            for name, service in value.items():
                service_path = join_path(join_path(path, key), name)
                for field in service if isinstance(service, dict) else ():
                    if field not in CONDUCTOR_SERVICE_KEYS:
                        unknown_key(ctx, service_path, field, "a conductor event source", CONDUCTOR_SERVICE_KEYS,
                                    CONDUCTOR)


def check_sections(ctx, uc):
    """PyMotor's own sections, the conductor's and the KV pool's keys (errors and warnings into ``ctx``)."""
    for top in ("motor_controller_config", "motor_coordinator_config", "motor_nodemanger_config"):
        _check_sections(ctx, uc.get(top), ctx.keys.sections[top], top)
    deploy = uc.get("motor_deploy_config")
    if isinstance(deploy, dict):
        _check_sections(ctx, deploy.get("tls_config"), DEPLOY_TLS_SECTIONS, "motor_deploy_config.tls_config")
    for section_name in list(ENGINE_SECTIONS.values()) + [ENCODE_SECTION]:
        section = uc.get(section_name)
        if not isinstance(section, dict):
            continue
        _check_sections(ctx, section.get("motor_nodemanger_config"), ctx.keys.sections["motor_nodemanger_config"],
                        section_name + ".motor_nodemanger_config")
        if isinstance(section.get("health_check_config"), dict):
            _check_class(ctx, section["health_check_config"], "endpoint.HealthCheckConfig",
                         section_name + ".health_check_config")
    _check_conductor(ctx, uc.get("kv_conductor_config"))
    pool = uc.get("kv_cache_pool_config")
    for key in pool if isinstance(pool, dict) else ():
        if key not in KV_POOL_KEYS:
            unknown_key(ctx, "kv_cache_pool_config", key, "the KV pool (Mooncake)", KV_POOL_KEYS, MOONCAKE_STORE,
                        far_hint="it is passed to Mooncake as written; check it against Mooncake's store config")


# vLLM's JSON-valued arguments all end in _config: their shared suffix would make any two look alike
# (profiler_config ~ pooler_config), so a dict-valued *_config key is compared by what comes before the suffix.
CONFIG_SUFFIX = "_config"


def _vllm_guess(key, value, known):
    """The known vLLM argument an unknown one is close to (None: far from all), read the way PyMotor renders it:
    ``no_<flag>: true`` becomes ``--no-<flag>`` (vLLM's negative of a boolean flag) and a dict becomes ``--<key>
    '<json>'`` (motor/engine_server/core/vllm/vllm_config.py:27-41 and :321-322 at 7d15c04)."""
    if key.startswith("no_"):
        guess = suggest(key[3:], known)
        return "no_" + guess if guess else None
    if key.endswith(CONFIG_SUFFIX) and isinstance(value, dict):
        stems = [name[:-len(CONFIG_SUFFIX)] for name in known if name.endswith(CONFIG_SUFFIX)]
        guess = suggest(key[:-len(CONFIG_SUFFIX)], stems)
        return guess + CONFIG_SUFFIX if guess else None
    return suggest(key, known)


def check_vllm_keys(ctx, engine_config, path):
    """engine_config of a vLLM engine (keys in the underscore spelling): vLLM's own arguments."""
    known = ctx.keys.vllm_keys
    for key, value in engine_config.items():
        if key in known:
            continue
        if key.startswith("no_") and key[3:] in known:
            # vLLM's boolean flags take --no-<flag> (argparse BooleanOptionalAction); PyMotor writes the flag for true
            if not isinstance(value, bool):
                ctx.error(join_path(path, key), "expected true or false, got %s" % describe(value),
                          "PyMotor renders %s: true as the flag --%s and false as nothing" % (
                              key, key.replace("_", "-")))
            continue
        unknown_key(ctx, path, key, "vLLM's arguments", known, ctx.keys.vllm, _vllm_guess(key, value, known),
                    far_hint="PyMotor passes it to vLLM as --%s; vLLM refuses an argument it does not know at engine "
                    "start, so keep it only if the image's vLLM has it (motor_unknown_keys=error refuses it here)"
                    % key.replace("_", "-"))


def check_sglang_keys(ctx, engine_config, path):
    """engine_config of an SGLang engine, only when the image's SGLang gave its ServerArgs (no built-in list)."""
    known = ctx.keys.sglang_keys
    if known is None:
        return
    for key in engine_config:
        if key not in known:
            unknown_key(ctx, path, key, "SGLang's server arguments", known, ctx.keys.sglang,
                        far_hint="PyMotor passes it to SGLang as --%s, whose parser refuses an argument it does not "
                        "know" % key.replace("_", "-"))
