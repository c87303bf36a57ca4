"""plugins/plugin_utils/operations/secrets.py: one key-name rule masks structures, JSON documents and free text."""

from __future__ import annotations

import pytest

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import MASK, is_secret_key, mask_secrets, mask_text


@pytest.mark.parametrize("text, expected", [
    ('export HF_TOKEN="tok123"', 'export HF_TOKEN="%s"' % MASK),
    ("http://host/v1?token=abc", "http://host/v1?token=%s" % MASK),
    ("--api-key=abc --port 8000", "--api-key=%s --port 8000" % MASK),
    ("Authorization: Bearer xyz", "Authorization: Bearer %s" % MASK),
    ("TLS_KEY_PASSWORD: p4ss", "TLS_KEY_PASSWORD: %s" % MASK),
    ("max_tokens: 20, tokenizer=/models/x, num_tokens=5", "max_tokens: 20, tokenizer=/models/x, num_tokens=5"),
])
def test_text_follows_the_key_rule(text, expected):
    assert mask_text(text) == expected


@pytest.mark.parametrize("key", ["HF_TOKEN", "api_key", "tls_key_password", "passwd_file", "Authorization", "private-key"])
def test_text_and_structures_agree(key):
    assert is_secret_key(key)
    assert mask_secrets({key: "v4lue"}) == {key: MASK}
    assert "v4lue" not in mask_text("%s=v4lue" % key) and "v4lue" not in mask_text('"%s": "v4lue"' % key)


@pytest.mark.parametrize("key", ["max_tokens", "max_num_batched_tokens", "tokenizer", "block_size", "POD_IP"])
def test_counts_of_tokens_stay_readable(key):
    assert not is_secret_key(key)
    assert mask_secrets({key: 8}) == {key: 8} and mask_text("%s=8" % key) == "%s=8" % key
