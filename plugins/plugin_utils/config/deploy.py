# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The top level and motor_deploy_config: version, hardware, job_id, weights, mode, instance counts."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.coerce import coerce_deploy_counts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import (
    describe,
    dict_or_none,
    int_in,
    str_or_none,
    reject_unknown_keys,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.schema import (
    DEFAULT_DEPLOY_MODE,
    DEPLOY_CONFIG_KEYS,
    DEPLOY_MODES,
    HYBRID_KEYS,
    INSTANCE_NUM_MAX,
    SEPARATION_KEYS,
    TOP_LEVEL_KEYS,
    VERSION,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import (
    DEPLOY_KEYS,
    ENGINE_SECTIONS,
    FIXED_NPU_HARDWARE,
    HARDWARE_NPUS,
    NPU_GROUP,
    NPU_GROUP_NAME,
    WEIGHT_MOUNT_PATH,
    job_id_problem,
    splits_npu_group,
)


def check_top_level(ctx, uc):
    if "version" not in uc:
        ctx.error("version", "missing required key", 'add "version": "v2.0"')
    elif uc["version"] != VERSION:
        ctx.error("version", "unsupported version %s" % describe(uc["version"]),
                  'PyMotor reads only "version": "v2.0"')
    reject_unknown_keys(ctx, uc, TOP_LEVEL_KEYS, "", "top-level")
    for key in TOP_LEVEL_KEYS[2:]:  # version and motor_deploy_config are checked on their own
        dict_or_none(ctx, uc, key, key)


def _check_hardware(ctx, deploy):
    path = "motor_deploy_config.hardware_type"
    value = str_or_none(ctx, deploy, "hardware_type", path, required=True,
                        hint='add "hardware_type": "800I_A2", "800I_A3" or an Atlas A5 type such as "350-Atlas-8"')
    if value is None or value in HARDWARE_NPUS:
        return value
    fixed = value.replace("-", "_")
    if fixed in HARDWARE_NPUS:
        hint = ("write '%s' with an underscore: the hyphen spelling '%s' is NodeManager's internal enum, "
                "the deployer reads '800I_A2'/'800I_A3'" % (fixed, value))
    else:
        hint = "use one of %s" % ", ".join("%s (%d NPUs per host)" % item for item in HARDWARE_NPUS.items())
    ctx.error(path, "unsupported hardware_type %s" % describe(value), hint)
    return None


def check_deploy(ctx, uc):
    """Validate motor_deploy_config, fill its defaults; return (section, hardware, job_id)."""
    deploy = dict_or_none(ctx, uc, "motor_deploy_config", "motor_deploy_config", required=True,
                          hint="PyMotor needs motor_deploy_config with instance counts and hardware_type")
    if deploy is None:
        return None, None, None
    reject_unknown_keys(ctx, deploy, DEPLOY_CONFIG_KEYS, "motor_deploy_config", "motor_deploy_config")
    hardware = _check_hardware(ctx, deploy)
    job_id = str_or_none(ctx, deploy, "job_id", "motor_deploy_config.job_id", required=True,
                         hint='add "job_id": "mindie-motor"')
    bad_job_id = None if job_id is None else job_id_problem(job_id, describe(job_id))
    if bad_job_id is not None:
        ctx.error(*bad_job_id)
        job_id = None
    deploy.setdefault("weight_mount_path", WEIGHT_MOUNT_PATH)
    weight = str_or_none(ctx, deploy, "weight_mount_path", "motor_deploy_config.weight_mount_path")
    if weight is not None and not weight.startswith("/"):
        ctx.error("motor_deploy_config.weight_mount_path", "%s is not an absolute path" % describe(weight),
                  "start it with '/', e.g. /mnt/weight")
    deploy.setdefault("deploy_mode", DEFAULT_DEPLOY_MODE)
    mode = str_or_none(ctx, deploy, "deploy_mode", "motor_deploy_config.deploy_mode")
    if mode is not None and mode not in DEPLOY_MODES:
        ctx.error("motor_deploy_config.deploy_mode", "unknown deploy_mode %s" % describe(mode),
                  "use one of %s" % ", ".join(DEPLOY_MODES))
    str_or_none(ctx, deploy, "image_name", "motor_deploy_config.image_name")
    hetero = deploy.get("enable_pd_heterogeneous")
    if hetero is not None and not isinstance(hetero, bool):
        ctx.warn("motor_deploy_config.enable_pd_heterogeneous", "%s is not JSON true: PyMotor's deployer treats it "
                 "as off, and so does the plan" % describe(hetero), "write true or false")
    for key in ("pd_heterogeneous_label_key", "pd_heterogeneous_prefill_label_value",
                "pd_heterogeneous_decode_label_value"):
        str_or_none(ctx, deploy, key, "motor_deploy_config." + key)
    return deploy, hardware, job_id


def _pick_mode(uc, sep_present, hyb_present):
    has_union = isinstance(uc.get(ENGINE_SECTIONS["union"]), dict)
    has_pd = any(isinstance(uc.get(ENGINE_SECTIONS[role]), dict) for role in ("prefill", "decode"))
    if hyb_present and not sep_present:
        return "pd_hybrid"
    if sep_present and not hyb_present:
        return "pd_separation"
    return "pd_hybrid" if has_union and not has_pd else "pd_separation"


def detect_mode(ctx, uc, deploy):
    """Decide pd_separation vs pd_hybrid and report incomplete or mixed setups."""
    deploy = deploy if deploy is not None else {}
    sep_present = [key for key in SEPARATION_KEYS if key in deploy]
    hyb_present = [key for key in HYBRID_KEYS if key in deploy]
    if sep_present and hyb_present:
        ctx.error("motor_deploy_config.%s" % hyb_present[0],
                  "PD hybrid keys (hybrid_*) and PD separation keys (p_*/d_*) are mutually exclusive",
                  "found %s and %s; keep the keys of one mode" % (hyb_present[0], sep_present[0]))
    mode = _pick_mode(uc, sep_present, hyb_present)
    roles = ("union",) if mode == "pd_hybrid" else ("prefill", "decode")
    if deploy:
        for role in roles:
            for key in DEPLOY_KEYS[role]:
                if key not in deploy:
                    ctx.error("motor_deploy_config.%s" % key, "missing required key for %s" % mode,
                              "%s needs %s" % (mode, ", ".join(k for r in roles for k in DEPLOY_KEYS[r])))
    for role in roles:
        if ENGINE_SECTIONS[role] not in uc:
            ctx.error(ENGINE_SECTIONS[role], "missing required section for %s" % mode,
                      "add %s with engine_type and engine_config" % ENGINE_SECTIONS[role])
    for role in set(ENGINE_SECTIONS) - set(roles):
        if ENGINE_SECTIONS[role] in uc:
            ctx.error(ENGINE_SECTIONS[role], "section not allowed in %s" % mode,
                      "PD hybrid uses only motor_engine_union_config with hybrid_* keys; "
                      "PD separation uses prefill and decode sections with p_*/d_* keys")
    if mode == "pd_hybrid" and "engine_topology" in deploy:
        ctx.error("motor_deploy_config.engine_topology", "not allowed in pd_hybrid", "remove it")
    return mode


def _check_counts(ctx, deploy, role, hardware):
    """Return (instances, pods per instance, NPUs per pod) for a role; None where invalid."""
    if deploy is None:
        return None, None, None
    count_key, pods_key, npus_key = DEPLOY_KEYS[role]
    coerce_deploy_counts(ctx, deploy, DEPLOY_KEYS[role])
    count = int_in(ctx, deploy, count_key, "motor_deploy_config." + count_key, 1, INSTANCE_NUM_MAX,
                   hint="PyMotor allows 1..%d instances per role" % INSTANCE_NUM_MAX)
    pods = int_in(ctx, deploy, pods_key, "motor_deploy_config." + pods_key, 1,
                  hint="an instance needs at least one pod, i.e. one host")
    # An Atlas 800I A2/A3 has its NPU count by product. An A5 type name is a schedule policy whose number is not the
    # node's NPU count for every site (PyMotor's vllm_pd_hetero asks for 16-NPU pods on 950-SuperPod-Atlas-8): the
    # plan checks those pods against the hosts' own NPUs (inventory motor_npu_ids or discovery), here only the largest
    # host bounds them (issue 36).
    max_npus = HARDWARE_NPUS.get(hardware, 16) if hardware in FIXED_NPU_HARDWARE else max(HARDWARE_NPUS.values())
    npus = int_in(ctx, deploy, npus_key, "motor_deploy_config." + npus_key, 1, max_npus,
                  hint="%s hosts have at most %d NPUs" % (hardware or "800I_A3", max_npus))
    if npus is not None and splits_npu_group(hardware, npus):
        message = "%d NPUs per pod on %s splits a %s" % (npus, hardware, NPU_GROUP_NAME[hardware])
        ctx.warn("motor_deploy_config." + npus_key, message, "%s NPUs come in groups of %d; use a count that fills "
                 "whole groups or fits in one" % (hardware, NPU_GROUP[hardware]))
    return count, pods, npus
