# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The secret fields of PyMotor's configuration (one list, from upstream's config classes), the API keys' PBKDF2
form, and masking secrets (API keys, passwords, TLS keys) in structures, JSON documents and free text."""

from __future__ import annotations

import hashlib
import hmac
import json
import re


MASK = "********"


# The secret fields of user_config.json, from upstream's config classes (``*`` matches any one key). Each entry:
# path, the components that read it, and where upstream defines and reads it. env.json has no class (free-form
# variable names): its secrets are found by the name rule below (SECRET_KEY_RE), as in free text.
SECRET_FIELDS = (
    {"path": ("motor_coordinator_config", "api_key_config", "valid_keys"), "readers": ("coordinator",),
     "upstream": "motor/config/coordinator.py:196 (APIKeyConfig.valid_keys); read only by "
                 "motor/coordinator/api_server/inference_server.py:224-226"},
    {"path": ("motor_deploy_config", "tls_config", "*", "passwd_file"), "readers": ("every TLS component",),
     "upstream": "motor/config/tls_config.py:27 (TLSConfig.passwd_file: the key's password, in clear in that file); "
                 "read by motor/common/http/cert_util.py:797-805"},
    {"path": ("motor_deploy_config", "tls_config", "*", "key_file"), "readers": ("every TLS component",),
     "upstream": "motor/config/tls_config.py:26 (TLSConfig.key_file: the private key)"},
    {"path": ("*", "engine_config", "api_key"), "readers": ("the engines of that section",),
     "upstream": "vLLM's frontend argument --api-key (engine_config is passed to vLLM as arguments)"},
)

# Upstream's PBKDF2 form of an API key (motor/common/http/key_encryption.py PBKDF2KeyEncryption.encrypt_key):
# "salt:iterations:hex(pbkdf2_hmac(sha256, key, salt, iterations, dklen=32))". The coordinator runs one PBKDF2 per
# stored key per request (verify_api_key_against_valid_keys), so the count is the per-request cost: upstream's
# default, about 47 ms of one core per stored key on the development machine (docs/security.md).
API_KEY_PBKDF2_ITERATIONS = 100000
_PBKDF2_FORM_RE = re.compile(r"^[^:]+:[1-9][0-9]*:[0-9a-f]{64}$")
_SALT_DOMAIN = b"pymotor.ascend api_key_config.valid_keys salt"


_FIELD_NAMES = frozenset(field["path"][-1] for field in SECRET_FIELDS)


def _field_match(path, pattern) -> bool:
    return len(path) == len(pattern) and all(want in ("*", got) for got, want in zip(path, pattern))


def is_secret_field(path) -> bool:
    """Whether the key path ``path`` (a tuple of keys) is one of SECRET_FIELDS."""
    path = tuple(str(key) for key in path)
    return any(_field_match(path, field["path"]) for field in SECRET_FIELDS)


def is_api_key_hash(value) -> bool:
    """Whether ``value`` already is in upstream's PBKDF2 form (then it is rendered as given)."""
    return isinstance(value, str) and bool(_PBKDF2_FORM_RE.match(value))


def api_key_salt(job_id: str, index: int) -> str:
    """The salt of the ``index``-th key of job ``job_id``: derived, not random, so that a re-run renders the same
    config (no change, no restart). A salt need only be unique, not secret: it is unique per job and key position
    (no precomputed table serves two of them) and derived from no secret (it tells nothing about the key)."""
    return hmac.new(_SALT_DOMAIN, f"{job_id}/{index}".encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def hash_api_key(plain_key: str, salt: str, iterations: int = API_KEY_PBKDF2_ITERATIONS) -> str:
    """Upstream's PBKDF2 form of ``plain_key`` (what its verify_api_key checks)."""
    derived = hashlib.pbkdf2_hmac("sha256", plain_key.encode("utf-8"), salt.encode("utf-8"), iterations, dklen=32)
    return f"{salt}:{iterations}:{derived.hex()}"


def coordinator_api_keys(valid_keys, job_id: str, iterations: int = API_KEY_PBKDF2_ITERATIONS) -> list:
    """valid_keys as the coordinator gets them: every plain key in PBKDF2 form, a key already in that form as given."""
    return [key if is_api_key_hash(key) else hash_api_key(str(key), api_key_salt(job_id, index), iterations)
            for index, key in enumerate(valid_keys or []) if key not in (None, "")]


def api_key_header(api_key_config: dict, api_key: str) -> dict:
    """The header our clients send the coordinator: api_key_config's header_name and key_prefix, upstream's defaults
    (motor/config/coordinator.py:197-198) when unset; none when the key is empty."""
    if not api_key:
        return {}
    config = api_key_config or {}
    name = config.get("header_name") or "Authorization"
    prefix = config.get("key_prefix") if config.get("key_prefix") is not None else "Bearer "
    return {str(name): f"{prefix}{api_key}"}


SECRET_KEY_RE = re.compile(r"(api[_-]?key|password|passwd|secret|token|private[_-]?key|credential|bearer|authorization|"
                           r"(tls|ssl)[_-]?(key|cert_key|key_file|keyfile)|key_file|keyfile)", re.IGNORECASE)


# Keys that contain a secret-looking word but hold no secret (numbers and sizes of tokens).
NOT_SECRET_KEY_RE = re.compile(r"(max_tokens|_tokens$|tokens_|token_ids|tokenizer|num_.*token|token_budget|"
                               r"max_num_batched_tokens|block_size)", re.IGNORECASE)


# ``key: value`` / ``key=value`` / ``"key": "value"`` / ``export KEY="value"`` in free text whose key holds a word of
# SECRET_KEY_RE; masked when is_secret_key says so - the one rule for structures and text.
# A list value (``"valid_keys": ["..."]``) is masked whole.
_TEXT_PAIR_RE = re.compile(
    r"""(?P<key>(?P<quote>["']?)(?P<name>[A-Za-z0-9_.-]*(?:%s|%s)[A-Za-z0-9_.-]*)(?P=quote)\s*[:=]\s*"""
    r"""(?:[Bb]earer\s+)?)(?P<value>\[[^\]]*\]|"[^"]*"|'[^']*'|[^\s,}\]]+)"""
    % (SECRET_KEY_RE.pattern, "|".join(sorted(_FIELD_NAMES))), re.IGNORECASE)


def is_secret_key(key) -> bool:
    text = str(key)
    return bool(SECRET_KEY_RE.search(text)) and not NOT_SECRET_KEY_RE.search(text)


def mask_secrets(value, mask: str = MASK, _path=()):
    """A deep copy of ``value`` where every value of a secret field (SECRET_FIELDS, at any depth: the plan holds one
    user_config per container) or under a secret-looking key is replaced by ``mask`` (each item of a list of them).

    Empty values and booleans stay as they are (nothing to hide, and it shows whether a secret was set)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            path = _path + (str(key),)
            field = key in _FIELD_NAMES and any(is_secret_field(path[start:]) for start in range(len(path)))
            # a switch (enable_api_key) is no secret: booleans stay readable
            if (field or is_secret_key(key)) and not isinstance(item, (dict, list, bool)) and item not in (None, ""):
                out[key] = mask
            elif field and isinstance(item, list):
                out[key] = [mask if part not in (None, "") else part for part in item]
            else:
                out[key] = mask_secrets(item, mask, path)
        return out
    if isinstance(value, list):
        return [mask_secrets(item, mask, _path) for item in value]
    return value


def mask_text(text: str, mask: str = MASK) -> str:
    """Mask ``key: value`` / ``key=value`` / ``"key": "value"`` pairs with a secret-looking key in free text."""
    def repl(match):
        name = match.group("name")
        if not (is_secret_key(name) or name in _FIELD_NAMES):
            return match.group(0)
        value = match.group("value")
        if value.startswith("["):
            return match.group("key") + ("[]" if value[1:-1].strip() == "" else f'["{mask}"]')
        quote = value[0] if value[:1] in ("'", '"') else ""
        return match.group("key") + quote + mask + quote
    return _TEXT_PAIR_RE.sub(repl, str(text))


def mask_document(text: str, mask: str = MASK) -> str:
    """A JSON document with its secret values masked (re-serialized, indent 2), else ``mask_text``."""

    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return mask_text(text, mask)
    return json.dumps(mask_secrets(data, mask), indent=2, sort_keys=False) + "\n"
