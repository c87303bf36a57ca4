# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Masking secrets (API keys, passwords, TLS keys) in structures, JSON documents and free text."""

from __future__ import annotations

import json
import re


MASK = "********"


SECRET_KEY_RE = re.compile(r"(api[_-]?key|password|passwd|secret|token|private[_-]?key|credential|bearer|authorization|"
                           r"(tls|ssl)[_-]?(key|cert_key|key_file|keyfile)|key_file|keyfile)", re.IGNORECASE)


# Keys that contain a secret-looking word but hold no secret (numbers and sizes of tokens).
NOT_SECRET_KEY_RE = re.compile(r"(max_tokens|_tokens$|tokens_|token_ids|tokenizer|num_.*token|token_budget|"
                               r"max_num_batched_tokens|block_size)", re.IGNORECASE)


# ``key: value`` / ``key=value`` / ``"key": "value"`` / ``export KEY="value"`` in free text whose key holds a word of
# SECRET_KEY_RE; masked when is_secret_key says so - the one rule for structures and text.
_TEXT_PAIR_RE = re.compile(
    r"""(?P<key>(?P<quote>["']?)(?P<name>[A-Za-z0-9_.-]*(?:%s)[A-Za-z0-9_.-]*)(?P=quote)\s*[:=]\s*(?:[Bb]earer\s+)?)"""
    r"""(?P<value>"[^"]*"|'[^']*'|[^\s,}\]]+)""" % SECRET_KEY_RE.pattern, re.IGNORECASE)


def is_secret_key(key) -> bool:
    text = str(key)
    return bool(SECRET_KEY_RE.search(text)) and not NOT_SECRET_KEY_RE.search(text)


def mask_secrets(value, mask: str = MASK):
    """A deep copy of ``value`` where every value under a secret-looking key is replaced by ``mask``.

    Empty values stay empty (nothing to hide, and it shows that no secret was set)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if is_secret_key(key) and not isinstance(item, (dict, list)) and item not in (None, ""):
                out[key] = mask
            else:
                out[key] = mask_secrets(item, mask)
        return out
    if isinstance(value, list):
        return [mask_secrets(item, mask) for item in value]
    return value


def mask_text(text: str, mask: str = MASK) -> str:
    """Mask ``key: value`` / ``key=value`` / ``"key": "value"`` pairs with a secret-looking key in free text."""
    def repl(match):
        if not is_secret_key(match.group("name")):
            return match.group(0)
        value = match.group("value")
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
