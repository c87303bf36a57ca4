"""A model directory the real coordinator and the fake engine can both load: a byte-level tokenizer (one token per
UTF-8 byte, GPT-2 byte alphabet, no merges) plus Qwen's chat-template special tokens, in Hugging Face's
tokenizer.json / tokenizer_config.json format, and a config.json. No weights: the engine is fake. The real
coordinator's KV-cache affinity scheduler loads it with transformers.AutoTokenizer and applies the chat template
(jinja2); the fake engine does the same, so both compute the same token ids and block hashes, as a real vLLM engine
and the coordinator do with one model directory. A word-level tokenizer would make every prompt one or two blocks.

Usage: python tests/conformance/model_fixture.py DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                 "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode: the printable stand-in character of each byte 0..255, in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tokenizer_json() -> dict:
    vocab = {char: i for i, char in enumerate(byte_alphabet())}
    added = [{"id": 256 + i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, tok in enumerate(SPECIAL)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": vocab, "merges": []}}


def write_model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "tokenizer.json").write_text(json.dumps(tokenizer_json(), ensure_ascii=False))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 32768, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "bos_token": None, "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(256 + i): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                                "normalized": False, "single_word": False}
                                 for i, t in enumerate(SPECIAL)}}, indent=1))
    (path / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                                  "vocab_size": 256 + len(SPECIAL), "max_position_embeddings": 32768,
                                                  "eos_token_id": 258}, indent=1))
    return path


if __name__ == "__main__":
    write_model_dir(Path(sys.argv[1]))
