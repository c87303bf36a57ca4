"""The trace-replay benchmark core (plugins/plugin_utils/bench): trace parsing, prompts whose blocks are equal
exactly where hash_ids are, the ideal hit ratio, the report numbers, the HTML page, and a replay against a local
fake deployment (two engines with the stand-in's performance model behind a round-robin or longest-prefix router)."""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.pymotor.ascend.plugins.plugin_utils.bench import html, replay, report, workload

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sim" / "motor_image"))
from motor_sim.perf import EngineModel  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
# ../shared/traces of the main checkout (README there); a helper worktree sits one level deeper
TRACE = next((p for p in (REPO.parent / "shared" / "traces" / "mooncake_synthetic_trace.jsonl",
                          REPO.parent.parent / "shared" / "traces" / "mooncake_synthetic_trace.jsonl") if p.is_file()),
             REPO.parent / "shared" / "traces" / "mooncake_synthetic_trace.jsonl")


def byte_count(text):
    return len(text.encode())


def line(ts, inp, out, ids):
    return json.dumps({"timestamp": ts, "input_length": inp, "output_length": out, "hash_ids": ids})


def test_parse_trace_relative_arrivals_limit_and_errors():
    rows = workload.parse_trace([line(1000, 600, 5, [0, 1]), "", line(1500, 512, 2, [0]), line(9, 1, 1, [7])], 2)
    assert [r["arrival_s"] for r in rows] == [0.0, 0.5] and rows[1]["hash_ids"] == [0]
    with pytest.raises(workload.WorkloadError, match="line 1: input_length 600 needs 2 hash_ids"):
        workload.parse_trace([line(0, 600, 5, [0])])
    with pytest.raises(workload.WorkloadError, match="line 1: not a Mooncake request"):
        workload.parse_trace(['{"timestamp": 0}'])


def test_ideal_hit_ratio_counts_leading_seen_whole_blocks():
    reqs = [{"input_length": 1024, "hash_ids": [0, 1]}, {"input_length": 1200, "hash_ids": [0, 1, 2]},
            {"input_length": 1024, "hash_ids": [5, 1]}]
    # second request reuses 2 blocks (1024 of 1200 tokens); the third starts with an unseen block: nothing
    assert workload.ideal_hit_ratio(reqs) == pytest.approx(1024 / (1024 + 1200 + 1024))


@pytest.mark.skipif(not TRACE.is_file(), reason="shared trace not present")
def test_ideal_of_the_shared_trace_matches_its_readme():
    rows = workload.parse_trace(TRACE.read_text().splitlines())
    assert len(rows) == 3993
    assert workload.ideal_hit_ratio(rows) == pytest.approx(0.65, abs=0.02)  # README: 0.640 in blocks


def test_calibration_and_blocks_equal_exactly_where_hash_ids_are():
    cal = workload.calibrate(byte_count)
    assert cal["tokens_per_piece"] == 4 and len(cal["pieces"]) == len(workload.WORDS)
    a = {"input_length": 1300, "hash_ids": [3, 4, 9]}
    b = {"input_length": 1100, "hash_ids": [3, 4, 8]}
    c = {"input_length": 1024, "hash_ids": [7, 4]}
    ta, tb, tc = (workload.prompt_text(r, cal).encode() for r in (a, b, c))
    assert len(ta) == workload.prompt_tokens(a, cal) == 1300 and len(tb) == 1100
    assert ta[:1024] == tb[:1024] and ta[1024:1028] != tb[1024:1028]
    assert tc[:4] != ta[:4] and tc[512:1024] == ta[512:1024]  # same id, same text; the prefix differs anyway
    assert workload.prompt_text(a, cal, salt="run2")[:512] != workload.prompt_text(a, cal)[:512]


def test_calibration_with_a_word_tokenizer_and_a_refusal():
    def words(text):  # a BPE-like tokenizer: one token per word
        return len(text.split())

    assert workload.calibrate(words)["tokens_per_piece"] == 1
    with pytest.raises(workload.WorkloadError, match="no set of 8"):
        workload.calibrate(lambda text: 3 * len(text.split()))


def test_builtin_workload_shares_its_system_prompts():
    reqs = workload.shared_prefix_workload(requests=16, prefixes=4, shared_blocks=2, own_blocks=1)
    assert len(reqs) == 16 and reqs[4]["hash_ids"][:2] == reqs[0]["hash_ids"][:2]
    assert workload.ideal_hit_ratio(reqs) == pytest.approx(12 * 1024 / (16 * 1536))


def test_percentile_and_run_report():
    assert report.percentile([], 50) is None
    assert report.percentile([1, 2, 3, 4], 50) == 2.5 and report.percentile([5], 99) == 5
    run = {"label": "lb", "scheduler": {"scheduler_type": "load_balance"}, "ideal_hit_ratio": 0.5,
           "results": [{"sent_s": 0.0, "ttft_s": 0.1, "e2e_s": 1.0, "prompt_tokens": 100, "output_tokens": 10},
                       {"sent_s": 1.0, "ttft_s": 0.3, "e2e_s": 1.0, "prompt_tokens": 100, "output_tokens": 10},
                       {"sent_s": 1.5, "error": "HTTP 500 boom"}],
           "metrics_before": {"p0/0": {"queries": 10, "hits": 0, "requests": 1}, "p1/0": None},
           "metrics_after": {"p0/0": {"queries": 160, "hits": 30, "requests": 3},
                             "p1/0": {"queries": 50, "hits": 0, "requests": 1}},
           "samples": [{"t": 1.0, "metrics": {"p0/0": {"queries": 60, "hits": 10, "requests": 2}}}]}
    r = report.run_report(run)
    assert (r["requests"], r["failed"], r["errors"]) == (3, 1, {"HTTP 500 boom": 1})
    assert r["hit_ratio"] == pytest.approx(30 / 150) and r["hit_over_ideal"] == pytest.approx(0.4)
    assert r["per_instance"] == {"p0/0": {"requests": 2, "prompt_tokens": 150, "cached_tokens": 30,
                                          "hit_ratio": 0.2, "share": 1.0}}  # p1/0 unknown before: left out
    assert r["ttft_p50_s"] == pytest.approx(0.2) and r["throughput_tokens_per_s"] == pytest.approx(220 / 2.0)
    assert r["hit_ratio_series"] == [[1.0, 0.2, {"p0/0": 50}]]
    comp = report.comparison([r, dict(r, label="kv", ttft_p50_s=0.1)])
    assert comp["summary"][1]["ttft_p50_vs_first"] == pytest.approx(0.5)
    table = report.summary_table(comp)
    assert table.splitlines()[0].split()[:3] == ["run", "requests", "failed"] and "0.50" in table


def test_html_is_self_contained_with_three_plots_per_comparison():
    def fake(label, ttft, share):
        return {"label": label, "scheduler": {"scheduler_type": label}, "requests": 2, "failed": 0,
                "hit_ratio": 0.4, "ideal_hit_ratio": 0.5, "hit_over_ideal": 0.8, "ttft_p50_s": ttft[0],
                "ttft_p90_s": ttft[-1], "ttft_p99_s": ttft[-1], "ttft_s": ttft, "max_share_over_mean": 2 * share,
                "throughput_tokens_per_s": 10.0, "hit_ratio_series": [[1.0, 0.2, {}], [2.0, 0.4, {}]],
                "per_instance": {"a/0": {"share": share}, "b/0": {"share": 1 - share}},
                "engine_model": {"prefill_us_per_uncached_token": 50}}
    page = html.render(report.comparison([fake("load_balance", [0.2, 0.4], 0.5),
                                          fake("kv<affinity>", [0.1, 0.2], 0.7)]))
    assert page.startswith("<!DOCTYPE html>") and "kv&lt;affinity&gt;" in page
    assert re.findall(r'data-plot="(\w+)"', page) == ["ttft", "hit", "share"]
    assert page.count("<polyline") == 4 and page.count("<rect") == 4
    assert not re.search(r"(src|href)=|https?://(?!www\.w3\.org/2000/svg)|<script", page)


class _Server(ThreadingHTTPServer):
    # time_scale 0 sends every request at once: the default listen backlog (5) refused some of them on a busy machine
    request_queue_size = 128


class FakeJob:
    """Two engines (the stand-in's performance model, no sleeping) behind one OpenAI endpoint routing round robin
    or to the engine holding the longest prefix; byte tokenizer; /metrics per engine; streamed answers."""

    def __init__(self, affinity):
        self.engines = [EngineModel({}, 16, env={"VLLM_SERVER_DEV_MODE": "1"}, sleep=lambda s: None)
                        for _engine in range(2)]
        # Not a plain 0, 1 cycle: the workload's prefixes come round robin too (4 of them), so requests served in
        # their order (a loaded machine) kept each prefix on one engine and matched the ideal hit ratio.
        self.rr, self.affinity = itertools.cycle((0, 1, 1)), affinity
        job = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status, text, ctype="application/json"):
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                engine = job.engines[int(self.path[-1])]
                self._send(200, "\n".join(engine.metrics('{engine="0"}')) + "\n", "text/plain")

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    self._send(200, json.dumps({"count": byte_count(body["prompt"])}))
                    return
                if self.path == "/reset_prefix_cache":
                    for e in job.engines:
                        e.reset()
                    self._send(200, "{}")
                    return
                tokens = list(body["prompt"].encode())
                engine = job.engines[job.route(tokens)]
                with engine.slot():
                    cached = engine.prefill(tokens)[0]
                chunks = ['{"choices": [{"index": 0, "text": " tok"}]}'] * 2 + [json.dumps(
                    {"choices": [], "usage": {"prompt_tokens": len(tokens), "completion_tokens": 2,
                                              "prompt_tokens_details": {"cached_tokens": cached}}})]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write("".join("data: %s\n\n" % c for c in chunks + ["[DONE]"]).encode())
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        base = "http://127.0.0.1:%d" % self.server.server_port
        self.targets = {"inference": {"url": base + "/v1/completions", "tls": None},
                        "metrics": {"p%d/0" % i: [{"url": "%s/metrics%d" % (base, i), "tls": None}] for i in range(2)}}
        self.tokenize = {"url": base + "/tokenize", "tls": None}

    def route(self, tokens):
        if not self.affinity:
            return next(self.rr)
        held = [e.cache.lookup(tokens) for e in self.engines]
        return max(range(2), key=lambda i: (held[i], -len(self.engines[i].cache)))


@pytest.mark.parametrize("affinity", [False, True])
def test_replay_against_a_fake_job_reads_hits_from_the_engines(affinity):
    job = FakeJob(affinity)
    try:
        reqs = workload.shared_prefix_workload(requests=24, prefixes=4, shared_blocks=2, own_blocks=1,
                                               rate_per_s=1000.0, output_length=2)
        cal = workload.calibrate(replay.tokenizer_count(job.tokenize))
        assert replay.reset_prefix_caches(job.targets["metrics"]) == {"p0/0": "ok", "p1/0": "ok"}
        lines = []
        run = replay.replay(job.targets, reqs, cal, "m", "run", time_scale=0.0, progress=lines.append)
        run.update(scheduler={"affinity": affinity}, ideal_hit_ratio=workload.ideal_hit_ratio(reqs))
        r = report.run_report(run)
    finally:
        job.server.shutdown()
    assert (r["requests"], r["failed"]) == (24, 0) and lines and "sent 24/24" in lines[-1]
    assert all(x["ttft_s"] is not None and x["output_tokens"] == 2 for x in run["results"])
    assert r["client_cached_ratio"] == pytest.approx(r["hit_ratio"])  # the answers agree with the counters
    assert sum(i["prompt_tokens"] for i in r["per_instance"].values()) == 24 * 1536
    if affinity:  # requests arrive together: the router may not have seen a prefix yet, never worse than 1 miss each
        assert r["hit_ratio"] >= 0.6 * r["ideal_hit_ratio"]
    else:
        assert r["hit_ratio"] < r["ideal_hit_ratio"]


def test_every_run_has_a_fresh_salt_so_an_engine_without_reset_prefix_cache_cannot_warm_it():
    """vLLM serves /reset_prefix_cache only in dev mode (the stand-in too: 404 otherwise): a second run with the same
    label still shares no block with the first, so the benchmark has nothing to warn about."""
    from ansible_collections.pymotor.ascend.plugins.action.motor_bench import run_salt

    cal = workload.calibrate(byte_count)
    request = {"input_length": 1024, "hash_ids": [3, 4]}
    first, second = run_salt("scheduler_type=kv_affinity"), run_salt("scheduler_type=kv_affinity")
    assert first != second and first.startswith("scheduler_type=kv_affinity/")
    assert workload.prompt_text(request, cal, first)[:512] != workload.prompt_text(request, cal, second)[:512]
    assert run_salt("x", "n1") == "x/n1"
