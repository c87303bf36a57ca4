"""Deterministic stand-in tokenizer: the chat template of Qwen-style models rendered to text, then
one token per UTF-8 byte (ids 0..255). Coordinator and engines share it, so their token ids agree,
as with the real AutoTokenizer loaded from the same model directory."""

from __future__ import annotations

from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class Tokenizer:
    def __init__(self, model_dir: str):
        path = Path(model_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"model directory {model_dir!r} does not exist (is the weight path mounted?)")
        if not any((path / name).is_file() for name in TOKENIZER_FILES):
            raise FileNotFoundError(f"no tokenizer file ({', '.join(TOKENIZER_FILES)}) in {model_dir!r}")
        self.model_dir = model_dir

    @staticmethod
    def render_chat(messages: list[dict]) -> str:
        """apply_chat_template(messages, add_generation_prompt=True) of Qwen-style models."""
        text = "".join(f"<|im_start|>{m.get('role', 'user')}\n{_content(m)}<|im_end|>\n" for m in messages)
        return text + "<|im_start|>assistant\n"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_request(self, body: dict) -> list[int]:
        if "messages" in body:
            return self.encode(self.render_chat(body["messages"]))
        return self.encode(str(body.get("prompt", "")))


def _content(message: dict) -> str:
    content = message.get("content", "")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)
