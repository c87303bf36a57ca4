# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The benchmark's HTML page (pure): one self-contained document, inline SVG and CSS, no script and nothing fetched
at view time. Runs side by side: the summary table, the TTFT distribution (CDF), the hit ratio over time and the
prompt-token share of every prefill instance."""

from __future__ import annotations

from html import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
W, H, PAD = 560, 300, 48


def _fmt(value, spec="%.3f"):
    return "-" if value is None else spec % value


def _axes(title, xlabel, ylabel, xmax, ymax, yfmt="%.2f", xfmt="%.1f") -> list:
    out = ['<text x="%d" y="16" class="title">%s</text>' % (W // 2, escape(title))]
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>' % (PAD, H - PAD, W - 10, H - PAD))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>' % (PAD, 24, PAD, H - PAD))
    for i in range(5):
        y = H - PAD - (H - PAD - 24) * i / 4
        x = PAD + (W - 10 - PAD) * i / 4
        out.append('<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>'
                   % (PAD - 4, y + 4, yfmt % (ymax * i / 4)))
        if xfmt:
            out.append('<text x="%.1f" y="%d" class="tick" text-anchor="%s">%s</text>'
                       % (x, H - PAD + 16, "end" if i == 4 else "middle", xfmt % (xmax * i / 4)))
    out.append('<text x="%d" y="%d" class="label" text-anchor="middle">%s</text>'
               % ((W + PAD) // 2, H - 8, escape(xlabel)))
    out.append('<text x="12" y="%d" class="label" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>'
               % ((H - PAD) // 2 + 12, (H - PAD) // 2 + 12, escape(ylabel)))
    return out


def _xy(x, y, xmax, ymax):
    return (PAD + (W - 10 - PAD) * (x / xmax if xmax else 0), H - PAD - (H - PAD - 24) * (y / ymax if ymax else 0))


def _legend(reports, bottom=False) -> list:
    top = H - PAD - 8 - 14 * len(reports) if bottom else 36
    return ['<text x="%d" y="%d" class="legend" fill="%s">&#9632; %s</text>'
            % (W - 250, top + 14 * i, COLORS[i % len(COLORS)], escape(r["label"][:40]))
            for i, r in enumerate(reports)]


def _svg(kind, body) -> str:
    return ('<svg class="plot" data-plot="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'viewBox="0 0 %d %d">%s</svg>' % (kind, W, H, W, H, "".join(body)))


def ttft_cdf(reports) -> str:
    values = [v for r in reports for v in r.get("ttft_s") or []]
    xmax = max(values) if values else 1.0
    body = _axes("TTFT distribution (share of requests answered within x)", "TTFT (s)", "share", xmax, 1.0)
    for i, r in enumerate(reports):
        data = r.get("ttft_s") or []
        points = " ".join("%.1f,%.1f" % _xy(v, (k + 1) / len(data), xmax, 1.0) for k, v in enumerate(data))
        if points:
            body.append('<polyline class="series" fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                        % (COLORS[i % len(COLORS)], points))
    return _svg("ttft", body + _legend(reports, bottom=True))


def hit_over_time(reports) -> str:
    xmax = max([s[0] for r in reports for s in r.get("hit_ratio_series") or []] or [1.0])
    body = _axes("Hit ratio over time (cumulative, from the engines)", "time since the first request (s)",
                 "hit ratio", xmax, 1.0)
    for i, r in enumerate(reports):
        pts = [_xy(s[0], s[1], xmax, 1.0) for s in r.get("hit_ratio_series") or [] if s[1] is not None]
        if pts:
            body.append('<polyline class="series" fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                        % (COLORS[i % len(COLORS)], " ".join("%.1f,%.1f" % p for p in pts)))
        ideal = r.get("ideal_hit_ratio")
        if ideal is not None:
            y = _xy(0, ideal, xmax, 1.0)[1]
            body.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>'
                        % (PAD, y, W - 10, y, "#555"))
    return _svg("hit", body + _legend(reports) + ['<text x="%d" y="%d" class="tick">dashed: ideal</text>'
                                                  % (W - 250, 36 + 14 * len(reports))])


def instance_share(reports) -> str:
    names = sorted({n for r in reports for n in r.get("per_instance") or {}})
    top = max([i["share"] or 0.0 for r in reports for i in (r.get("per_instance") or {}).values()] or [0.0])
    ymax = max(top, 1.0 / max(len(names), 1)) * 1.15 or 1.0
    body = _axes("Prompt-token share per prefill instance", "instance", "share", len(names) or 1, ymax, xfmt="")
    slot = (W - 10 - PAD) / max(len(names), 1)
    width = slot * 0.8 / max(len(reports), 1)
    for n, name in enumerate(names):
        x0 = PAD + slot * n + slot * 0.1
        body.append('<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>'
                    % (x0 + slot * 0.4, H - PAD + 30, escape(name[-18:])))
        for i, r in enumerate(reports):
            share = ((r.get("per_instance") or {}).get(name) or {}).get("share") or 0.0
            y = _xy(0, share, 1, ymax)[1]
            body.append('<rect class="series" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                        % (x0 + width * i, y, width, H - PAD - y, COLORS[i % len(COLORS)]))
    if names:
        y = _xy(0, 1.0 / len(names), 1, ymax)[1]
        body.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="4 3"/>'
                    % (PAD, y, W - 10, y))
    return _svg("share", body + _legend(reports))


def _table(comp) -> str:
    head = ("run", "scheduler", "requests", "failed", "hit ratio", "ideal", "hit/ideal", "TTFT p50 s",
            "p50 vs first", "TTFT p90 s", "TTFT p99 s", "max share/mean", "tokens/s")
    rows = []
    for s in comp["summary"]:
        sched = ", ".join("%s=%s" % kv for kv in sorted((s["scheduler"] or {}).items()))
        cells = (s["label"], sched, s["requests"], s["failed"], _fmt(s["hit_ratio"]), _fmt(s["ideal_hit_ratio"]),
                 _fmt(s["hit_over_ideal"], "%.2f"), _fmt(s["ttft_p50_s"]), _fmt(s["ttft_p50_vs_first"], "%.2f"),
                 _fmt(s["ttft_p90_s"]), _fmt(s["ttft_p99_s"]), _fmt(s["max_share_over_mean"], "%.2f"),
                 _fmt(s["throughput_tokens_per_s"], "%.0f"))
        rows.append("<tr>%s</tr>" % "".join("<td>%s</td>" % escape(str(c)) for c in cells))
    return ('<table id="summary"><tr>%s</tr>%s</table>'
            % ("".join("<th>%s</th>" % escape(h) for h in head), "".join(rows)))


def render(comp, title="PyMotor KV-cache affinity benchmark") -> str:
    reports = comp["runs"]
    notes = []
    for r in reports:
        model = r.get("engine_model")
        if model:
            notes.append("<li>%s: engines %s</li>" % (escape(r["label"]), escape(str(model))))
        if r.get("cold_start"):
            notes.append("<li>%s: cold start %s</li>" % (escape(r["label"]), escape(str(r["cold_start"]))))
    style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #bbb;"
             "padding:3px 6px;font-size:13px}svg{border:1px solid #ddd;margin:6px}.title{font-size:13px;"
             "text-anchor:middle;font-weight:bold}.tick{font-size:10px}.label{font-size:11px}.legend{font-size:11px}"
             ".axis{stroke:#333}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
            "</head><body><h1>%s</h1>%s<div id=\"plots\">%s%s%s</div><ul id=\"notes\">%s</ul>"
            "<p>Hit ratio: cached / prompt tokens from the prefill engines' vLLM counters; ideal: the same requests "
            "through one unbounded cache. TTFT: first streamed token as the client saw it.</p></body></html>\n"
            % (escape(title), style, escape(title), _table(comp), ttft_cdf(reports), hit_over_time(reports),
               instance_share(reports), "".join(notes)))
