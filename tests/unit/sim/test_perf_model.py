"""The stand-in engines' performance model (tests/sim/motor_image/motor_sim/perf.py): bounded LRU prefix cache with
vLLM's events, prefill time from the uncached tokens, decode steps, running slots, dev-mode reset, metrics names."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import msgpack
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "motor_image"))

from motor_sim.perf import EngineModel, PrefixCache  # noqa: E402


def blocks(*ids, size=4):
    """A prompt whose block i is made of token id ids[i] (size tokens each)."""
    return [i for i in ids for _token in range(size)]


def test_hits_are_the_longest_cached_prefix_in_whole_blocks():
    cache = PrefixCache(4, capacity=100)
    assert cache.store(blocks(1, 2, 3))[0] == 0
    assert cache.store(blocks(1, 2, 9))[0] == 8
    assert cache.lookup(blocks(1, 2, 3) + [7, 7]) == 12
    assert cache.lookup(blocks(2, 1)) == 0


def test_lru_eviction_publishes_block_removed_in_vllm_format():
    cache = PrefixCache(4, capacity=3)
    events = cache.store(blocks(1, 2, 3))[1]
    assert [e[0] for e in events] == ["BlockStored"]
    stored = events[0]
    # vLLM's array-shaped BlockStored: tag, hashes, parent, token ids, block size, lora_id, medium, lora_name
    assert len(stored) == 8 and stored[2] is None and stored[3] == blocks(1, 2, 3) and stored[4] == 4
    events = cache.store(blocks(5))[1]
    assert [e[0] for e in events] == ["BlockStored", "BlockRemoved"]
    removed = events[1]
    # the tail of the older prompt goes first (vLLM frees a request's blocks in reverse order)
    assert removed == ["BlockRemoved", [stored[1][2]], "GPU"]
    assert cache.lookup(blocks(1, 2, 3)) == 8 and len(cache) == 3
    assert msgpack.unpackb(msgpack.packb(events)) == events  # plain msgpack types, as the conductor decodes


def test_reset_needs_dev_mode_like_vllm():
    model = EngineModel({}, 4, env={}, sleep=lambda s: None)
    model.cache.store(blocks(1))
    assert model.reset()[0] == 404 and len(model.cache) == 1
    model = EngineModel({}, 4, env={"VLLM_SERVER_DEV_MODE": "1"}, sleep=lambda s: None)
    model.cache.store(blocks(1))
    assert model.reset() == (200, {}, [["AllBlocksCleared"]]) and len(model.cache) == 0


def test_prefill_time_grows_with_uncached_tokens_and_counters_follow():
    slept = []
    env = {"MOTOR_SIM_PREFILL_BASE_MS": "10", "MOTOR_SIM_PREFILL_US_PER_TOKEN": "1000", "MOTOR_SIM_KV_BLOCKS": "50"}
    model = EngineModel({}, 4, env=env, sleep=slept.append)
    assert model.prefill(blocks(1, 2))[0] == 0
    assert model.prefill(blocks(1, 2, 3))[0] == 8
    assert slept == pytest.approx([0.010 + 0.008, 0.010 + 0.004])
    assert model.prefill(blocks(1, 2), remote=True) == (0, [])  # KV from a prefill engine: nothing computed
    text = "\n".join(model.metrics('{engine="0"}'))
    assert 'vllm:prefix_cache_queries_total{engine="0"} 20.0' in text
    assert 'vllm:prefix_cache_hits_total{engine="0"} 8.0' in text
    assert model.describe()["kv_blocks"] == 50


def test_decode_steps_and_capacity_from_the_engine_config():
    slept = []
    model = EngineModel({"num_gpu_blocks_override": 7, "max_num_seqs": 2}, 4,
                        env={"MOTOR_SIM_DECODE_MS_PER_TOKEN": "1", "MOTOR_SIM_STREAM_CHUNK_TOKENS": "4"},
                        sleep=slept.append)
    assert list(model.decode_steps(10)) == [1, 4, 4, 1]
    assert sum(slept) == pytest.approx(0.010)
    assert model.cache.capacity == 7 and model.max_running == 2
    assert model.output_tokens({"max_tokens": 10**9}) == 4096


def test_requests_beyond_the_running_slots_wait():
    model = EngineModel({}, 4, env={"MOTOR_SIM_MAX_RUNNING": "1"}, sleep=lambda s: None)
    release, entered = threading.Event(), threading.Event()

    def hold():
        with model.slot():
            entered.set()
            release.wait(5)

    first = threading.Thread(target=hold)
    first.start()
    entered.wait(5)
    held = []
    second = threading.Thread(target=lambda: held.append(model.slot()) or held[0].__enter__())
    second.start()
    for _attempt in range(100):
        if model.waiting == 1:
            break
        threading.Event().wait(0.01)
    assert (model.running, model.waiting) == (1, 1)
    release.set()
    first.join(5)
    second.join(5)
    assert (model.running, model.waiting) == (1, 0)


def test_negative_knob_is_refused():
    with pytest.raises(ValueError, match="MOTOR_SIM_DECODE_MS_PER_TOKEN"):
        EngineModel({}, 4, env={"MOTOR_SIM_DECODE_MS_PER_TOKEN": "-1"})
