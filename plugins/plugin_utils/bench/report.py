# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The numbers of a benchmark run (pure, no I/O): what the replay observed -> the report of one run, several runs ->
one comparison, and the progress line.

Definitions (also in README.md):
- ``hit_ratio``: cached prompt tokens / prompt tokens over the run, from the prefill engines' own counters (vLLM's
  ``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``, the difference between the scrape before the first
  request and after the last answer); ``per_instance`` the same per prefill engine (``<container>/<dp_rank>``) with
  its requests (``vllm:request_success``), prompt tokens and ``share`` (its prompt tokens / all prompt tokens).
- ``ideal_hit_ratio``: the same requests through one unbounded cache (``workload.ideal_hit_ratio``).
- ``ttft_*``: time from sending a request to the first streamed token, over the answered requests (linear
  interpolation between order statistics); ``e2e_*`` to the last one.
- ``throughput_tokens_per_s``: prompt + generated tokens of the answered requests / the time from the first request
  sent to the last answer.
- ``max_share_over_mean``: the largest instance share / the mean share (1.0 = perfectly even).
"""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.text import render_table

COUNTERS = ("queries", "hits", "requests")


def percentile(values, q) -> float | None:
    """The q-th percentile (0..100) with linear interpolation, None for no values."""
    data = sorted(values)
    if not data:
        return None
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def counter_delta(before, after) -> dict:
    """``{instance: {"queries", "hits", "requests"}}`` grown between two scrapes (an instance missing in one of them
    is left out: its counters are unknown)."""
    out = {}
    for name, now in (after or {}).items():
        then = (before or {}).get(name)
        if then is None or now is None:
            continue
        out[name] = {k: max(0.0, float(now.get(k) or 0) - float(then.get(k) or 0)) for k in COUNTERS}
    return out


def _ratio(num, den):
    return num / den if den else None


def per_instance(delta) -> dict:
    total = sum(d["queries"] for d in delta.values())
    return {name: {"requests": int(d["requests"]), "prompt_tokens": int(d["queries"]), "cached_tokens": int(d["hits"]),
                   "hit_ratio": _ratio(d["hits"], d["queries"]), "share": _ratio(d["queries"], total)}
            for name, d in sorted(delta.items())}


def hit_series(before, samples) -> list:
    """``[[t_s, cumulative hit ratio, {instance: cumulative prompt tokens}]]`` of the periodic scrapes."""
    out = []
    for sample in samples or []:
        delta = counter_delta(before, sample.get("metrics"))
        queries = sum(d["queries"] for d in delta.values())
        hits = sum(d["hits"] for d in delta.values())
        out.append([round(float(sample["t"]), 3), _ratio(hits, queries),
                    {name: int(d["queries"]) for name, d in sorted(delta.items())}])
    return out


def run_report(run) -> dict:
    """One run's report. ``run``: ``label``, ``scheduler`` (the coordinator's scheduler settings), ``results``
    (per request ``{"sent_s", "ttft_s", "e2e_s", "prompt_tokens", "cached_tokens", "output_tokens", "error"}``),
    ``metrics_before`` / ``metrics_after`` / ``samples`` (``[{"t", "metrics"}]``) of the prefill engines,
    ``ideal_hit_ratio``, and anything else to carry (``engine_model``, ``cold_start``, ``time_scale``, ...)."""
    results = run.get("results") or []
    ok = [r for r in results if not r.get("error")]
    ttft = [r["ttft_s"] for r in ok if r.get("ttft_s") is not None]
    e2e = [r["e2e_s"] for r in ok if r.get("e2e_s") is not None]
    delta = counter_delta(run.get("metrics_before"), run.get("metrics_after"))
    queries = sum(d["queries"] for d in delta.values())
    hits = sum(d["hits"] for d in delta.values())
    instances = per_instance(delta)
    shares = [i["share"] for i in instances.values() if i["share"] is not None]
    start = min((r["sent_s"] for r in results), default=0.0)
    end = max((r["sent_s"] + r["e2e_s"] for r in ok if r.get("e2e_s") is not None), default=start)
    tokens = sum(int(r.get("prompt_tokens") or 0) + int(r.get("output_tokens") or 0) for r in ok)
    errors = {}
    for r in results:
        if r.get("error"):
            errors[str(r["error"])[:120]] = errors.get(str(r["error"])[:120], 0) + 1
    report = {
        "label": run.get("label") or "run",
        "scheduler": run.get("scheduler") or {},
        "requests": len(results),
        "failed": len(results) - len(ok),
        "errors": errors,
        "hit_ratio": _ratio(hits, queries),
        "ideal_hit_ratio": run.get("ideal_hit_ratio"),
        "hit_over_ideal": _ratio(_ratio(hits, queries) or 0.0, run.get("ideal_hit_ratio")),
        "client_cached_ratio": _ratio(sum(int(r.get("cached_tokens") or 0) for r in ok),
                                      sum(int(r.get("prompt_tokens") or 0) for r in ok)),
        "ttft_p50_s": percentile(ttft, 50), "ttft_p90_s": percentile(ttft, 90), "ttft_p99_s": percentile(ttft, 99),
        "e2e_p50_s": percentile(e2e, 50), "e2e_p99_s": percentile(e2e, 99),
        "throughput_tokens_per_s": _ratio(tokens, end - start),
        "duration_s": end - start,
        "per_instance": instances,
        "max_share_over_mean": (max(shares) * len(shares)) if shares else None,
        "hit_ratio_series": hit_series(run.get("metrics_before"), run.get("samples")),
        "ttft_s": sorted(ttft),
    }
    for key in ("engine_model", "cold_start", "time_scale", "trace", "workload"):
        if key in run:
            report[key] = run[key]
    return report


def comparison(reports) -> dict:
    """Several run reports -> ``{"runs": [...], "summary": [...]}``; the summary compares each run with the first
    (TTFT p50 ratio, hit ratio over ideal, largest instance share over the mean)."""
    base = reports[0] if reports else {}
    summary = []
    for r in reports:
        summary.append({"label": r["label"], "scheduler": r["scheduler"], "requests": r["requests"],
                        "failed": r["failed"], "hit_ratio": r["hit_ratio"], "ideal_hit_ratio": r["ideal_hit_ratio"],
                        "hit_over_ideal": r["hit_over_ideal"], "ttft_p50_s": r["ttft_p50_s"],
                        "ttft_p90_s": r["ttft_p90_s"], "ttft_p99_s": r["ttft_p99_s"],
                        "ttft_p50_vs_first": _ratio(r["ttft_p50_s"] or 0.0, base.get("ttft_p50_s")),
                        "max_share_over_mean": r["max_share_over_mean"],
                        "throughput_tokens_per_s": r["throughput_tokens_per_s"]})
    return {"runs": list(reports), "summary": summary}


def progress_line(label, elapsed_s, sent, answered, failed, total, before, now) -> str:
    """``<label> 12.0 s: sent 40/1000, answered 35 (failed 0), hit ratio 0.41`` (running, from the engines)."""
    delta = counter_delta(before, now)
    queries = sum(d["queries"] for d in delta.values())
    ratio = _ratio(sum(d["hits"] for d in delta.values()), queries)
    return "%s %.1f s: sent %d/%d, answered %d (failed %d), hit ratio %s" % (
        label, elapsed_s, sent, total, answered, failed, "n/a" if ratio is None else "%.3f" % ratio)


def summary_table(comp) -> str:
    """The comparison as a text table (what the playbook prints)."""
    def fmt(v, spec="%.3f"):
        return "-" if v is None else spec % v

    rows = [{"run": s["label"], "requests": s["requests"], "failed": s["failed"], "hit": fmt(s["hit_ratio"]),
             "ideal": fmt(s["ideal_hit_ratio"]), "over": fmt(s["hit_over_ideal"], "%.2f"),
             "p50": fmt(s["ttft_p50_s"]), "vs": fmt(s["ttft_p50_vs_first"], "%.2f"), "p90": fmt(s["ttft_p90_s"]),
             "p99": fmt(s["ttft_p99_s"]),
             "share": fmt(s["max_share_over_mean"], "%.2f")} for s in comp["summary"]]
    return render_table(rows, [("run", "run"), ("requests", "requests"), ("failed", "failed"), ("hit", "hit ratio"),
                               ("ideal", "ideal"), ("over", "hit/ideal"), ("p50", "TTFT p50 s"),
                               ("vs", "p50 vs first"), ("p90", "TTFT p90 s"), ("p99", "TTFT p99 s"),
                               ("share", "max share/mean")])
