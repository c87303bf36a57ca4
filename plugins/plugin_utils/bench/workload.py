# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Requests of a benchmark (pure, no I/O): a Mooncake-format trace or the built-in shared-prefix workload, the
prompts built for the job's tokenizer, and the hit ratio one unbounded cache would reach.

Mooncake's trace format (FAST'25 release): one JSON object per line, ``timestamp`` (ms after the first request),
``input_length`` and ``output_length`` (tokens) and ``hash_ids``: the prompt's 512-token blocks, two requests whose
first k ids are equal share their first k*512 tokens.

Prompts: every block is made of "pieces" (short words) that the job's tokenizer turns into the same number of tokens
each, alone and in any sequence (checked with the engine's ``/tokenize``: ``calibrate``), so a block of
``BLOCK_TOKENS / tokens_per_piece`` pieces is exactly 512 tokens and blocks with equal ``hash_ids`` are equal token
sequences. A block's pieces are drawn from a generator seeded by its hash id (and the run's salt), so blocks with
different ids differ from their first piece on (with a probability of 1 - 1/len(pieces)^k after k pieces).
"""

from __future__ import annotations

import json
import random

BLOCK_TOKENS = 512

# Three-letter English words: one token each in the usual BPE vocabularies (with the leading space), four tokens
# each in a byte-level one. Which of them a tokenizer treats alike is measured, never assumed (calibrate).
WORDS = ("the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her", "was", "one", "our",
         "out", "day", "get", "has", "him", "his", "how", "man", "new", "now", "old", "see", "two", "way", "who",
         "boy", "did", "its", "let", "put", "say", "she", "too", "use", "cat", "dog", "red", "sun", "sea", "box",
         "car", "cup", "end", "far", "fun", "hat", "job", "key", "map", "net", "pen", "run", "sky", "top", "war",
         "win", "yes", "art", "big")


class WorkloadError(ValueError):
    """A trace or calibration that cannot be used; the message says where and why."""


def parse_trace(lines, limit=None) -> list[dict]:
    """Mooncake JSONL lines -> ``[{"arrival_s", "input_length", "output_length", "hash_ids"}]`` in file order,
    the first ``limit`` requests (all when None); arrivals relative to the first request."""
    out, first = [], None
    for number, line in enumerate(lines, 1):
        if limit is not None and len(out) >= limit:
            break
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
            stamp, inp, outp, ids = (float(row["timestamp"]), int(row["input_length"]), int(row["output_length"]),
                                     [int(i) for i in row["hash_ids"]])
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkloadError("trace line %d: not a Mooncake request (%s)" % (number, exc))
        if inp < 1 or outp < 0 or len(ids) != -(-inp // BLOCK_TOKENS):
            raise WorkloadError("trace line %d: input_length %d needs %d hash_ids of %d tokens, has %d"
                                % (number, inp, -(-inp // BLOCK_TOKENS), BLOCK_TOKENS, len(ids)))
        first = stamp if first is None else first
        out.append({"arrival_s": (stamp - first) / 1000.0, "input_length": inp, "output_length": outp,
                    "hash_ids": ids})
    if not out:
        raise WorkloadError("the trace has no request")
    return out


def shared_prefix_workload(requests=200, prefixes=8, shared_blocks=4, own_blocks=2, rate_per_s=4.0,
                           output_length=32) -> list[dict]:
    """The built-in workload: ``prefixes`` system prompts of ``shared_blocks`` blocks, each request one of them
    (round robin) plus ``own_blocks`` blocks of its own, Poisson-free arrivals at ``rate_per_s``."""
    out, next_id = [], prefixes * shared_blocks
    for i in range(requests):
        p = i % prefixes
        ids = list(range(p * shared_blocks, (p + 1) * shared_blocks)) + list(range(next_id, next_id + own_blocks))
        next_id += own_blocks
        out.append({"arrival_s": i / rate_per_s, "input_length": len(ids) * BLOCK_TOKENS,
                    "output_length": output_length, "hash_ids": ids})
    return out


def ideal_hit_ratio(requests, block_tokens=BLOCK_TOKENS) -> float:
    """Cached prompt tokens / prompt tokens through ONE unbounded prefix cache that keeps whole blocks: a request
    reuses its leading blocks whose ids came before (a Mooncake id names the whole prefix up to its block)."""
    seen, cached, total = set(), 0, 0
    for r in requests:
        ids, n = r["hash_ids"], r["input_length"]
        full = n // block_tokens
        k = 0
        while k < min(len(ids), full) and ids[k] in seen:
            k += 1
        cached += k * block_tokens
        total += n
        seen.update(ids[:full])
    return cached / total if total else 0.0


def calibrate(tokenize, words=WORDS) -> dict:
    """``tokenize(text) -> token count`` (the engine's /tokenize) -> ``{"pieces": [...], "tokens_per_piece": t}``:
    the largest set of ``" " + word`` pieces that each count ``t`` tokens, alone and all in a row, with ``t``
    dividing the block size. Raises WorkloadError when no such set exists."""
    counts = {}
    for word in words:
        counts.setdefault(tokenize(" " + word), []).append(" " + word)
    for t, pieces in sorted(counts.items(), key=lambda kv: -len(kv[1])):
        if t < 1 or BLOCK_TOKENS % t or len(pieces) < 8:
            continue
        row = "".join(pieces)
        if tokenize(row) == t * len(pieces) and tokenize(row + row) == 2 * t * len(pieces):
            return {"pieces": pieces, "tokens_per_piece": t}
    raise WorkloadError("the tokenizer gives no set of 8 or more words the same token count (dividing %d) alone "
                        "and in a row: counts %s" % (BLOCK_TOKENS, {t: len(p) for t, p in counts.items()}))


def block_text(hash_id, tokens, calibration, salt="") -> str:
    """The text of one block: ``tokens`` tokens (a multiple of tokens_per_piece) drawn for ``hash_id``."""
    t = calibration["tokens_per_piece"]
    rng = random.Random("%s/%s" % (salt, hash_id))
    pieces = calibration["pieces"]
    return "".join(rng.choice(pieces) for _piece in range(tokens // t))


def prompt_text(request, calibration, salt="") -> str:
    """A request's prompt: its blocks in order, the last one as long as the trace says (rounded down to whole
    pieces); equal hash_ids give equal text, hence equal tokens."""
    n, parts = request["input_length"], []
    for i, hash_id in enumerate(request["hash_ids"]):
        parts.append(block_text(hash_id, min(BLOCK_TOKENS, n - i * BLOCK_TOKENS), calibration, salt))
    return "".join(parts)


def prompt_tokens(request, calibration) -> int:
    """Tokens of ``prompt_text`` (the last block rounded down to whole pieces)."""
    t = calibration["tokens_per_piece"]
    n = request["input_length"]
    return (n // BLOCK_TOKENS) * BLOCK_TOKENS + (n % BLOCK_TOKENS) // t * t
