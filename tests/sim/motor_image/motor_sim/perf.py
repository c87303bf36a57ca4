"""Performance model of the stand-in engines (stand-in and conformance fake engine): NOT NPU numbers.

What a request costs on one engine (one DP rank), so that a benchmark through the real or stand-in router shows
what routing buys, never what an NPU does:

- **Prefix cache**: a bounded set of full blocks (``block_size`` tokens, hashes chained on the parent as vLLM's
  prefix caching does). Capacity: ``MOTOR_SIM_KV_BLOCKS`` blocks, else vLLM's own ``num_gpu_blocks_override`` from
  the engine section, else 16384 blocks (2 M tokens at block size 128). When a new block does not fit, the least
  recently used block goes (``BlockRemoved``); a request touches its blocks from the last to the first, as vLLM
  frees a finished request's blocks in reverse order so that a prompt's tail is evicted before its head. Blocks of
  running requests are not pinned (simplification). ``POST /reset_prefix_cache`` empties it (``AllBlocksCleared``)
  only when ``VLLM_SERVER_DEV_MODE=1``, as vLLM exposes that route only in dev mode.
- **In flight**: at most ``MOTOR_SIM_MAX_RUNNING`` requests (default 8; vLLM's ``max_num_seqs`` of the engine
  section when set) hold a slot, the rest wait in arrival order (``vllm:num_requests_running`` /
  ``vllm:num_requests_waiting``).
- **Prefill**: one at a time per engine (the NPU is saturated by a chunked-prefill token budget), taking
  ``MOTOR_SIM_PREFILL_BASE_MS`` (default 5) + ``MOTOR_SIM_PREFILL_US_PER_TOKEN`` (default 50) us x the prompt
  tokens NOT found in the prefix cache. A decode engine that receives its KV cache from a prefill engine
  (``do_remote_prefill``) computes no prefill.
- **Decode**: ``MOTOR_SIM_DECODE_MS_PER_TOKEN`` (default 2) ms per output token, in parallel across the running
  requests (no batching slowdown modelled); the output length is ``max_tokens`` (``max_completion_tokens``), at most
  ``MOTOR_SIM_MAX_OUTPUT_TOKENS`` (default 4096). A stream sends the first token after prefill plus one decode step,
  then one chunk per ``MOTOR_SIM_STREAM_CHUNK_TOKENS`` tokens (default 16).

The knobs are environment variables, set per engine role through env.json (``motor_engine_prefill_env``,
``motor_engine_decode_env``); ``describe()`` returns the model and its numbers (the benchmark report shows it).
With the defaults, 8,000 uncached prompt tokens take 0.405 s of prefill, 200 output tokens 0.4 s of decode.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from contextlib import contextmanager

from motor_sim.kv_events import block_hash

DEFAULT_KV_BLOCKS = 16384


def _knob(env, name: str, default: float) -> float:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    value = float(raw)
    if value < 0:
        raise ValueError(f"{name}={raw!r} must not be negative")
    return value


class PrefixCache:
    """Which full blocks of past prompts this engine holds (bounded, LRU): serving a prompt stores its new full
    blocks and returns the vLLM events to publish (BlockStored of the new blocks, BlockRemoved of evicted ones)."""

    def __init__(self, block_size: int, capacity: int = DEFAULT_KV_BLOCKS, medium: str = "GPU"):
        if capacity < 1:
            raise ValueError(f"prefix cache capacity {capacity} blocks: at least 1")
        self.block_size, self.capacity, self.medium = block_size, capacity, medium
        self.blocks: collections.OrderedDict[int, None] = collections.OrderedDict()  # oldest first
        self.lock = threading.Lock()

    def lookup(self, tokens: list[int]) -> int:
        """Tokens of the longest cached prefix (whole blocks), without changing the cache."""
        bs, parent, cached = self.block_size, None, 0
        with self.lock:
            for start in range(0, len(tokens) - bs + 1, bs):
                parent = block_hash(parent, tokens[start:start + bs])
                if parent not in self.blocks:
                    break
                cached += bs
        return cached

    def store(self, tokens: list[int]) -> tuple[int, list[list]]:
        """(cached prefix tokens before this request, events to publish in order)."""
        bs = self.block_size
        parent: int | None = None
        cached, hashes, new_hashes, new_tokens, new_parent = 0, [], [], [], None
        removed: list[int] = []
        with self.lock:
            for start in range(0, len(tokens) - bs + 1, bs):
                chunk = tokens[start:start + bs]
                h = block_hash(parent, chunk)
                # Hashes chain on their parent, so after the first miss every later block is new.
                if h in self.blocks and not new_hashes:
                    cached += bs
                else:
                    if not new_hashes:
                        new_parent = parent
                    new_hashes.append(h)
                    new_tokens.extend(chunk)
                hashes.append(h)
                parent = h
            for h in reversed(hashes):  # the head of the prompt ends most recently used
                self.blocks[h] = None
                self.blocks.move_to_end(h)
            while len(self.blocks) > self.capacity:
                removed.append(self.blocks.popitem(last=False)[0])
        events: list[list] = []
        if new_hashes:  # then what it pushed out (a prompt longer than the cache loses its own tail)
            events.append(["BlockStored", new_hashes, new_parent, new_tokens, bs, None, self.medium, None])
        if removed:
            events.append(["BlockRemoved", removed, self.medium])
        return cached, events

    def clear(self) -> list[list]:
        with self.lock:
            self.blocks.clear()
        return [["AllBlocksCleared"]]

    def __len__(self) -> int:
        return len(self.blocks)


class EngineModel:
    """The cache, the slots and the clock of one engine (see the module docstring)."""

    def __init__(self, engine_config: dict, block_size: int, env=None, sleep=time.sleep):
        env = os.environ if env is None else env
        blocks = env.get("MOTOR_SIM_KV_BLOCKS") or engine_config.get("num_gpu_blocks_override") or DEFAULT_KV_BLOCKS
        running = env.get("MOTOR_SIM_MAX_RUNNING") or engine_config.get("max_num_seqs") or 8
        self.cache = PrefixCache(block_size, int(blocks))
        self.max_running = int(running)
        self.prefill_base_s = _knob(env, "MOTOR_SIM_PREFILL_BASE_MS", 5.0) / 1000
        self.prefill_per_token_s = _knob(env, "MOTOR_SIM_PREFILL_US_PER_TOKEN", 50.0) / 1e6
        self.decode_per_token_s = _knob(env, "MOTOR_SIM_DECODE_MS_PER_TOKEN", 2.0) / 1000
        self.max_output = int(_knob(env, "MOTOR_SIM_MAX_OUTPUT_TOKENS", 4096))
        self.chunk_tokens = max(1, int(_knob(env, "MOTOR_SIM_STREAM_CHUNK_TOKENS", 16)))
        self.dev_mode = env.get("VLLM_SERVER_DEV_MODE", "0") in ("1", "true", "True")
        self.sleep = sleep
        self.slots = threading.Semaphore(self.max_running)
        self.prefill_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.running = self.waiting = 0
        self.queries = self.hits = self.requests = 0

    def describe(self) -> dict:
        return {"model": "stand-in engine performance model (not NPU numbers)",
                "kv_blocks": self.cache.capacity, "block_size": self.cache.block_size, "eviction": "LRU",
                "max_running": self.max_running, "prefill_base_ms": self.prefill_base_s * 1000,
                "prefill_us_per_uncached_token": self.prefill_per_token_s * 1e6,
                "prefill_concurrency": 1, "decode_ms_per_token": self.decode_per_token_s * 1000}

    def output_tokens(self, body: dict) -> int:
        wanted = body.get("max_completion_tokens") or body.get("max_tokens") or 16
        return max(1, min(int(wanted), self.max_output))

    @contextmanager
    def slot(self):
        """Hold one of the running slots for a request (waiting in line for it first)."""
        with self.state_lock:
            self.waiting += 1
        self.slots.acquire()
        with self.state_lock:
            self.waiting -= 1
            self.running += 1
        try:
            yield
        finally:
            with self.state_lock:
                self.running -= 1
            self.slots.release()

    def prefill(self, tokens: list[int], remote: bool = False) -> tuple[int, list[list]]:
        """Look the prompt up, compute what is not cached (one prefill at a time), store it: (cached, events).
        ``remote``: the KV cache came from a prefill engine, nothing is computed nor counted as a query."""
        if remote:
            return 0, []
        with self.prefill_lock:
            cached = self.cache.lookup(tokens)
            self.sleep(self.prefill_base_s + self.prefill_per_token_s * (len(tokens) - cached))
            cached, events = self.cache.store(tokens)
        with self.state_lock:
            self.queries += len(tokens)
            self.hits += cached
            self.requests += 1
        return cached, events

    def decode_steps(self, output_tokens: int):
        """Yield the number of tokens of each chunk as it is produced (the first one alone)."""
        done = 0
        while done < output_tokens:
            step = 1 if done == 0 else min(self.chunk_tokens, output_tokens - done)
            self.sleep(self.decode_per_token_s * step)
            done += step
            yield step

    def reset(self) -> tuple[int, dict, list[list]]:
        """vLLM's POST /reset_prefix_cache: (HTTP status, body, events)."""
        if not self.dev_mode:
            return 404, {"detail": "Not Found"}, []
        return 200, {}, self.cache.clear()

    def metrics(self, labels: str) -> list[str]:
        """vLLM's prefix-cache counters and scheduler gauges, Prometheus text lines."""
        lines = []
        for name, kind, value, doc in (
                ("vllm:prefix_cache_queries_total", "counter", self.queries,
                 "Prefix cache queries, in terms of number of queried tokens."),
                ("vllm:prefix_cache_hits_total", "counter", self.hits,
                 "Prefix cache hits, in terms of number of cached tokens."),
                ("vllm:request_success_total", "counter", self.requests, "Count of successfully processed requests."),
                ("vllm:num_requests_running", "gauge", self.running, "Number of requests in model execution batches."),
                ("vllm:num_requests_waiting", "gauge", self.waiting, "Number of requests waiting to be processed."),
                ("vllm:kv_cache_usage_perc", "gauge", len(self.cache) / self.cache.capacity,
                 "KV-cache usage. 1 means 100 percent usage.")):
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}", f"{name}{labels} {float(value)}"]
        return lines
