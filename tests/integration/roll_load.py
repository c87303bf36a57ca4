"""Steady chat load through the coordinator during a rolling image upgrade or rollback, and the classification of
its failed requests against the control plane's unavailable window the deploy prints (issue 33). Shared by the
stand-in roll (tests/integration/test_upgrade.py) and the real control plane's (tests/conformance/test_upgrade.py)."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Callable

# roles/motor_service/vars/main.yml motor_service_window_text, whitespace folded
WINDOW = re.compile(r"control plane unavailable window: at most ([0-9.]+) s \((.*?) restarted; from ([0-9.]+)\s+"
                    r"to ([0-9.]+), epoch")


def post_chat(url: str, model: str, timeout: float = 30) -> int:
    """One chat request; its HTTP status (0: no answer at all)."""
    body = json.dumps({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def post_stream(url: str, model: str, max_tokens: int, timeout: float = 120) -> int:
    """One streaming chat request (``stream: true``) read to its end: 200 only when the answer was 200 and the stream
    ended with ``data: [DONE]`` (a stream cut in the middle is broken, whatever its status line said); else the HTTP
    status, or 0."""
    body = json.dumps({"model": model, "max_tokens": max_tokens, "stream": True,
                       "messages": [{"role": "user", "content": "tell a long story"}]}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            done = False
            for line in resp:
                done = done or line.strip() == b"data: [DONE]"
            return resp.status if done else 0
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):  # ValueError: http.client's IncompleteRead of a cut chunked stream
        return 0


class Client(threading.Thread):
    """Chat requests back to back through the coordinator: (start, end, status) of each; with ``stream_tokens``,
    streaming requests of that many output tokens (``post_stream``); with ``pace``, one request every ``pace`` s at
    most (a job that must go on serving for minutes, where back to back would only spend CPU: the suite is bound by
    it)."""

    def __init__(self, url: str, model: str, stream_tokens: int = 0, pace: float = 0.0):
        super().__init__(daemon=True)
        self.url, self.model, self.done, self.results = url, model, threading.Event(), []
        self.stream_tokens, self.pace = stream_tokens, pace

    def run(self):
        while not self.done.is_set():
            start = time.time()
            status = (post_stream(self.url, self.model, self.stream_tokens) if self.stream_tokens
                      else post_chat(self.url, self.model))
            self.results.append((start, time.time(), status))
            rest = max(self.pace - (time.time() - start), 0.05 if status != 200 else 0.0)
            if rest:
                self.done.wait(rest)


def longest_gap(results: list) -> float:
    """The longest time in seconds between two answered (200) requests, the client's longest outage."""
    ends = sorted(end for _, end, status in results if status == 200)
    return round(max((b - a for a, b in zip(ends, ends[1:])), default=0.0), 1)


def window(stdout: str) -> tuple[float, str, float, float] | None:
    """(length s, restarted containers, from, to) of the window the deploy printed, None when it printed none."""
    found = WINDOW.search(" ".join(stdout.split()))
    return (float(found[1]), found[2], float(found[3]), float(found[4])) if found else None


def utc(epoch: float) -> str:
    """An epoch time as HH:MM:SS.s UTC (evidence logs)."""
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%H:%M:%S.%f")[:10]


def classify(results: list, printed: tuple[float, str, float, float], image: str) -> tuple[dict, list]:
    """The counts of a roll (requests, failed, failed inside/outside the window, window, longest gap) and the failed
    requests outside the window (a request that overlaps the window in any way counts as inside)."""
    took, restarted, start, end = printed
    failed = [r for r in results if r[2] != 200]
    outside = [r for r in failed if r[1] < start or r[0] > end]
    statuses: dict[str, int] = {}
    for r in outside:
        statuses[str(r[2])] = statuses.get(str(r[2]), 0) + 1
    counts = {"image": image, "requests": len(results), "failed": len(failed),
              "failed_inside_window": len(failed) - len(outside), "failed_outside_window": len(outside),
              "outside_statuses": statuses, "window_s": round(took, 1), "restarted": restarted,
              "window_utc": f"{utc(start)}-{utc(end)}",
              "outside_utc": [f"{utc(r[0])}-{utc(r[1])} {r[2]}" for r in outside],
              "failed_in_window_s": round(max((r[1] for r in failed if r not in outside), default=start) - start, 1),
              "roll_s": round(results[-1][1] - results[0][0], 1) if results else 0.0,
              "longest_gap_s": longest_gap(results)}
    return counts, outside


def under_load(url: str, model: str, run: Callable[[], subprocess.CompletedProcess]) -> tuple[list, object]:
    """Run ``run`` (the deploy) while a Client sends chat back to back to ``url``; (the client's results, run's)."""
    chat, dummy, result = under_streaming_load(url, model, run, 0, 0)
    return chat, result


def under_streaming_load(url: str, model: str, run: Callable[[], object], streams: int,
                         stream_tokens: int, pace: float = 0.0) -> tuple[list, list, object]:
    """Run ``run`` while one Client sends chat back to back (or one every ``pace`` s) and ``streams`` more send
    streaming chat of ``stream_tokens`` output tokens each; (the chat results, every stream's results, run's). Each
    client finishes the request it is in before it stops (a stream is not cut by the test)."""
    clients = [Client(url, model, pace=pace)] + [Client(url, model, stream_tokens) for _ in range(streams)]
    for client in clients:
        client.start()
    try:
        result = run()
    finally:
        for client in clients:
            client.done.set()
        for client in clients:
            client.join(timeout=180)
    return clients[0].results, sorted(r for c in clients[1:] for r in c.results), result
