# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Issue 47: the one list of secret fields (checked against upstream's config classes), their masking, the API keys'
PBKDF2 form (checked with upstream's own verification function), only the coordinator's rendered config carrying
API keys, our clients' header, and the stand-in coordinator's check (checked against upstream's rule)."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import (
    API_KEY_PBKDF2_ITERATIONS,
    MASK,
    SECRET_FIELDS,
    api_key_header,
    api_key_salt,
    coordinator_api_keys,
    hash_api_key,
    is_api_key_hash,
    is_secret_field,
    mask_document,
    mask_secrets,
    mask_text,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import api_key_settings, probe_args
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.tests.unit.local_http import local_server

REPO = Path(__file__).resolve().parents[4]
UPSTREAM = REPO.parent / "shared" / "upstream" / "pymotor"
if not UPSTREAM.is_dir():
    UPSTREAM = Path("/work/shared/upstream/pymotor")
NO_UPSTREAM = "upstream PyMotor sources (../shared/upstream/pymotor) are absent"
KEYS = ["FAKE-APIKEY-unit-47a1", "FAKE-APIKEY-unit-47b2"]


def upstream_key_encryption():
    """upstream's motor/common/http/key_encryption.py, loaded alone (it imports only the standard library)."""
    path = UPSTREAM / "motor" / "common" / "http" / "key_encryption.py"
    if not path.is_file():
        pytest.skip(NO_UPSTREAM)
    spec = importlib.util.spec_from_file_location("upstream_key_encryption", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dataclass_fields(relative, cls):
    """The field names of dataclass ``cls`` in upstream's ``relative`` file (read with ast, nothing imported)."""
    path = UPSTREAM / relative
    if not path.is_file():
        pytest.skip(NO_UPSTREAM)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


# ---------------------------------------------------------------- the list

def test_secret_fields_are_fields_of_upstreams_config_classes():
    by_leaf = {field["path"][-1]: field for field in SECRET_FIELDS}
    assert "valid_keys" in dataclass_fields("motor/config/coordinator.py", "APIKeyConfig")
    assert {"key_file", "passwd_file"} <= dataclass_fields("motor/config/tls_config.py", "TLSConfig")
    assert by_leaf["valid_keys"]["readers"] == ("coordinator",)
    for field in SECRET_FIELDS:
        assert field["upstream"] and field["readers"], field


def test_only_the_coordinator_reads_api_key_config_upstream():
    """Every upstream module that names api_key_config is the coordinator's (its config and its API server), or the
    key functions it calls (key_encryption.py names it in a docstring)."""
    if not (UPSTREAM / "motor").is_dir():
        pytest.skip(NO_UPSTREAM)
    readers = sorted(str(p.relative_to(UPSTREAM)) for p in (UPSTREAM / "motor").rglob("*.py")
                     if "api_key_config" in p.read_text(encoding="utf-8", errors="replace"))
    assert readers and all(r.startswith(("motor/coordinator/", "motor/config/coordinator.py", "motor/common/http/key_encryption.py")) for r in readers), readers


def test_is_secret_field_paths():
    assert is_secret_field(("motor_coordinator_config", "api_key_config", "valid_keys"))
    assert is_secret_field(("motor_deploy_config", "tls_config", "infer_tls_config", "passwd_file"))
    assert not is_secret_field(("motor_coordinator_config", "api_key_config", "header_name"))
    assert not is_secret_field(("valid_keys",))


# ---------------------------------------------------------------- masking

def test_mask_secrets_masks_valid_keys_at_any_depth_and_keeps_the_rest():
    plan = {"containers": [{"name": "c", "user_config": {"motor_coordinator_config": {"api_key_config": {
        "enable_api_key": True, "valid_keys": list(KEYS), "header_name": "Authorization", "key_prefix": "Bearer "}}}}]}
    masked = mask_secrets(plan)
    cfg = masked["containers"][0]["user_config"]["motor_coordinator_config"]["api_key_config"]
    assert cfg["valid_keys"] == [MASK, MASK]
    assert cfg["header_name"] == "Authorization" and cfg["enable_api_key"] is True
    assert not any(key in json.dumps(masked) for key in KEYS)
    assert plan["containers"][0]["user_config"]["motor_coordinator_config"]["api_key_config"]["valid_keys"] == KEYS


def test_mask_text_and_document_mask_valid_keys():
    text = 'config {"valid_keys": ["%s", "%s"], "header_name": "X-Key"} HF_TOKEN=abc' % tuple(KEYS)
    out = mask_text(text)
    assert not any(key in out for key in KEYS) and "abc" not in out and '"header_name": "X-Key"' in out
    doc = json.dumps({"motor_coordinator_config": {"api_key_config": {"valid_keys": KEYS}}})
    assert not any(key in mask_document(doc) for key in KEYS)
    assert mask_text('"valid_keys": []') == '"valid_keys": []'


# ---------------------------------------------------------------- PBKDF2 form

def test_rendered_keys_verify_with_upstreams_own_function():
    upstream = upstream_key_encryption()
    rendered = coordinator_api_keys(KEYS, "job-a")
    assert all(is_api_key_hash(value) for value in rendered)
    assert all(value.split(":")[1] == str(API_KEY_PBKDF2_ITERATIONS) for value in rendered)
    for key in KEYS:
        assert upstream.verify_api_key_against_valid_keys(key, rendered)
    assert not upstream.verify_api_key_against_valid_keys("FAKE-wrong-key", rendered)
    # and ours is upstream's encrypt_key for the same salt and count
    salt = api_key_salt("job-a", 0)
    assert hash_api_key(KEYS[0], salt) == upstream.PBKDF2KeyEncryption.encrypt_key(KEYS[0], salt, API_KEY_PBKDF2_ITERATIONS)


def test_rendering_is_idempotent_and_salted_per_job_and_position():
    assert coordinator_api_keys(KEYS, "job-a", 1000) == coordinator_api_keys(KEYS, "job-a", 1000)
    assert coordinator_api_keys(KEYS, "job-a", 1000) != coordinator_api_keys(KEYS, "job-b", 1000)
    same = coordinator_api_keys([KEYS[0], KEYS[0]], "job-a", 1000)
    assert same[0].split(":")[0] != same[1].split(":")[0]
    given = hash_api_key("FAKE-prehashed", "somesalt", 1000)
    assert coordinator_api_keys([given, ""], "job-a") == [given]


# ---------------------------------------------------------------- the plan: keys only in the coordinator's config

def seeded_with_keys(iterations_guard=True):
    user = json.loads((REPO / "examples/seed_pd_separation/user_config.json").read_text())
    env = json.loads((REPO / "examples/seed_pd_separation/env.json").read_text())
    user["motor_coordinator_config"]["api_key_config"] = {"enable_api_key": True, "valid_keys": list(KEYS)}
    return normalize(user, env)


def test_only_the_coordinator_config_carries_keys_and_only_hashed():
    config = seeded_with_keys()
    hosts = {"e1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"]},
             "c1": {"motor_host_ip": "10.0.1.1", "group_names": ["motor_control_hosts"]}}
    plan = build_plan(config, hosts)
    assert not any(key in json.dumps(plan) for key in KEYS)
    carriers = [c["role"] for c in plan["containers"]
                if "api_key_config" in (c["user_config"].get("motor_coordinator_config") or {})]
    assert carriers == ["coordinator"]
    assert len(plan["containers"]) >= 5
    coordinator = next(c for c in plan["containers"] if c["role"] == "coordinator")
    stored = coordinator["user_config"]["motor_coordinator_config"]["api_key_config"]["valid_keys"]
    assert stored == coordinator_api_keys(KEYS, plan["job_id"])
    assert build_plan(config, hosts)["containers"] == plan["containers"]  # a re-run renders the same
    # our clients: the coordinator's header settings (upstream's defaults), the key never in the probe's arguments
    assert api_key_settings(plan) == {"enabled": True, "header_name": "Authorization", "key_prefix": "Bearer "}
    args = probe_args(plan, {})
    assert args["coordinator"]["api_key"]["header_name"] == "Authorization"
    assert not any(key in json.dumps(args) for key in KEYS)


def test_client_header_uses_api_key_config():
    assert api_key_header({"header_name": "X-Api-Key", "key_prefix": ""}, "k") == {"X-Api-Key": "k"}
    assert api_key_header({}, "k") == {"Authorization": "Bearer k"}
    assert api_key_header({}, "") == {}


# ---------------------------------------------------------------- the stand-in coordinator

def standin_check(cfg):
    sim = REPO / "tests" / "sim" / "motor_image"
    sys.path.insert(0, str(sim))
    try:
        from motor_sim.coordinator import ApiKeyCheck  # noqa: PLC0415 (the image's package, not installed)
    finally:
        sys.path.remove(str(sim))
    return ApiKeyCheck({"motor_coordinator_config": {"api_key_config": cfg}})


def request(headers, path="/v1/chat/completions"):
    return SimpleNamespace(headers=headers, path=path)


def test_standin_coordinator_checks_keys_as_upstream():
    upstream = upstream_key_encryption()
    stored = [upstream.PBKDF2KeyEncryption.encrypt_key(KEYS[0], None, 1000)]  # upstream's random salt
    check = standin_check({"enable_api_key": True, "valid_keys": stored})
    assert check.refusal(request({}))[0] == 401  # inference_server.py:213-220
    assert check.refusal(request({"Authorization": "Bearer FAKE-wrong"}))[0] == 403  # 228-229
    assert check.refusal(request({"Authorization": "Bearer " + KEYS[0]})) is None  # 226
    assert check.refusal(request({"Authorization": KEYS[0]})) is None  # no prefix: the whole value is the key
    assert check.refusal(request({}, path="/readiness")) is None  # skip_paths
    assert check.refusal(request({"Authorization": "Bearer " + stored[0]})) is None  # 224: the stored form as is
    assert standin_check({"enable_api_key": False, "valid_keys": stored}).refusal(request({})) is None
    custom = standin_check({"enable_api_key": True, "valid_keys": coordinator_api_keys(KEYS, "j", 1000),
                            "header_name": "X-Api-Key", "key_prefix": "Key "})
    assert custom.refusal(request({"X-Api-Key": "Key " + KEYS[1]})) is None
    assert custom.refusal(request({"Authorization": "Bearer " + KEYS[1]}))[0] == 401


def test_motor_wait_posts_a_body_with_the_targets_headers():
    """verify's chat request: a reads target with a body is one POST of it, with the headers the action added."""
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_wait import read_all

    seen = {}

    def coordinator(method, path, headers, body):
        seen.update(method=method, path=path, auth=headers.get("Authorization"), body=json.loads(body))
        return 200 if seen["auth"] == "Bearer " + KEYS[0] else 401, b'{"ok": true}', {}

    with local_server(coordinator) as base:
        target = {"url": base + "/v1/chat/completions", "tls": None, "body": {"max_tokens": 1},
                  "headers": api_key_header({"header_name": "Authorization", "key_prefix": "Bearer "}, KEYS[0])}
        answers = read_all({"inference": {"chat": target}}, 5, 2)
    assert answers["inference"]["chat"]["status"] == 200 and answers["inference"]["chat"]["json"] == {"ok": True}
    assert seen == {"method": "POST", "path": "/v1/chat/completions", "auth": "Bearer " + KEYS[0],
                    "body": {"max_tokens": 1}}
    assert "headers" not in answers["inference"]["chat"]
