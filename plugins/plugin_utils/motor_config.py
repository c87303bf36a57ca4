# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Validate and normalize a PyMotor ``user_config.json`` / ``env.json`` pair.

Pure Python (no I/O, no Ansible imports) so it is unit-testable on its own.
The contract (output keys, error format, paths) is described in
``docs/design.md`` ("Contract of motor_config").

Public API: :func:`normalize`, :func:`load_json_text`, :class:`MotorConfigError`,
:class:`Problem`.
"""

from __future__ import annotations

import copy
import difflib
import json
import posixpath
import re
from collections import namedtuple

__all__ = ["MotorConfigError", "Problem", "load_json_text", "normalize", "format_problem"]

Problem = namedtuple("Problem", ["path", "message", "hint"])
Problem.__doc__ = "One finding: JSON path, what is wrong, how to fix it."

# ---------------------------------------------------------------------------
# Constants (PyMotor 3.0 / seed-era names; see reference pymotor.md sections 2, 3, 6, 7, 9, 10)
# ---------------------------------------------------------------------------

VERSION = "v2.0"
ENV_VERSION = "2.0.0"
HARDWARE_NPUS = {"800I_A2": 8, "800I_A3": 16}
DEFAULT_WEIGHT_MOUNT_PATH = "/mnt/weight"
DEFAULT_DEPLOY_MODE = "infer_service_set"
DEPLOY_MODES = ("infer_service_set", "multi_deployment", "single_container")
INSTANCE_NUM_MAX = 16
SCHEDULER_TYPES = ("load_balance", "round_robin", "kv_cache_affinity")
SCHEDULER_DEPLOY_MODES = (
    "pd_separate", "single_node", "cdp_separate", "cpcd_separate",
    "pd_dual_dispatch", "pd_disaggregation_single_container",
)
ENGINE_TYPES = ("vllm", "sglang", "mindie-llm")
DISPATCH_PROFILES = ("handoff", "trigger")
DEFAULT_KV_POOL_PORT = 50088
DEFAULT_KV_POOL_METRICS_PORT = 9003
DEFAULT_KV_LEASE_TTL = 11000
# Mooncake master's own defaults, used only when no engine needs the pool (see design.md).
MOONCAKE_DEFAULT_RATIOS = {"eviction_high_watermark_ratio": 0.95, "eviction_ratio": 0.05}
DEFAULT_CONDUCTOR_PORT = 13333
DEFAULT_NUM_WORKERS = 4
DEFAULT_METASERVER_BASE_PORT = 12000
PORT_MAX = 65535
DEFAULT_BLOCK_SIZE = 128

TOP_LEVEL_KEYS = (
    "version", "motor_deploy_config", "motor_controller_config", "motor_coordinator_config",
    "motor_nodemanger_config", "motor_engine_prefill_config", "motor_engine_decode_config",
    "motor_engine_union_config", "motor_engine_encode_config", "kv_cache_pool_config",
    "kv_conductor_config",
)
SECTIONS = {
    "prefill": "motor_engine_prefill_config",
    "decode": "motor_engine_decode_config",
    "union": "motor_engine_union_config",
}
ROLE_KEYS = {  # role -> (instances, pods per instance, NPUs per pod)
    "prefill": ("p_instances_num", "single_p_instance_pod_num", "p_pod_npu_num"),
    "decode": ("d_instances_num", "single_d_instance_pod_num", "d_pod_npu_num"),
    "union": ("hybrid_instances_num", "single_hybrid_instance_pod_num", "hybrid_pod_npu_num"),
}
SEPARATION_KEYS = ROLE_KEYS["prefill"] + ROLE_KEYS["decode"]
HYBRID_KEYS = ROLE_KEYS["union"]
DEPLOY_KEYS = SEPARATION_KEYS + HYBRID_KEYS + (
    "image_name", "job_id", "hardware_type", "weight_mount_path", "deploy_mode", "tls_config",
    "e_instances_num", "single_e_instance_pod_num", "e_pod_npu_num",
    "enable_pd_heterogeneous", "pd_heterogeneous_label_key", "engine_topology",
)
ENGINE_SECTION_KEYS = (
    "engine_type", "engine_config", "motor_nodemanger_config", "health_check_config",
    "dispatch_profile", "dispatch_capabilities", "enable_multi_endpoints",
)
JOB_ID_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
ENDPOINT_RE = re.compile(r"^tcp://\*:(\d+)$")
SEGMENT_SIZE_RE = re.compile(r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB)$", re.IGNORECASE)
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENGINE_CONFIG_PATH_RE = re.compile(r"^(motor_engine_[a-z]+_config\.engine_config\.)([^.\[]+)")

HANDOFF_CONNECTORS = ("MooncakeConnectorV1", "MooncakeHybridConnector", "NixlConnector")
TRIGGER_CONNECTORS = ("MooncakeLayerwiseConnector",)
STORE_CONNECTORS = ("AscendStoreConnector", "MooncakeConnectorStoreV1")
CAPABILITY_BY_CONNECTOR = dict(
    [(name.lower(), "handoff") for name in HANDOFF_CONNECTORS]
    + [(name.lower(), "trigger") for name in TRIGGER_CONNECTORS]
)
STORE_BY_LOWER = {name.lower(): name for name in STORE_CONNECTORS}
EXPECTED_KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}
CONTRARY_KV_ROLE = {"prefill": "kv_consumer", "decode": "kv_producer"}

ENV_SECTIONS = (
    "motor_common_env", "motor_controller_env", "motor_coordinator_env",
    "motor_engine_prefill_env", "motor_engine_decode_env", "motor_engine_union_env",
    "motor_engine_encode_env", "motor_kv_cache_pool_env", "motor_kv_conductor_env",
    "motor_mf_store_env",
)
ROLE_ENV_SECTIONS = (
    ("controller", "motor_controller_env"),
    ("coordinator", "motor_coordinator_env"),
    ("prefill", "motor_engine_prefill_env"),
    ("decode", "motor_engine_decode_env"),
    ("union", "motor_engine_union_env"),
    ("kv_pool", "motor_kv_cache_pool_env"),
    ("kv_conductor", "motor_kv_conductor_env"),
)

_MISSING = object()


# ---------------------------------------------------------------------------
# Errors and the problem collector
# ---------------------------------------------------------------------------

def format_problem(problem):
    """Render a :class:`Problem` as ``<path>: <message> (<hint>)``."""
    if problem.hint:
        return "%s: %s (%s)" % (problem.path, problem.message, problem.hint)
    return "%s: %s" % (problem.path, problem.message)


class MotorConfigError(Exception):
    """Raised when a configuration has errors; ``.problems`` lists every one of them."""

    def __init__(self, problems, warnings=None):
        self.problems = list(problems)
        self.warnings = list(warnings or [])
        super().__init__(str(self))

    def __str__(self):
        return "\n".join(format_problem(problem) for problem in self.problems)


class _Context:
    """Collects errors and warnings; tags paths that came from an override."""

    def __init__(self, overridden):
        self.errors = []
        self.warnings = []
        self.overridden = overridden

    def _origin(self, path):
        # The path itself or an ancestor (a replaced list or dict) may come from an override.
        for candidate in [path] + _ancestors(path):
            if candidate in self.overridden:
                return self.overridden[candidate]
        return None

    def _problem(self, path, message, hint):
        index = self._origin(path)
        if index is not None:
            message = "%s (set by override %d)" % (message, index)
        return Problem(path, message, hint)

    def error(self, path, message, hint=""):
        """Record an error."""
        self.errors.append(self._problem(path, message, hint))

    def warn(self, path, message, hint=""):
        """Record a warning."""
        self.warnings.append(self._problem(path, message, hint))


def _ancestors(path):
    cuts = [i for i, char in enumerate(path) if char in ".[" and i > 0]
    return [path[:i] for i in reversed(cuts)]


def _join(path, key):
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    return "%s.%s" % (path, key) if path else str(key)


def _canonical_key(key):
    return str(key).replace("-", "_")


def _canonical_path(path):
    """Spell the engine_config key of a path with underscores, as the normalized config does."""
    return ENGINE_CONFIG_PATH_RE.sub(lambda m: m.group(1) + _canonical_key(m.group(2)), path)


# ---------------------------------------------------------------------------
# Small typed accessors
# ---------------------------------------------------------------------------

def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean %s" % json.dumps(value)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "string %s" % json.dumps(value, ensure_ascii=False)
    # by kind, not type(value).__name__: values from Ansible variables are subclasses such as _AnsibleTaggedFloat
    kind = "int" if isinstance(value, int) else "float" if isinstance(value, float) else type(value).__name__
    return "%s %r" % (kind, value)


def _dict_or_none(ctx, parent, key, path, required=False, hint=""):
    """Return ``parent[key]`` if it is an object; report a wrong type or a missing key."""
    value = parent.get(key, _MISSING) if isinstance(parent, dict) else _MISSING
    if value is _MISSING:
        if required:
            ctx.error(path, "missing required object", hint or "add it")
        return None
    if not isinstance(value, dict):
        ctx.error(path, "expected an object, got %s" % _describe(value), hint or "use a JSON object {...}")
        return None
    return value


def _int_in(ctx, parent, key, path, low, high=None, hint="", default=_MISSING):
    """Return an integer within [low, high] or None (after reporting why)."""
    value = parent.get(key, default)
    if value is _MISSING:
        return None
    if not _is_int(value):
        ctx.error(path, "expected an integer, got %s" % _describe(value), hint or "write a plain JSON integer")
        return None
    if value < low or (high is not None and value > high):
        bounds = "in %d..%d" % (low, high) if high is not None else ">= %d" % low
        ctx.error(path, "%d is out of range: must be %s" % (value, bounds), hint or "use a value %s" % bounds)
        return None
    return value


def _str_or_none(ctx, parent, key, path, required=False, hint=""):
    value = parent.get(key, _MISSING)
    if value is _MISSING:
        if required:
            ctx.error(path, "missing required string", hint or "add it")
        return None
    if not isinstance(value, str):
        ctx.error(path, "expected a string, got %s" % _describe(value), hint or "quote the value")
        return None
    return value


def _suggest(key, known):
    matches = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.75)
    return matches[0] if matches else None


def _warn_unknown_keys(ctx, mapping, known, path, what):
    for key in mapping:
        if key in known:
            continue
        guess = _suggest(key, known)
        hint = "did you mean '%s'?" % guess if guess else "check the spelling or remove it"
        ctx.warn(_join(path, key), "unknown %s key, ignored by PyMotor" % what, hint)


# ---------------------------------------------------------------------------
# Overrides: deep merge with provenance
# ---------------------------------------------------------------------------

def _record_leaves(value, path, index, record):
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _record_leaves(child, _join(path, key), index, record)
    else:
        record[_canonical_path(path)] = index


def _merge_key(result, key, path):
    # Inside engine_config, "kv-events-config" and "kv_events_config" are the same key.
    if not re.match(r"^motor_engine_[a-z]+_config\.engine_config$", path):
        return key
    for existing in result:
        if _canonical_key(existing) == _canonical_key(key):
            return existing
    return key


def _deep_merge(base, override, path, index, record):
    result = dict(base)
    for key, value in override.items():
        target = _merge_key(result, key, path)
        child_path = _join(path, key)
        if value is None:
            result.pop(target, None)
            record[_canonical_path(child_path)] = index
        elif isinstance(value, dict) and isinstance(result.get(target), dict):
            result[target] = _deep_merge(result[target], value, _join(path, target), index, record)
        else:
            result[target] = copy.deepcopy(value)
            _record_leaves(value, child_path, index, record)
    return result


def _apply_overrides(ctx, user_config, overrides):
    """Deep-merge every override dict onto user_config; return (merged, overridden)."""
    record = {}
    if overrides is None:
        return user_config, record
    if not isinstance(overrides, (list, tuple)):
        ctx.error("overrides", "expected a list of objects, got %s" % _describe(overrides),
                  "pass a list such as [{...}, {...}]")
        return user_config, record
    merged = user_config
    for index, override in enumerate(overrides):
        if not isinstance(override, dict):
            ctx.error("overrides[%d]" % index, "expected an object, got %s" % _describe(override),
                      "each override is a dict deep-merged onto user_config")
            continue
        if isinstance(merged, dict):
            merged = _deep_merge(merged, override, "", index, record)
    return merged, record


# ---------------------------------------------------------------------------
# Top level and motor_deploy_config
# ---------------------------------------------------------------------------

def _check_top_level(ctx, uc):
    if "version" not in uc:
        ctx.error("version", "missing required key", 'add "version": "v2.0"')
    elif uc["version"] != VERSION:
        ctx.error("version", "unsupported version %s" % _describe(uc["version"]),
                  'PyMotor reads only "version": "v2.0"')
    _warn_unknown_keys(ctx, uc, TOP_LEVEL_KEYS, "", "top-level")
    for key in TOP_LEVEL_KEYS[2:]:  # version and motor_deploy_config are checked on their own
        _dict_or_none(ctx, uc, key, key)
    if isinstance(uc.get("motor_engine_encode_config"), dict):
        ctx.warn("motor_engine_encode_config", "encode (EPD) instances are not deployed by this collection",
                 "the section is passed through untouched")


def _check_hardware(ctx, deploy):
    path = "motor_deploy_config.hardware_type"
    value = _str_or_none(ctx, deploy, "hardware_type", path, required=True,
                         hint='add "hardware_type": "800I_A2" or "800I_A3"')
    if value is None or value in HARDWARE_NPUS:
        return value
    fixed = value.replace("-", "_")
    if fixed in HARDWARE_NPUS:
        hint = ("write '%s' with an underscore: the hyphen spelling '%s' is NodeManager's internal enum, "
                "the deployer reads '800I_A2'/'800I_A3'" % (fixed, value))
    else:
        hint = "use 800I_A2 with 8 NPUs per host or 800I_A3 with 16"
    ctx.error(path, "unsupported hardware_type %s" % _describe(value), hint)
    return None


def _check_deploy(ctx, uc):
    """Validate motor_deploy_config, fill its defaults; return (section, hardware, job_id)."""
    deploy = _dict_or_none(ctx, uc, "motor_deploy_config", "motor_deploy_config", required=True,
                           hint="PyMotor needs motor_deploy_config with instance counts and hardware_type")
    if deploy is None:
        return None, None, None
    _warn_unknown_keys(ctx, deploy, DEPLOY_KEYS, "motor_deploy_config", "motor_deploy_config")
    hardware = _check_hardware(ctx, deploy)
    job_id = _str_or_none(ctx, deploy, "job_id", "motor_deploy_config.job_id", required=True,
                          hint='add "job_id": "mindie-motor"')
    if job_id is not None and not JOB_ID_RE.match(job_id):
        ctx.error("motor_deploy_config.job_id", "%s is not a DNS-label-like name" % _describe(job_id),
                  "use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit")
        job_id = None
    deploy.setdefault("weight_mount_path", DEFAULT_WEIGHT_MOUNT_PATH)
    weight = _str_or_none(ctx, deploy, "weight_mount_path", "motor_deploy_config.weight_mount_path")
    if weight is not None and not weight.startswith("/"):
        ctx.error("motor_deploy_config.weight_mount_path", "%s is not an absolute path" % _describe(weight),
                  "start it with '/', e.g. /mnt/weight")
    deploy.setdefault("deploy_mode", DEFAULT_DEPLOY_MODE)
    mode = _str_or_none(ctx, deploy, "deploy_mode", "motor_deploy_config.deploy_mode")
    if mode is not None and mode not in DEPLOY_MODES:
        ctx.error("motor_deploy_config.deploy_mode", "unknown deploy_mode %s" % _describe(mode),
                  "use one of %s" % ", ".join(DEPLOY_MODES))
    _str_or_none(ctx, deploy, "image_name", "motor_deploy_config.image_name")
    return deploy, hardware, job_id


def _pick_mode(uc, sep_present, hyb_present):
    has_union = isinstance(uc.get(SECTIONS["union"]), dict)
    has_pd = any(isinstance(uc.get(SECTIONS[role]), dict) for role in ("prefill", "decode"))
    if hyb_present and not sep_present:
        return "pd_hybrid"
    if sep_present and not hyb_present:
        return "pd_separation"
    return "pd_hybrid" if has_union and not has_pd else "pd_separation"


def _detect_mode(ctx, uc, deploy):
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
            for key in ROLE_KEYS[role]:
                if key not in deploy:
                    ctx.error("motor_deploy_config.%s" % key, "missing required key for %s" % mode,
                              "%s needs %s" % (mode, ", ".join(k for r in roles for k in ROLE_KEYS[r])))
    for role in roles:
        if SECTIONS[role] not in uc:
            ctx.error(SECTIONS[role], "missing required section for %s" % mode,
                      "add %s with engine_type and engine_config" % SECTIONS[role])
    for role in set(SECTIONS) - set(roles):
        if SECTIONS[role] in uc:
            ctx.error(SECTIONS[role], "section not allowed in %s" % mode,
                      "PD hybrid uses only motor_engine_union_config with hybrid_* keys; "
                      "PD separation uses prefill and decode sections with p_*/d_* keys")
    if mode == "pd_hybrid" and "engine_topology" in deploy:
        ctx.error("motor_deploy_config.engine_topology", "not allowed in pd_hybrid", "remove it")
    return mode


def _check_counts(ctx, deploy, role, hardware):
    """Return (instances, pods per instance, NPUs per pod) for a role; None where invalid."""
    if deploy is None:
        return None, None, None
    count_key, pods_key, npus_key = ROLE_KEYS[role]
    count = _int_in(ctx, deploy, count_key, "motor_deploy_config." + count_key, 1, INSTANCE_NUM_MAX,
                    hint="PyMotor allows 1..%d instances per role" % INSTANCE_NUM_MAX)
    pods = _int_in(ctx, deploy, pods_key, "motor_deploy_config." + pods_key, 1,
                   hint="an instance needs at least one pod, i.e. one host")
    max_npus = HARDWARE_NPUS.get(hardware, 16)
    npus = _int_in(ctx, deploy, npus_key, "motor_deploy_config." + npus_key, 1, max_npus,
                   hint="%s hosts have %d NPUs" % (hardware or "800I_A3", max_npus))
    if hardware == "800I_A3" and npus is not None and npus > 1 and npus % 2:
        ctx.warn("motor_deploy_config." + npus_key, "odd NPU count %d on 800I_A3" % npus,
                 "A3 NPU dies come in pairs; use an even count")
    return count, pods, npus


# ---------------------------------------------------------------------------
# Engine sections
# ---------------------------------------------------------------------------

def _normalize_engine_keys(ctx, engine_config, path):
    """Return engine_config with underscore keys; report conflicting spellings."""
    groups = {}
    for key in engine_config:
        groups.setdefault(_canonical_key(key), []).append(key)
    result = {}
    for canonical, keys in groups.items():
        values = [engine_config[key] for key in keys]
        if any(value != values[0] for value in values[1:]):
            for key in keys:
                if "-" in key:
                    others = ", ".join("'%s'" % other for other in keys if other != key)
                    ctx.error(_join(path, key), "conflicts with %s: the same key in another spelling with a "
                              "different value" % others, "hyphen and underscore spellings are one vLLM flag; keep one")
        result[canonical] = values[0]
    return result


def _check_engine_type(ctx, section, path):
    engine_type = _str_or_none(ctx, section, "engine_type", path + ".engine_type", required=True,
                               hint='add "engine_type": "vllm"')
    if engine_type is None:
        return None
    if engine_type not in ENGINE_TYPES:
        ctx.error(path + ".engine_type", "unknown engine_type %s" % _describe(engine_type),
                  "use one of %s" % ", ".join(ENGINE_TYPES))
        return None
    if engine_type != "vllm":
        ctx.warn(path + ".engine_type", "engine_type %s is not fully supported by this collection" % engine_type,
                 "only vllm is tested end to end")
    return engine_type


def _check_section_extras(ctx, section, path):
    _warn_unknown_keys(ctx, section, ENGINE_SECTION_KEYS, path, "engine section")
    profile = section.get("dispatch_profile")
    if profile is not None and profile not in DISPATCH_PROFILES:
        ctx.error(path + ".dispatch_profile", "unknown dispatch_profile %s" % _describe(profile),
                  "use 'handoff' or 'trigger'")
    if "dispatch_capabilities" in section:
        ctx.warn(path + ".dispatch_capabilities", "internal field, PyMotor drops it", "use dispatch_profile instead")
    _dict_or_none(ctx, section, "motor_nodemanger_config", path + ".motor_nodemanger_config")
    _dict_or_none(ctx, section, "health_check_config", path + ".health_check_config")


def _check_model(ctx, engine_config, path, weight_path):
    name = _str_or_none(ctx, engine_config, "served_model_name", path + ".served_model_name", required=True,
                        hint="the name clients send as 'model'")
    if name is not None and not name.strip():
        ctx.error(path + ".served_model_name", "must not be empty", "the name clients send as 'model'")
    model = _str_or_none(ctx, engine_config, "model", path + ".model", required=True,
                         hint="absolute path of the weights inside the container")
    if model is not None and not model.startswith("/"):
        ctx.error(path + ".model", "%s is not an absolute path" % _describe(model),
                  "use the weight directory's absolute path, under weight_mount_path")
    elif model is not None and isinstance(weight_path, str) and weight_path.startswith("/"):
        root = posixpath.normpath(weight_path)
        if posixpath.commonpath([root, posixpath.normpath(model)]) != root:
            ctx.warn(path + ".model", "%s is not under weight_mount_path %s" % (model, weight_path),
                     "containers mount only weight_mount_path; make sure the model is reachable there")
    return name, model


def _check_parallel(ctx, engine_config, path, pods, npus):
    sizes = {}
    for key in ("data_parallel_size", "tensor_parallel_size", "pipeline_parallel_size"):
        sizes[key] = _int_in(ctx, engine_config, key, _join(path, key), 1, default=1)
    _int_in(ctx, engine_config, "block_size", _join(path, "block_size"), 1)
    dp, tp, pp = sizes["data_parallel_size"], sizes["tensor_parallel_size"], sizes["pipeline_parallel_size"]
    if None in (dp, tp, pp, pods, npus):
        return dp, tp, pp, None
    product, capacity = dp * tp * pp, pods * npus
    detail = "data_parallel_size x tensor_parallel_size x pipeline_parallel_size = %d x %d x %d = %d" % (
        dp, tp, pp, product)
    if product > capacity:
        ctx.error(path, "%s exceeds the instance's %d pod(s) x %d NPUs = %d" % (detail, pods, npus, capacity),
                  "lower the parallel sizes or raise the pod or NPU counts")
        return dp, tp, pp, None
    if dp % pods:
        ctx.error(path + ".data_parallel_size", "%d DP ranks cannot be split evenly over %d pods" % (dp, pods),
                  "each pod hosts whole DP ranks; use a multiple of the pod count")
        return dp, tp, pp, None
    if product < capacity:
        ctx.warn(path, "%s uses fewer than the instance's %d NPUs (%d pod(s) x %d)" % (detail, capacity, pods, npus),
                 "idle NPUs stay reserved")
    return dp, tp, pp, dp // pods


def _check_engine(ctx, uc, role, deploy, hardware):
    """Validate one engine section, normalize its engine_config keys; return the engine summary."""
    path = SECTIONS[role]
    section = uc.get(path)
    count, pods, npus = _check_counts(ctx, deploy, role, hardware)
    if not isinstance(section, dict):
        return None
    _check_section_extras(ctx, section, path)
    engine_type = _check_engine_type(ctx, section, path)
    ec_path = path + ".engine_config"
    engine_config = _dict_or_none(ctx, section, "engine_config", ec_path, required=True,
                                  hint="add engine_config with served_model_name and model")
    if engine_config is None:
        return None
    engine_config = section["engine_config"] = _normalize_engine_keys(ctx, engine_config, ec_path)
    weight_path = (deploy or {}).get("weight_mount_path")
    name, model = _check_model(ctx, engine_config, ec_path, weight_path)
    dp, tp, pp, dp_local = _check_parallel(ctx, engine_config, ec_path, pods, npus)
    if role == "decode" and "kv_events_config" in engine_config:
        ctx.warn(ec_path + ".kv_events_config", "ignored on decode instances",
                 "only prefill (or union) engines publish KV events for the conductor")
    return {
        "section": path, "count": count, "pods": pods, "npus_per_pod": npus,
        "dp": dp, "tp": tp, "pp": pp, "dp_local_per_pod": dp_local,
        "engine_type": engine_type, "served_model_name": name, "model": model,
        "transfer": {"connector": None, "store_connector": None, "capability": None, "source": None},
    }


# ---------------------------------------------------------------------------
# KV transfer connectors
# ---------------------------------------------------------------------------

def _connector_name(ctx, mapping, path):
    name = mapping.get("kv_connector") if isinstance(mapping, dict) else None
    if not isinstance(name, str) or not name:
        ctx.error(path + ".kv_connector", "expected a connector name, got %s" % _describe(name),
                  "e.g. MooncakeLayerwiseConnector")
        return None
    return name


def _warn_kv_role(ctx, mapping, path, role):
    if isinstance(mapping, dict) and mapping.get("kv_role") == CONTRARY_KV_ROLE.get(role):
        ctx.warn(path + ".kv_role", "%s on a %s section is contrary to its role" % (mapping["kv_role"], role),
                 "engine_server replaces it with %s at start" % EXPECTED_KV_ROLE[role])


def _multi_connector(ctx, ktc, path, role):
    """Return (transport name, its path, store name) of a MultiConnector, or None if malformed."""
    extra = ktc.get("kv_connector_extra_config")
    connectors = extra.get("connectors") if isinstance(extra, dict) else None
    list_path = path + ".kv_connector_extra_config.connectors"
    if not isinstance(connectors, list) or len(connectors) < 2:
        found = "%d connector(s)" % len(connectors) if isinstance(connectors, list) else _describe(connectors)
        ctx.error(list_path, "MultiConnector needs a list of at least 2 connectors, got %s" % found,
                  "connectors[0] is the P/D transport, connectors[1] the KV pool store connector")
        return None
    names = []
    for index, item in enumerate(connectors[:2]):
        item_path = "%s[%d]" % (list_path, index)
        if not isinstance(item, dict):
            ctx.error(item_path, "expected an object, got %s" % _describe(item), "each connector is an object")
            return None
        names.append(_connector_name(ctx, item, item_path))
    for index, item in enumerate(connectors):
        _warn_kv_role(ctx, item, "%s[%d]" % (list_path, index), role)
    if names[1] is not None and names[1].lower() not in STORE_BY_LOWER:
        ctx.error(list_path + "[1].kv_connector", "%s is not a store connector" % json.dumps(names[1]),
                  "connectors[1] must be %s" % " or ".join(STORE_CONNECTORS))
    if None in names:
        return None
    return names[0], list_path + "[0].kv_connector", names[1]


def _classify(ctx, section, role):
    """Fill the transfer summary of a P or D section (vLLM only)."""
    path = SECTIONS[role] + ".engine_config.kv_transfer_config"
    ktc = section["engine_config"].get("kv_transfer_config", _MISSING)
    transfer = {"connector": None, "store_connector": None, "capability": None, "source": None}
    if ktc is _MISSING:
        ctx.error(path, "missing: PD separation needs a KV connector", "add kv_transfer_config, e.g. "
                  "{\"kv_connector\": \"MooncakeLayerwiseConnector\", \"kv_role\": \"%s\"}" % EXPECTED_KV_ROLE[role])
        return transfer, False
    if not isinstance(ktc, dict):
        ctx.error(path, "expected an object, got %s" % _describe(ktc), "use a JSON object")
        return transfer, False
    name = _connector_name(ctx, ktc, path)
    _warn_kv_role(ctx, ktc, path, role)
    if name is None:
        return transfer, False
    transfer["connector"] = name
    judged, judged_path, source = name, path + ".kv_connector", "kv_connector"
    if name.lower() == "multiconnector":
        parts = _multi_connector(ctx, ktc, path, role)
        if parts is None:
            return transfer, False
        judged, judged_path, transfer["store_connector"] = parts
        source = "connectors[0]"
    elif name.lower() in STORE_BY_LOWER:
        transfer["store_connector"] = STORE_BY_LOWER[name.lower()]
    capability = CAPABILITY_BY_CONNECTOR.get(judged.lower())
    profile = section.get("dispatch_profile")
    if profile in DISPATCH_PROFILES:
        capability, source = profile, "dispatch_profile"
    elif capability is None:
        if profile is None:
            ctx.error(judged_path, "connector %s is not recognized; PyMotor cannot tell how P and D cooperate and "
                      "fails closed (503)" % judged,
                      "set dispatch_profile to handoff or trigger at the top level of %s, next to engine_type, or use "
                      "one of %s" % (SECTIONS[role], ", ".join(HANDOFF_CONNECTORS + TRIGGER_CONNECTORS)))
        return transfer, False
    transfer["capability"], transfer["source"] = capability, source
    return transfer, True


def _union_transfer(section):
    ktc = section["engine_config"].get("kv_transfer_config")
    transfer = {"connector": None, "store_connector": None, "capability": None, "source": None}
    if not isinstance(ktc, dict) or not isinstance(ktc.get("kv_connector"), str):
        return transfer
    name = ktc["kv_connector"]
    transfer["connector"] = name
    store = name
    if name.lower() == "multiconnector":
        extra = ktc.get("kv_connector_extra_config")
        connectors = extra.get("connectors") if isinstance(extra, dict) else None
        second = connectors[1] if isinstance(connectors, list) and len(connectors) > 1 else None
        store = second.get("kv_connector") if isinstance(second, dict) else None
    if isinstance(store, str) and store.lower() in STORE_BY_LOWER:
        transfer["store_connector"] = STORE_BY_LOWER[store.lower()]
    return transfer


def _check_transfer(ctx, uc, engines):
    """Classify connectors; P and D must agree on the capability."""
    if engines.get("union") is not None:
        engines["union"]["transfer"] = _union_transfer(uc[SECTIONS["union"]])
    valid = {}
    for role in ("prefill", "decode"):
        engine = engines.get(role)
        if engine is None or engine["engine_type"] != "vllm":
            continue
        engine["transfer"], valid[role] = _classify(ctx, uc[SECTIONS[role]], role)
    if not (valid.get("prefill") and valid.get("decode")):
        return
    p_section, d_section = uc[SECTIONS["prefill"]], uc[SECTIONS["decode"]]
    p_profile, d_profile = p_section.get("dispatch_profile"), d_section.get("dispatch_profile")
    if p_profile is not None and d_profile is not None and p_profile != d_profile:
        ctx.error(SECTIONS["decode"] + ".dispatch_profile", "%s differs from prefill's %s" % (d_profile, p_profile),
                  "dispatch_profile must be equal on P and D")
        return
    p_cap = engines["prefill"]["transfer"]["capability"]
    d_transfer = engines["decode"]["transfer"]
    if p_cap != d_transfer["capability"]:
        where = (SECTIONS["decode"] + ".dispatch_profile" if d_transfer["source"] == "dispatch_profile"
                 else SECTIONS["decode"] + ".engine_config.kv_transfer_config.kv_connector")
        ctx.error(where, "decode capability %s does not match prefill's %s" % (d_transfer["capability"], p_cap),
                  "P and D must both hand off or both trigger; handoff and trigger instances cannot be mixed")


# ---------------------------------------------------------------------------
# Ports the bare-metal plan reads from the user_config
# ---------------------------------------------------------------------------

def _port_number(value):
    """int for ints and digit strings (PyMotor's examples write both), else None."""
    if _is_int(value):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _check_port(ctx, parent, key, path, low=1, length=1, default_hint="remove the key for the default"):
    """A port (or the first of ``length`` consecutive ports) must end by 65535; absent keys are fine."""
    if not isinstance(parent, dict) or key not in parent:
        return None
    value = parent[key]
    number = _port_number(value)
    high = PORT_MAX - max(length, 1) + 1
    hint = "use a port in %d..%d, or %s" % (low, high, default_hint)
    if number is None:
        ctx.error(path, "expected a port number, got %s" % _describe(value), hint)
        return None
    if not low <= number <= high:
        span = " (it starts %d consecutive ports)" % length if length > 1 else ""
        ctx.error(path, "%d is out of range: must be in %d..%d%s" % (number, low, high, span), hint)
        return None
    return number


def _kv_port_parent(engine_config, base):
    """(mapping holding the Mooncake kv_port, its path) as the plan reads it, or (None, None)."""
    ktc = engine_config.get("kv_transfer_config")
    if not isinstance(ktc, dict):
        return None, None
    path = base + ".kv_transfer_config"
    if str(ktc.get("kv_connector", "")).lower() == "multiconnector":
        extra = ktc.get("kv_connector_extra_config")
        connectors = extra.get("connectors") if isinstance(extra, dict) else None
        if not isinstance(connectors, list) or not connectors or not isinstance(connectors[0], dict):
            return None, None
        return connectors[0], path + ".kv_connector_extra_config.connectors[0]"
    return ktc, path


def _check_ports(ctx, uc, engines):
    """Type and range of every port the plan takes from the user_config (it moves taken ports, never invalid ones)."""
    for section, keys in (("motor_controller_config", ("controller_api_port", "observability_api_port")),
                          ("motor_coordinator_config",
                           ("coordinator_api_infer_port", "coordinator_api_mgmt_port", "coordinator_obs_port"))):
        path = section + ".api_config"
        api = _dict_or_none(ctx, uc.get(section) if isinstance(uc.get(section), dict) else {}, "api_config", path)
        for key in keys:
            _check_port(ctx, api, key, _join(path, key))
    coordinator = uc.get("motor_coordinator_config")
    path = "motor_coordinator_config.inference_workers_config"
    workers = _dict_or_none(ctx, coordinator if isinstance(coordinator, dict) else {}, "inference_workers_config", path)
    if workers is not None:
        count = None
        if "num_workers" in workers:
            count = _port_number(workers["num_workers"])
            if count is None or count < 1:
                ctx.error(path + ".num_workers", "expected a positive integer, got %s" % _describe(workers["num_workers"]),
                          "the number of coordinator worker processes, default %d" % DEFAULT_NUM_WORKERS)
                count = None
        if "worker_metaserver_base_port" in workers:
            _check_port(ctx, workers, "worker_metaserver_base_port", path + ".worker_metaserver_base_port", low=0,
                        length=count or DEFAULT_NUM_WORKERS, default_hint="0 to disable the worker metaservers")
        elif count is not None and DEFAULT_METASERVER_BASE_PORT + count - 1 > PORT_MAX:
            ctx.error(path + ".num_workers", "%d workers need metaserver ports %d..%d, beyond %d"
                      % (count, DEFAULT_METASERVER_BASE_PORT, DEFAULT_METASERVER_BASE_PORT + count - 1, PORT_MAX),
                      "use fewer workers or set worker_metaserver_base_port")
    for role, engine in engines.items():
        section = uc.get(SECTIONS[role])
        if engine is None or not isinstance(section, dict) or not isinstance(section.get("engine_config"), dict):
            continue
        base = SECTIONS[role] + ".engine_config"
        engine_config = section["engine_config"]
        _check_port(ctx, engine_config, "data_parallel_rpc_port", base + ".data_parallel_rpc_port")
        parent, parent_path = _kv_port_parent(engine_config, base)
        _check_port(ctx, parent, "kv_port", _join(parent_path or "", "kv_port"), low=0,
                    length=engine["npus_per_pod"] or 1)
        manager = section.get("motor_nodemanger_config")
        if not isinstance(manager, dict):
            continue  # a wrong type is reported by _check_section_extras
        nm_path = SECTIONS[role] + ".motor_nodemanger_config"
        api = _dict_or_none(ctx, manager, "api_config", nm_path + ".api_config")
        _check_port(ctx, api, "node_manager_port", nm_path + ".api_config.node_manager_port")
        endpoint = _dict_or_none(ctx, manager, "endpoint_config", nm_path + ".endpoint_config")
        _check_port(ctx, endpoint, "base_port", nm_path + ".endpoint_config.base_port",
                    length=2 * (engine["dp_local_per_pod"] or 1))


# ---------------------------------------------------------------------------
# Scheduler, KV events (affinity), KV pool, KV conductor
# ---------------------------------------------------------------------------

def _check_scheduler(ctx, uc, mode):
    """Validate scheduler_config; return True when KV-cache-affinity scheduling is on."""
    coordinator = uc.get("motor_coordinator_config")
    coordinator = coordinator if isinstance(coordinator, dict) else {}
    base = "motor_coordinator_config.scheduler_config"
    scheduler = _dict_or_none(ctx, coordinator, "scheduler_config", base) or {}
    scheduler_type = _str_or_none(ctx, scheduler, "scheduler_type", base + ".scheduler_type")
    if scheduler_type is not None and scheduler_type not in SCHEDULER_TYPES:
        ctx.error(base + ".scheduler_type", "unknown scheduler_type %s" % _describe(scheduler_type),
                  "use one of %s" % ", ".join(SCHEDULER_TYPES))
    deploy_mode = _str_or_none(ctx, scheduler, "deploy_mode", base + ".deploy_mode")
    if deploy_mode is not None and deploy_mode not in SCHEDULER_DEPLOY_MODES:
        ctx.error(base + ".deploy_mode", "unknown deploy_mode %s" % _describe(deploy_mode),
                  "use one of %s" % ", ".join(SCHEDULER_DEPLOY_MODES))
    elif mode == "pd_hybrid" and deploy_mode != "single_node":
        ctx.error(base + ".deploy_mode", "PD hybrid needs \"single_node\", got %s" % _describe(scheduler.get("deploy_mode")),
                  'set motor_coordinator_config.scheduler_config.deploy_mode to "single_node"')
    return scheduler_type == "kv_cache_affinity"


def _endpoint_port(ctx, events, key, path):
    value = events.get(key, _MISSING)
    hint = 'use the form "tcp://*:<port>", e.g. "tcp://*:%d"' % (5557 if key == "endpoint" else 6667)
    if value is _MISSING:
        ctx.error(path, "missing; required for kv_cache_affinity", hint)
        return None, None
    match = ENDPOINT_RE.match(value) if isinstance(value, str) else None
    if match is None:
        ctx.error(path, "%s is not of the form tcp://*:<port>" % _describe(value),
                  hint + "; the coordinator splits it on '*:' and skips registration otherwise")
        return None, None
    port = int(match.group(1))
    if not 1 <= port <= 65535:
        ctx.error(path, "port %d is out of range 1..65535" % port, hint)
        return None, None
    return value, port


def _check_prefix_caching(ctx, engine_config, path):
    if engine_config.get("enable_prefix_caching", True) is False:
        ctx.error(path + ".enable_prefix_caching", "prefix caching is disabled",
                  "kv_cache_affinity routes by cached prefixes; remove it or set it to true")
    if engine_config.get("no_enable_prefix_caching") is True:
        ctx.error(path + ".no_enable_prefix_caching", "prefix caching is disabled",
                  "kv_cache_affinity routes by cached prefixes; remove it")


def _check_kv_events(ctx, uc, engines):
    """Validate the KV event publisher of the prefill (or union) section for affinity."""
    role = "union" if engines.get("union") is not None else "prefill"
    if engines.get(role) is None:
        return None
    ec_path = SECTIONS[role] + ".engine_config"
    engine_config = uc[SECTIONS[role]]["engine_config"]
    _check_prefix_caching(ctx, engine_config, ec_path)
    path = ec_path + ".kv_events_config"
    example = ('add "kv-events-config": {"publisher": "zmq", "enable_kv_cache_events": true, '
               '"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:6667", "topic": "kv-events"}')
    events = _dict_or_none(ctx, engine_config, "kv_events_config", path, required=True, hint=example)
    if events is None:
        return None
    if events.get("enable_kv_cache_events") is not True:
        ctx.error(path + ".enable_kv_cache_events", "must be true for kv_cache_affinity, got %s"
                  % _describe(events.get("enable_kv_cache_events")), "set it to true")
    if events.get("publisher") != "zmq":
        ctx.error(path + ".publisher", "must be \"zmq\", got %s" % _describe(events.get("publisher")),
                  "the conductor subscribes over ZMQ")
    endpoint, endpoint_port = _endpoint_port(ctx, events, "endpoint", path + ".endpoint")
    replay, replay_port = _endpoint_port(ctx, events, "replay_endpoint", path + ".replay_endpoint")
    topic = _str_or_none(ctx, events, "topic", path + ".topic") or ""
    return {
        "summary": {"role": role, "endpoint_port": endpoint_port, "replay_port": replay_port, "topic": topic},
        "endpoint": endpoint, "replay_endpoint": replay,
        "block_size": engine_config.get("block_size", DEFAULT_BLOCK_SIZE), "model_path": engine_config.get("model"),
    }


def _check_ratio(ctx, pool, key, path):
    value = pool[key]
    if not _is_number(value):
        ctx.error(path, "expected a number, got %s" % _describe(value), "a ratio above 0 and at most 1, e.g. 0.9")
        return None
    if not 0 < value <= 1:
        ctx.error(path, "%r is out of range: must be above 0 and at most 1" % value, "e.g. 0.9 for the high watermark, 0.1 for eviction")
        return None
    return value


def _pool_ratios(ctx, pool, store_users):
    ratios = {}
    for key, default in MOONCAKE_DEFAULT_RATIOS.items():
        path = "kv_cache_pool_config." + key
        if key in pool:
            ratios[key] = _check_ratio(ctx, pool, key, path)
        elif store_users:
            ctx.error(path, "missing; required because %s uses %s" % store_users[0],
                      "mooncake_master needs eviction_high_watermark_ratio and eviction_ratio, e.g. 0.9 and 0.1")
        else:
            ratios[key] = default
            ctx.warn(path, "missing; mooncake_master gets Mooncake's default %s" % default,
                     "no engine uses a store connector, so the pool is idle; set it explicitly, "
                     "PyMotor's deploy.py refuses the config without it")
    return ratios


def _check_pool_fields(ctx, pool):
    size = pool.get("global_segment_size")
    if size is not None and not (isinstance(size, str) and SEGMENT_SIZE_RE.match(size.strip())) \
            and not (_is_int(size) and size > 0):
        ctx.error("kv_cache_pool_config.global_segment_size", "%s is not a size" % _describe(size),
                  "write it like \"1GB\" or \"512MB\", or as a positive byte count")
    for key in ("metadata_server", "protocol", "device_name"):
        _str_or_none(ctx, pool, key, "kv_cache_pool_config." + key)
    if "alloc_in_same_node" in pool and not isinstance(pool["alloc_in_same_node"], bool):
        ctx.error("kv_cache_pool_config.alloc_in_same_node",
                  "expected a boolean, got %s" % _describe(pool["alloc_in_same_node"]), "use true or false")


def _check_kv_pool(ctx, uc, engines):
    """Decide whether the KV pool (mooncake_master) runs; validate and fill its settings."""
    pool = uc.get("kv_cache_pool_config")
    pool = pool if isinstance(pool, dict) else None
    lead = engines.get("union") or engines.get("prefill")
    lead_connector = lead["transfer"]["connector"] if lead else None
    store_users = [(SECTIONS[role], engine["transfer"]["store_connector"]) for role, engine in engines.items()
                   if engine is not None and engine["transfer"]["store_connector"]]
    enabled = bool(pool) or (isinstance(lead_connector, str) and lead_connector.lower() == "multiconnector")
    disabled = {"enabled": False, "port": None, "metrics_port": None, "eviction_high_watermark_ratio": None,
                "eviction_ratio": None, "default_kv_lease_ttl": None}
    if not enabled:
        if store_users:
            ctx.error("kv_cache_pool_config", "missing: %s uses store connector %s, which needs the KV pool"
                      % store_users[0], "add kv_cache_pool_config with eviction_high_watermark_ratio and eviction_ratio")
        return disabled
    pool = pool if pool is not None else {}
    ratios = _pool_ratios(ctx, pool, store_users)
    if "kv_cache_pool_config" in uc:
        pool.setdefault("port", DEFAULT_KV_POOL_PORT)
        pool.setdefault("default_kv_lease_ttl", DEFAULT_KV_LEASE_TTL)
    port = _int_in(ctx, pool, "port", "kv_cache_pool_config.port", 1, 65535, default=DEFAULT_KV_POOL_PORT)
    ttl = _int_in(ctx, pool, "default_kv_lease_ttl", "kv_cache_pool_config.default_kv_lease_ttl", 1,
                  hint="milliseconds; must exceed the engines' ASCEND_CONNECT_TIMEOUT", default=DEFAULT_KV_LEASE_TTL)
    _check_pool_fields(ctx, pool)
    return {"enabled": True, "port": port, "metrics_port": DEFAULT_KV_POOL_METRICS_PORT,
            "eviction_high_watermark_ratio": ratios.get("eviction_high_watermark_ratio"),
            "eviction_ratio": ratios.get("eviction_ratio"), "default_kv_lease_ttl": ttl}


def _check_kv_conductor(ctx, uc, affinity, kv_pool):
    """Validate kv_conductor_config (filled with the default port when affinity is on)."""
    path = "kv_conductor_config"
    if affinity and path not in uc:
        uc[path] = {}  # deploy.py fills the default port; no kvevent_instance (it would need the pool)
    section = uc.get(path)
    if not isinstance(section, dict):
        return {"enabled": False, "http_server_port": None}
    if affinity:
        section.setdefault("http_server_port", DEFAULT_CONDUCTOR_PORT)
    low = 1 if affinity else 0
    port = _int_in(ctx, section, "http_server_port", path + ".http_server_port", low, 65535,
                   hint="the conductor's HTTP port, 1..65535, default 13333")
    enabled = bool(port)
    if enabled and not affinity:
        ctx.warn(path + ".http_server_port", "the KV conductor runs but scheduler_type is not kv_cache_affinity",
                 "set motor_coordinator_config.scheduler_config.scheduler_type to kv_cache_affinity, or drop the section")
    instance = _dict_or_none(ctx, section, "kvevent_instance", path + ".kvevent_instance")
    if enabled and instance and not kv_pool["enabled"]:
        ctx.error(path + ".kvevent_instance", "needs the KV pool, which is not enabled",
                  "add kv_cache_pool_config or remove kvevent_instance; kv_conductor.sh exits otherwise")
    return {"enabled": enabled, "http_server_port": port if enabled else None}


def _derive_prefill_kv_event_config(ctx, uc, events, kv_conductor):
    """Fill motor_coordinator_config.prefill_kv_event_config; explicit values win, contradictions fail."""
    coordinator = uc.get("motor_coordinator_config")
    if not isinstance(coordinator, dict):
        return
    path = "motor_coordinator_config.prefill_kv_event_config"
    explicit = _dict_or_none(ctx, coordinator, "prefill_kv_event_config", path)
    if explicit is None and "prefill_kv_event_config" in coordinator:
        return
    explicit = explicit or {}
    source = SECTIONS[events["summary"]["role"]] + ".engine_config.kv_events_config"
    for key in ("endpoint", "replay_endpoint"):
        if key in explicit and events[key] is not None and explicit[key] != events[key]:
            ctx.error("%s.%s" % (path, key), "%s contradicts %s.%s %s" % (
                _describe(explicit[key]), source, key, _describe(events[key])),
                "remove it: the coordinator derives it from the engine's kv-events-config")
    derived = {
        "endpoint": events["endpoint"], "replay_endpoint": events["replay_endpoint"],
        "block_size": events["block_size"], "http_server_port": kv_conductor["http_server_port"],
        "model_path": events["model_path"], "engine_type": "vLLM",
    }
    merged = dict(explicit)
    for key, value in derived.items():
        if value is not None:
            merged.setdefault(key, value)
    coordinator["prefill_kv_event_config"] = merged


# ---------------------------------------------------------------------------
# env.json
# ---------------------------------------------------------------------------

def _env_value(ctx, value, path):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if _is_int(value):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    ctx.error(path, "expected a scalar (string, number or boolean), got %s" % _describe(value),
              "environment variables are flat strings")
    return None


def _normalize_env_section(ctx, section, path):
    result = {}
    for key, value in section.items():
        key_path = _join(path, key)
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            ctx.error(key_path, "%s is not a valid environment variable name" % _describe(key),
                      "use letters, digits and '_' and do not start with a digit")
            continue
        text = _env_value(ctx, value, key_path)
        if text is not None:
            result[key] = text
    return result


def _normalize_env(ctx, env_config):
    """Validate env.json; return it with string values (unknown sections dropped)."""
    if env_config is None:
        return {}
    if not isinstance(env_config, dict):
        ctx.error("env_config", "expected an object, got %s" % _describe(env_config), "env.json is a JSON object")
        return {}
    result = {}
    if "version" in env_config:
        if env_config["version"] != ENV_VERSION:
            ctx.error("env_config.version", "unsupported version %s" % _describe(env_config["version"]),
                      'env.json uses "version": "2.0.0"')
        result["version"] = ENV_VERSION
    for name, section in env_config.items():
        path = _join("env_config", name)
        if name == "version":
            continue
        if name not in ENV_SECTIONS:
            guess = _suggest(name, ENV_SECTIONS)
            ctx.warn(path, "unknown env.json section, ignored",
                     "did you mean '%s'?" % guess if guess else "known: " + ", ".join(ENV_SECTIONS))
            continue
        if not isinstance(section, dict):
            ctx.error(path, "expected an object, got %s" % _describe(section), "a section maps NAME to value")
            continue
        result[name] = _normalize_env_section(ctx, section, path)
    return result


def _role_env(ctx, env_config, automatic):
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


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------

def load_json_text(text, name):
    """Parse JSON text; on a syntax error raise MotorConfigError naming line and column."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    if not isinstance(text, str):
        raise MotorConfigError([Problem(name, "expected JSON text, got %s" % _describe(text), "pass a string")])
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MotorConfigError([Problem(name, "invalid JSON at line %d column %d: %s" % (exc.lineno, exc.colno, exc.msg),
                                        "fix the JSON syntax")]) from None
    if not isinstance(value, dict):
        raise MotorConfigError([Problem(name, "expected a JSON object, got %s" % _describe(value),
                                        "the file must contain {...}")])
    return value


def _check_models_agree(ctx, engines):
    prefill, decode = engines.get("prefill"), engines.get("decode")
    if not (prefill and decode):
        return
    for key, config_key in (("served_model_name", "served_model_name"), ("model", "model")):
        if prefill[key] is not None and decode[key] is not None and prefill[key] != decode[key]:
            ctx.warn("%s.engine_config.%s" % (SECTIONS["decode"], config_key),
                     "%s differs from prefill's %s" % (json.dumps(decode[key]), json.dumps(prefill[key])),
                     "P and D instances of one service normally serve the same model")


def _build_output(uc, mode, deploy_info, engines, affinity, kv_events, kv_pool, kv_conductor, env, ctx):
    hardware, job_id = deploy_info[1], deploy_info[2]
    return {
        "version": VERSION,
        "mode": mode,
        "job_id": job_id,
        "hardware_type": hardware,
        "npus_per_host": HARDWARE_NPUS.get(hardware),
        "user_config": uc,
        "engines": {role: engine for role, engine in engines.items() if engine is not None},
        "affinity": affinity,
        "kv_events": kv_events,
        "kv_pool": kv_pool,
        "kv_conductor": kv_conductor,
        "env": env[0],
        "env_config": env[1],
        "overridden": dict(sorted(ctx.overridden.items())),
        "warnings": [format_problem(problem) for problem in ctx.warnings],
    }


def normalize(user_config, env_config=None, overrides=None):
    """Validate and normalize a PyMotor configuration.

    :param user_config: parsed ``user_config.json`` (dict).
    :param env_config: parsed ``env.json`` (dict) or None.
    :param overrides: optional list of dicts deep-merged onto user_config first
        (dicts merge, lists and scalars replace, None deletes).
    :returns: the normalized configuration described in docs/design.md.
    :raises MotorConfigError: listing every problem found.
    """
    overridden = {}
    ctx = _Context(overridden)
    merged, record = _apply_overrides(ctx, user_config, overrides)
    overridden.update(record)
    if not isinstance(merged, dict):
        ctx.error("user_config", "expected an object, got %s" % _describe(merged), "user_config.json is a JSON object")
        raise MotorConfigError(ctx.errors, ctx.warnings)
    uc = copy.deepcopy(merged)
    _check_top_level(ctx, uc)
    deploy_info = _check_deploy(ctx, uc)
    mode = _detect_mode(ctx, uc, deploy_info[0])
    roles = ("union",) if mode == "pd_hybrid" else ("prefill", "decode")
    engines = {role: _check_engine(ctx, uc, role, deploy_info[0], deploy_info[1]) for role in roles}
    _check_models_agree(ctx, engines)
    _check_transfer(ctx, uc, engines)
    _check_ports(ctx, uc, engines)
    kv_pool = _check_kv_pool(ctx, uc, engines)
    affinity = _check_scheduler(ctx, uc, mode)
    events = _check_kv_events(ctx, uc, engines) if affinity else None
    kv_conductor = _check_kv_conductor(ctx, uc, affinity, kv_pool)
    if events is not None:
        _derive_prefill_kv_event_config(ctx, uc, events, kv_conductor)
    env_config_out = _normalize_env(ctx, env_config)
    lead = engines.get("union") or engines.get("prefill") or {}
    automatic = {"ENGINE_TYPE": lead.get("engine_type"), "MODEL_NAME": lead.get("served_model_name"),
                 "SERVICE_ID": deploy_info[2]}
    env = _role_env(ctx, env_config_out, {key: value for key, value in automatic.items() if value is not None})
    if ctx.errors:
        raise MotorConfigError(ctx.errors, ctx.warnings)
    return _build_output(uc, mode, deploy_info, engines, affinity, events and events["summary"], kv_pool,
                         kv_conductor, (env, env_config_out), ctx)
