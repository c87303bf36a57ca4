"""The stand-in coordinator's OpenAI stream (tests/sim/motor_image/motor_sim/coordinator.py SseReply), read by the
benchmark's client (plugins/plugin_utils/bench/replay.py stream_request): the first token arrives when the prefill
leg is done, before the decode's answer; usage when stream_options.include_usage asks; a failure after the first
token is an error event."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ansible_collections.pymotor.ascend.plugins.plugin_utils.bench import replay

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "motor_image"))

from motor_sim.common import serve  # noqa: E402
from motor_sim.coordinator import SseReply  # noqa: E402

DECODE_S = 0.3
ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "stand-in decode"}}],
          "usage": {"prompt_tokens": 12, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}}}


def _route(fail):
    def route(body, handler):
        stream = SseReply(handler, body)
        stream.chunk("s")  # the prefill leg is done
        time.sleep(DECODE_S)  # the decode leg
        return stream.fail({"detail": "decode endpoint failed"}) if fail else stream.finish(ANSWER)
    return route


def test_stream_first_token_before_the_decode_then_usage():
    server = serve("sse-test", 0, {("POST", "/v1/completions"): _route(False), ("POST", "/bad"): _route(True)},
                   host="127.0.0.1")
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        body = {"model": "m", "prompt": "hello", "stream": True, "stream_options": {"include_usage": True}}
        out = replay.stream_request({"url": url + "/v1/completions"}, body, timeout=10)
        assert out["error"] is None, out
        assert out["e2e_s"] - out["ttft_s"] >= DECODE_S * 0.8, out
        assert (out["prompt_tokens"], out["cached_tokens"], out["output_tokens"]) == (12, 4, 5)
        bad = replay.stream_request({"url": url + "/bad"}, body, timeout=10)
        assert bad["ttft_s"] is not None and "decode endpoint failed" in bad["error"], bad
    finally:
        server.shutdown()
