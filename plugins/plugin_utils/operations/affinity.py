# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""KV-cache affinity judged from what a real deployment exposes (pure, no I/O).

The probe (roles/motor_operations/files/motor_ops_probe.py) records, per shared prefix, the prompt's tokens (the
prefill engine's ``/tokenize``, vLLM's route, else the model's tokenizer in the image), the KV conductor's
``POST /query`` answer before the first request and after every request, and the prefix-cache counters of every
prefill engine (``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``, Prometheus text of ``/metrics``) after
every request. From those answers alone this module says, per prefix, which instance (and DP rank) holds it, how
many tokens the conductor matched, where the repeats went (the engine whose query counter grew) and a verdict;
when a source cannot be read it says which and why instead of guessing.
"""

from __future__ import annotations

import re

# vLLM's counters (Prometheus text: the samples carry the _total suffix); older vLLM had the gpu_ prefix.
QUERY_FAMILIES = ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")
HIT_FAMILIES = ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def _family_sum(lines, families):
    """Sum of the samples of the first family of ``families`` present in ``lines`` (None when none is)."""
    for family in families:
        names = (family, family + "_total")
        values = []
        for line in lines:
            match = SAMPLE.match(line.strip())
            if match and match.group(1) in names:
                try:
                    values.append(float(match.group(3)))
                except ValueError:
                    continue
        if values:
            return sum(values)
    return None


def parse_prefix_cache(text_or_lines):
    """Prometheus text (or its lines) -> ``{"queries": n, "hits": n}`` summed over label sets; None when the
    families are absent (metrics off, not a vLLM engine)."""
    lines = text_or_lines.splitlines() if isinstance(text_or_lines, str) else list(text_or_lines or [])
    queries = _family_sum(lines, QUERY_FAMILIES)
    hits = _family_sum(lines, HIT_FAMILIES)
    if queries is None or hits is None:
        return None
    return {"queries": queries, "hits": hits}


def query_matches(answer):
    """A conductor ``/query`` answer -> ``{"<instance_id>/dp<rank>": matched tokens}`` (every tenant; an instance
    without a DP breakdown keys as ``<instance_id>``)."""
    out = {}
    if not isinstance(answer, dict):
        return out
    for per_instance in answer.values():
        if not isinstance(per_instance, dict):
            continue
        for instance, hit in per_instance.items():
            hit = hit if isinstance(hit, dict) else {}
            ranks = hit.get("DP") if isinstance(hit.get("DP"), dict) else {}
            if ranks:
                for rank, matched in ranks.items():
                    out["%s/dp%s" % (instance, rank)] = int(matched or 0)
            else:
                out[str(instance)] = int(hit.get("longest_matched") or 0)
    return out


def conductor_names(services, expected):
    """``{"<instance_id>/dp<rank>": "<container>/<dp_rank>"}`` from the conductor's ``/services`` (its Endpoint)
    and the plan's expected KV endpoints (``expected_kv_endpoints``), named as the probe names the engines: by the
    plan's ``dp_rank`` label of the pod's endpoint at the same local index."""
    # a pod may bind the endpoint of any rank of its instance (ranks go in registration order): the conductor's
    # DPRank says which one it got, and the pod's k-th smallest rank is its k-th local endpoint (mgmt/metrics port)
    entries = {url: e for e in expected or [] for url in e["of"]}
    found = [s for s in (services or {}).get("services") or [] if isinstance(s, dict) and s.get("Endpoint") in entries]
    ranks_of = {}
    for service in found:
        ranks_of.setdefault(entries[service["Endpoint"]]["container"], set()).add(int(service.get("DPRank") or 0))
    out = {}
    for service in found:
        entry = entries[service["Endpoint"]]
        rank = int(service.get("DPRank") or 0)
        local = sorted(ranks_of[entry["container"]]).index(rank)
        labels = entry.get("ranks") or []
        label = labels[local] if local < len(labels) else rank
        out["%s/dp%s" % (service.get("InstanceID"), service.get("DPRank"))] = "%s/%s" % (entry["container"], label)
    return out


def _http_problem(answer, what):
    """Why an answer of the probe (``{status, json|lines, error}``) cannot be used, or ''."""
    if not isinstance(answer, dict):
        return "%s: not read" % what
    status = answer.get("status")
    if status == 200:
        return ""
    error = str(answer.get("error") or "")[:200]
    if status in (-1, None):
        hint = ""
        if "CERTIFICATE" in error.upper() or "SSL" in error.upper():
            hint = " (TLS: check the CA/cert/key the tls_config section names)"
        return "%s: no answer (%s)%s" % (what, error or "connection failed", hint)
    return "%s: HTTP %s %s" % (what, status, error)


def _counters(snapshot):
    """``{engine: {"queries", "hits"}}`` of one metrics snapshot, and ``{engine: reason}`` of the unreadable ones."""
    values, problems = {}, {}
    for engine, answer in (snapshot or {}).items():
        problem = _http_problem(answer, "%s /metrics" % engine)
        if problem:
            problems[engine] = problem
            continue
        parsed = parse_prefix_cache(answer.get("lines") or [])
        if parsed is None:
            problems[engine] = ("%s /metrics: no vllm:prefix_cache_queries / vllm:prefix_cache_hits family "
                                "(metrics disabled, or prefix caching off)" % engine)
        else:
            values[engine] = parsed
    return values, problems


def _served_by(before, after):
    """The engine whose query counter grew the most between two snapshots: (engine, queried, hit) or Nones."""
    best = (None, 0.0, 0.0)
    for engine, now in after.items():
        then = before.get(engine)
        if then is None:
            continue
        queried = now["queries"] - then["queries"]
        if queried > best[1]:
            best = (engine, queried, now["hits"] - then["hits"])
    return best


def _holder(matches):
    """(key, tokens) of the largest conductor match, or (None, 0)."""
    best = (None, 0)
    for key in sorted(matches):
        if matches[key] > best[1]:
            best = (key, matches[key])
    return best


def judge_prefix(prefix, metrics_before, names):
    """One prefix of the probe -> its report entry (see ``affinity_report``)."""
    steps = prefix.get("steps") or []
    entry = {"name": prefix.get("name"), "prompt_tokens": prefix.get("prompt_tokens"), "holder": None,
             "holder_container": None, "matched_before": None, "matched": None, "repeats": [], "spread": [],
             "on_holder": 0, "repeats_total": 0, "verdict": "unknown", "reasons": [], "notes": []}
    if prefix.get("error"):
        entry["reasons"].append(prefix["error"])
        return entry
    queries = [s.get("query") for s in steps]
    bad = [_http_problem(q, "conductor /query") for q in queries if _http_problem(q, "conductor /query")]
    if bad or not steps:
        entry["reasons"].append(bad[0] if bad else "no step recorded")
        return entry
    entry["matched_before"] = max(list(query_matches(queries[0].get("json")).values()) or [0])
    requests = list(steps[1:])
    failed = [r for r in requests if r.get("status") != 200]
    if failed:
        entry["reasons"].append("%d of %d requests failed (%s)"
                                % (len(failed), len(requests), _http_problem(failed[0], "coordinator")))
    first = query_matches(requests[0].get("query", {}).get("json")) if requests else {}
    holder, matched = _holder(first)
    entry.update(holder=holder, matched=matched, holder_container=names.get(holder))
    if holder is None:
        entry["verdict"] = "fail"
        entry["reasons"].append("the conductor matched no token of the prefix after it was served: the KV events of "
                                "the engine that served it do not reach the conductor (rank not registered, events "
                                "cut or unreadable)")
        return entry
    final = query_matches(requests[-1].get("query", {}).get("json"))
    entry["spread"] = sorted(k for k, v in final.items() if v > 0)
    entry["matched"] = max(matched, final.get(holder, 0))
    holder_engine = names.get(holder)
    previous, counter_problems = _counters(metrics_before)
    for step in requests[1:]:
        values, problems = _counters(step.get("metrics"))
        counter_problems.update(problems)
        engine, queried, hit = _served_by(previous, values) if values else (None, 0.0, 0.0)
        entry["repeats"].append({"status": step.get("status"), "engine": engine, "queried_tokens": int(queried),
                                 "hit_tokens": int(hit)})
        previous = values or previous
    entry["repeats_total"] = len(requests) - 1
    others = [k for k in entry["spread"] if k != holder]
    if counter_problems or not holder_engine:
        why = sorted(set(counter_problems.values()))[:1] or [
            "%s is not a planned KV endpoint (conductor /services)" % holder]
        entry["notes"].append("prefix-cache counters not used: %s; repeats judged from the conductor alone" % why[0])
        entry["on_holder"] = 0 if others else entry["repeats_total"]
    else:
        entry["on_holder"] = len([r for r in entry["repeats"] if r["engine"] == holder_engine and r["hit_tokens"] > 0])
        for repeat in entry["repeats"]:
            if repeat["engine"] != holder_engine:
                entry["reasons"].append("a repeat went to %s, not to the holder %s" % (repeat["engine"], holder_engine))
            elif repeat["hit_tokens"] <= 0:
                entry["reasons"].append("a repeat reached the holder %s without a prefix-cache hit" % holder_engine)
    if others:
        entry["reasons"].append("the conductor also indexes the prefix on %s: repeats were served elsewhere"
                                % ", ".join(others))
    entry["verdict"] = "ok" if not entry["reasons"] and entry["repeats_total"] > 0 else "fail"
    if entry["repeats_total"] == 0:
        entry["reasons"].append("no repeat was sent")
    return entry


def affinity_report(probe, services=None, expected=None, min_affinity=1.0):
    """The affinity part of a verify report from the probe's output.

    ``probe``: ``{tokens: {source, detail}, metrics_before: {engine: answer}, prefixes: [{name, prompt_tokens,
    error?, steps: [{query}, {status, query, metrics}...]}]}`` where an answer is ``{status, json|lines, error}``
    and ``engine`` is ``<container>/<dp_rank>``; ``services``: the conductor's ``/services``; ``expected``: the
    plan's KV endpoints. Returns ``{passed, fraction, on_holder, repeats, tokens, prefixes, reasons}``."""
    probe = probe or {}
    names = conductor_names(services, expected)
    tokens = probe.get("tokens") or {}
    prefixes = [judge_prefix(p, probe.get("metrics_before") or {}, names) for p in probe.get("prefixes") or []]
    repeats = sum(p["repeats_total"] for p in prefixes)
    on_holder = sum(p["on_holder"] for p in prefixes)
    fraction = (float(on_holder) / repeats) if repeats else 0.0
    reasons = []
    if probe.get("error"):
        reasons.append(probe["error"])
    if not tokens.get("source"):
        reasons.append("prompt tokens unavailable: %s" % (tokens.get("detail") or "not read"))
    if not prefixes:
        reasons.append("no shared prefix was probed")
    for p in prefixes:
        if p["verdict"] != "ok":
            reasons.append("%s: %s" % (p["name"], "; ".join(p["reasons"]) or p["verdict"]))
    passed = not reasons and repeats > 0 and fraction >= float(min_affinity)
    if not reasons and not passed:
        reasons.append("%.0f%% of the repeats hit the holder, below %.0f%%" % (fraction * 100, float(min_affinity) * 100))
    return {"passed": passed, "fraction": round(fraction, 3), "on_holder": on_holder, "repeats": repeats,
            "tokens": tokens, "prefixes": prefixes, "reasons": reasons}


def prefix_line(prefix):
    """One line of text per prefix: holder, conductor match, where the repeats went, verdict."""
    went = ", ".join("%s(+%s hit)" % (r["engine"], r["hit_tokens"]) for r in prefix["repeats"]) or "-"
    line = "%s: held by %s (%s), conductor matched %s of %s tokens (before: %s); repeats -> %s; %s" % (
        prefix["name"], prefix["holder"], prefix["holder_container"] or "?", prefix["matched"],
        prefix["prompt_tokens"], prefix["matched_before"], went, prefix["verdict"].upper())
    extra = prefix["reasons"] + prefix["notes"]
    return line + (" (" + "; ".join(extra) + ")" if extra else "")
