"""The benchmark's HTML page (plugins/plugin_utils/bench/html.py) in a real headless Chromium: it parses to the three
plots and the summary table, and its screenshot shows the runs' series in their colours (decoded from the PNG here,
no imaging library). Chromium is Debian's package (make unit/test install it: scripts/ensure_tools.sh); without it the
test skips, except under CI=true where it fails."""

from __future__ import annotations

import collections
import os
import re
import shutil
import struct
import subprocess
import zlib

import pytest

from ansible_collections.pymotor.ascend.plugins.plugin_utils.bench import html, report

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def chromium(tmp_path):
    """argv prefix of a headless Chromium with its own profile (concurrent runs do not share one), or a skip."""
    if BROWSER is None:
        reason = "chromium absent (Debian package chromium; make unit/test install it: scripts/ensure_tools.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) -> (width, height, rows of RGB triples)."""
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", data[pos + 8:pos + 8 + size])
        elif kind == b"IDAT":
            idat.append(data[pos + 8:pos + 8 + size])
        pos += 12 + size
    width, height, depth, ctype, interlace = ihdr[0], ihdr[1], ihdr[2], ihdr[3], ihdr[6]
    assert depth == 8 and ctype in (2, 6) and not interlace, ihdr
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    prev, rows = bytearray(stride), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride) if kind else ():
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            else:  # 4: Paeth
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(b"".join(bytes(line[i:i + 3]) for i in range(0, stride, bpp)) if bpp == 4 else bytes(line))
        prev = line
    return width, height, rows


def colour_counts(png: bytes) -> collections.Counter:
    rows = decode_png(png)[2]
    return collections.Counter(row[i:i + 3].hex() for row in rows for i in range(0, len(row), 3))


def comparison():
    """Two runs on four prefill engines, from engine counters as the replay records them."""
    def run(label, sched, ttfts, tokens):
        results = [{"sent_s": k * 0.5, "ttft_s": t, "e2e_s": t + 0.5, "prompt_tokens": 1000, "output_tokens": 20}
                   for k, t in enumerate(ttfts)]
        after = {f"p{n}/0": {"queries": q, "hits": q // (3 - n % 2), "requests": 3} for n, q in enumerate(tokens)}
        before = {name: {"queries": 0, "hits": 0, "requests": 0} for name in after}
        samples = [{"t": t, "metrics": {name: {k: v * t // 6 for k, v in m.items()} for name, m in after.items()}}
                   for t in (2, 4, 6)]
        return report.run_report({"label": label, "scheduler": sched, "ideal_hit_ratio": 0.6, "results": results,
                                  "metrics_before": before, "metrics_after": after, "samples": samples})
    lb = run("load_balance", {"scheduler_type": "load_balance"}, [0.2, 0.3, 0.5, 0.9, 1.4, 2.0],
             [3000, 3000, 3000, 3000])
    kv = run("kv_cache_affinity", {"scheduler_type": "kv_cache_affinity"}, [0.1, 0.15, 0.2, 0.4, 0.8, 1.1],
             [4500, 2500, 3000, 2000])
    return report.comparison([lb, kv])


def test_page_renders_its_plots_in_headless_chromium(chromium, tmp_path):
    page = tmp_path / "bench.html"
    page.write_text(html.render(comparison()))
    dom = subprocess.run(chromium + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert re.findall(r'<svg[^>]*data-plot="(\w+)"', dom.stdout) == ["ttft", "hit", "share"]
    assert dom.stdout.count("<polyline") == 4 and dom.stdout.count('<rect class="series"') == 8
    assert len(re.findall(r"<tr>", dom.stdout)) == 3  # header + the 2 runs

    def shot(path, source):
        path.with_suffix(".html").write_text(source)
        out = subprocess.run(chromium + ["--window-size=1200,1100", f"--screenshot={path}",
                                         path.with_suffix(".html").as_uri()],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0 and path.is_file(), out.stderr[-2000:]
        return colour_counts(path.read_bytes())

    colours = shot(tmp_path / "page.png", page.read_text())
    first, second = (c.lstrip("#") for c in html.COLORS[:2])
    # each run's bars (4 engines) and lines are painted in its own colour: thousands of pixels each
    assert colours[first] > 2000 and colours[second] > 2000, colours.most_common(8)
    assert colours["ffffff"] > 0.5 * sum(colours.values())  # the page itself, not an error page
    # not vacuous: the same page without its plots paints neither colour
    bare = shot(tmp_path / "bare.png", re.sub(r"<svg.*?</svg>", "", page.read_text(), flags=re.S))
    assert bare[first] == 0 and bare[second] == 0, bare.most_common(8)
