# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Replay a workload against a deployed job (standard-library HTTP, run on the controller by motor_bench).

Open loop: request i is sent at ``arrival_s * time_scale`` after the start whatever the answers before it did, each
on its own thread, to the coordinator's OpenAI ``/v1/completions`` with ``stream`` (and ``stream_options.
include_usage``, vLLM's ``ignore_eos`` so the output is as long as the trace says). Before the first request and
after the last answer, and every ``sample_every`` seconds in between, every prefill engine's ``/metrics`` is read
(vLLM's prefix-cache counters); a progress line at least every ``progress_every`` seconds.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_wait import _context, get_answer
from ansible_collections.pymotor.ascend.plugins.plugin_utils.bench import report, workload
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.affinity import _family_sum, parse_prefix_cache


def _connection(url, tls, timeout):
    parts = urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout,
                                           context=_context(tls or {})), parts
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout), parts


def post_json(target, path, body, timeout=30.0):
    """(status, parsed JSON or None, text) of one POST to ``path`` on the target's host and port; -1 = no answer."""
    conn, _parts = _connection(target["url"], target.get("tls"), timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        status, text = resp.status, resp.read().decode("utf-8", "replace")
    except Exception as exc:  # refused, reset, timeout, TLS: say so, never raise into the replay
        return -1, None, str(exc)
    finally:
        conn.close()
    try:
        return status, json.loads(text), text
    except ValueError:
        return status, None, text


def scrape(metrics_targets, timeout=10.0) -> dict:
    """``{instance: {"queries", "hits", "requests"} or None}`` from each instance's first /metrics that answers
    with vLLM's prefix-cache families."""
    out = {}
    for name, targets in sorted((metrics_targets or {}).items()):
        out[name] = None
        for tgt in targets:
            status, _body, text = get_answer(tgt["url"], timeout, tgt.get("tls"))
            if status != 200:
                continue
            lines = text.splitlines()
            parsed = parse_prefix_cache(lines)
            if parsed is not None:
                parsed["requests"] = _family_sum(lines, ("vllm:request_success",)) or 0.0
                out[name] = parsed
                break
    return out


def reset_prefix_caches(metrics_targets) -> dict:
    """vLLM's ``POST /reset_prefix_cache`` on the service port of every instance: ``{instance: "ok" | reason}``."""
    out = {}
    for name, targets in sorted((metrics_targets or {}).items()):
        service = targets[-1]
        status, _body, text = post_json(service, "/reset_prefix_cache", {})
        out[name] = "ok" if status == 200 else "HTTP %s %s" % (status, text[:120].strip())
    return out


def tokenizer_count(target):
    """``text -> token count`` through vLLM's ``POST /tokenize`` (no special tokens)."""
    path = urlsplit(target["url"]).path or "/tokenize"

    def count(text):
        status, body, text_ = post_json(target, path, {"prompt": text, "add_special_tokens": False})
        if status != 200 or not isinstance(body, dict):
            raise workload.WorkloadError("%s: HTTP %s %s" % (target["url"], status, text_[:200]))
        return int(body.get("count", len(body.get("tokens") or [])))
    return count


def stream_request(target, body, timeout, clock=time.monotonic):
    """One streamed completion: ``{"ttft_s", "e2e_s", "prompt_tokens", "cached_tokens", "output_tokens", "error"}``
    (times from just before the request was sent). A non-streamed answer counts its whole time as TTFT."""
    out = {"ttft_s": None, "e2e_s": None, "prompt_tokens": None, "cached_tokens": None, "output_tokens": 0,
           "error": None}
    start = clock()
    conn, parts = _connection(target["url"], target.get("tls"), timeout)
    try:
        # the target's own headers: the coordinator's API key (motor_bench sets them, never logged)
        conn.request("POST", parts.path, body=json.dumps(body),
                     headers=dict({"Content-Type": "application/json", "Accept": "text/event-stream"},
                                  **(target.get("headers") or {})))
        resp = conn.getresponse()
        if resp.status != 200:
            out["error"] = "HTTP %s %s" % (resp.status, resp.read()[:200].decode("utf-8", "replace").strip())
            return out
        if "text/event-stream" not in (resp.getheader("Content-Type") or ""):
            data = json.loads(resp.read() or b"{}")
            out["ttft_s"] = out["e2e_s"] = clock() - start
            _usage(out, data.get("usage"))
            return out
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                out["error"] = "stream error %s" % str(chunk["error"])[:200]
                break
            if out["ttft_s"] is None and any(_text(c) for c in chunk.get("choices") or []):
                out["ttft_s"] = clock() - start
            _usage(out, chunk.get("usage"))
        out["e2e_s"] = clock() - start
        if out["ttft_s"] is None and out["error"] is None:
            out["error"] = "no token streamed"
    except Exception as exc:  # a broken answer fails this request, never the run
        out["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
    finally:
        conn.close()
    return out


def _text(choice):
    return choice.get("text") or (choice.get("delta") or {}).get("content")


def _usage(out, usage):
    if isinstance(usage, dict):
        out["prompt_tokens"] = usage.get("prompt_tokens")
        out["output_tokens"] = usage.get("completion_tokens") or 0
        out["cached_tokens"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


def replay(targets, requests, calibration, model, label, time_scale=1.0, salt="", timeout=600.0,
           progress=print, sample_every=5.0, progress_every=10.0, clock=time.monotonic, sleep=time.sleep,
           send=stream_request):
    """Replay ``requests`` (workload dicts) -> the ``run`` that ``report.run_report`` takes (without scheduler and
    ideal). ``targets``: ``{"inference": target of /v1/completions, "metrics": {instance: [targets]}}``."""
    results = [None] * len(requests)
    lock = threading.Lock()
    counts = {"sent": 0, "answered": 0, "failed": 0}
    samples = []
    before = scrape(targets["metrics"])
    done = threading.Event()
    start = clock()

    def one(i, req):
        body = {"model": model, "prompt": workload.prompt_text(req, calibration, salt),
                "max_tokens": max(1, req["output_length"]), "stream": True,
                "stream_options": {"include_usage": True}, "ignore_eos": True}
        sent = clock() - start
        res = send(targets["inference"], body, timeout)
        res["sent_s"] = sent
        if res.get("prompt_tokens") is None:
            res["prompt_tokens"] = workload.prompt_tokens(req, calibration)
        results[i] = res
        with lock:
            counts["answered"] += 1
            counts["failed"] += 1 if res.get("error") else 0

    def watch():
        last_progress = last_sample = clock()
        while not done.wait(0.5):
            now = clock()
            if now - last_sample >= sample_every or now - last_progress >= progress_every:
                metrics = scrape(targets["metrics"])
                samples.append({"t": now - start, "metrics": metrics})
                last_sample = now
                if now - last_progress >= progress_every:
                    with lock:
                        line = report.progress_line(label, now - start, counts["sent"], counts["answered"],
                                                    counts["failed"], len(requests), before, metrics)
                    progress(line)
                    last_progress = now

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    threads = []
    for i, req in enumerate(requests):
        delay = start + req["arrival_s"] * time_scale - clock()
        if delay > 0:
            sleep(delay)
        thread = threading.Thread(target=one, args=(i, req), daemon=True)
        thread.start()
        threads.append(thread)
        with lock:
            counts["sent"] += 1
    for thread in threads:
        thread.join(timeout + 60)
    after = scrape(targets["metrics"])
    done.set()
    watcher.join(5)
    samples.append({"t": clock() - start, "metrics": after})
    progress(report.progress_line(label, clock() - start, counts["sent"], counts["answered"], counts["failed"],
                                  len(requests), before, after))
    results = [r if r is not None else {"sent_s": 0.0, "error": "no answer within the timeout"} for r in results]
    return {"label": label, "results": results, "metrics_before": before, "metrics_after": after,
            "samples": samples}
