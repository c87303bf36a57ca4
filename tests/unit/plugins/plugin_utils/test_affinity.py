"""Unit tests of plugins/plugin_utils/operations/affinity.py and targets.py: the affinity report from recorded
conductor /query, vLLM /metrics and /tokenize answers (tests/unit/fixtures/affinity), no header of ours."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations import affinity as af
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import expected_kv_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import probe_args, service_targets, uri_args
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.verify import verify_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "affinity"
METRICS = (FIXTURES / "vllm_metrics.txt").read_text()
HOLDER = json.loads((FIXTURES / "query_holder.json").read_text())
EMPTY = json.loads((FIXTURES / "query_empty.json").read_text())
SERVICES = json.loads((FIXTURES / "services.json").read_text())
TOKENIZE = json.loads((FIXTURES / "tokenize.json").read_text())


def plan(tls=None):
    deploy = {"job_id": "j"}
    if tls:
        deploy["tls_config"] = tls
    user = {"motor_deploy_config": deploy}

    def engine(name, role, ranks):
        return {"name": name, "host": "h1", "ip": "10.0.0.1", "role": role, "tier": 2, "dp_ranks": ranks,
                "user_config": user, "port_map": {"node_manager": 1026},
                "endpoints": [{"dp_rank": r, "service_port": 10000 + 2 * i, "mgmt_port": 10001 + 2 * i}
                              for i, r in enumerate(ranks)]}
    return {"job_id": "j", "affinity": True, "controller": {"ip": "10.0.0.2", "api_port": 2026},
            "coordinator": {"ip": "10.0.0.2", "mgmt_port": 1026, "infer_port": 1025},
            "kv_conductor": {"ip": "10.0.0.2", "port": 13333},
            "kv_events": {"role": "prefill", "endpoint_port": 5557, "replay_port": 6667},
            "containers": [engine("j-p0-0", "prefill", [0, 1]), engine("j-d0-0", "decode", [0, 1])]}


def metrics(queries, hits):
    """A recorded vLLM /metrics answer with the counters set (the probe keeps the vllm:prefix_cache_* lines)."""
    text = METRICS.replace("} 2450.0\nvllm:prefix_cache_queries_created", "} %s\nvllm:prefix_cache_queries_created" % queries)
    text = text.replace('hits_total{engine="0",model_name="qwen3-8B"} 1024.0', 'hits_total{engine="0",model_name="qwen3-8B"} %s' % hits)
    return {"status": 200, "lines": [ln for ln in text.splitlines() if ln.startswith("vllm:prefix_cache_")]}


def query(answer):
    return {"status": 200, "json": copy.deepcopy(answer)}


def probe(repeats_to="j-p0-0/1", hit=1024):
    """The holder is vllm-prefill-1 DP 1 = j-p0-0/1; each repeat adds 1200 queried tokens on ``repeats_to``."""
    counters = {"j-p0-0/0": [0, 0], "j-p0-0/1": [0, 0]}

    def step(to, hit_tokens):
        counters[to][0] += 1200
        counters[to][1] += hit_tokens
        return {"status": 200, "query": query(HOLDER), "metrics": {k: metrics(*v) for k, v in counters.items()}}

    before = {k: metrics(*v) for k, v in counters.items()}
    steps = [{"query": query(EMPTY)}, step("j-p0-0/1", 0)] + [step(repeats_to, hit) for dummy in range(3)]
    return {"tokens": {"source": "tokenize", "detail": ""}, "metrics_before": before,
            "prefixes": [{"name": "prefix-0", "prompt_tokens": 1200, "steps": steps}]}


def report(p):
    return af.affinity_report(p, SERVICES, expected_kv_endpoints(plan()))


def test_parse_prefix_cache_reads_the_vllm_families():
    assert af.parse_prefix_cache(METRICS) == {"queries": 2450.0, "hits": 1024.0}
    old = "vllm:gpu_prefix_cache_queries_total{a=\"b\"} 10\nvllm:gpu_prefix_cache_hits_total{a=\"b\"} 4\n"
    assert af.parse_prefix_cache(old) == {"queries": 10.0, "hits": 4.0}
    assert af.parse_prefix_cache("# no vllm here\nprocess_cpu_seconds_total 3\n") is None


def test_query_matches_and_names():
    assert af.query_matches(HOLDER) == {"vllm-prefill-1/dp1": 1152}
    assert af.query_matches({"default": {"x": {"longest_matched": 7}}}) == {"x": 7}
    assert af.query_matches("not json") == {}
    names = af.conductor_names(SERVICES, expected_kv_endpoints(plan()))
    assert names == {"vllm-prefill-1/dp0": "j-p0-0/0", "vllm-prefill-1/dp1": "j-p0-0/1"}


def test_names_follow_the_registration_order_of_a_two_pod_instance():
    """Pod 1 registered first and got rank 0: its endpoint tcp://<pod 1>:5557 is the probe's "j-p0-1/1" (the plan's
    label of pod 1's first local endpoint, where its metrics are read), not "j-p0-1/0"."""
    expected = [{"container": "j-p0-0", "need": 1, "ranks": [0], "of": ["tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558"]},
                {"container": "j-p0-1", "need": 1, "ranks": [1], "of": ["tcp://10.0.0.2:5557", "tcp://10.0.0.2:5558"]}]
    services = {"services": [{"Endpoint": "tcp://10.0.0.2:5557", "InstanceID": "vllm-prefill-4", "DPRank": 0},
                             {"Endpoint": "tcp://10.0.0.1:5558", "InstanceID": "vllm-prefill-4", "DPRank": 1}]}
    names = af.conductor_names(services, expected)
    assert names == {"vllm-prefill-4/dp0": "j-p0-1/1", "vllm-prefill-4/dp1": "j-p0-0/0"}
    two_local = [{"container": "j-p0-0", "need": 2, "ranks": [0, 1],
                  "of": [f"tcp://10.0.0.1:{p}" for p in range(5557, 5561)]}]
    services = {"services": [{"Endpoint": "tcp://10.0.0.1:5559", "InstanceID": "vllm-prefill-2", "DPRank": 2},
                             {"Endpoint": "tcp://10.0.0.1:5560", "InstanceID": "vllm-prefill-2", "DPRank": 3}]}
    names = af.conductor_names(services, two_local)
    assert names == {"vllm-prefill-2/dp2": "j-p0-0/0", "vllm-prefill-2/dp3": "j-p0-0/1"}


def test_repeats_on_the_holder_pass():
    got = report(probe())
    assert got["passed"] and got["fraction"] == 1.0 and got["repeats"] == 3
    entry = got["prefixes"][0]
    assert (entry["holder"], entry["holder_container"], entry["matched"], entry["matched_before"]) == (
        "vllm-prefill-1/dp1", "j-p0-0/1", 1152, 0)
    assert [r["engine"] for r in entry["repeats"]] == ["j-p0-0/1"] * 3
    assert all(r["hit_tokens"] == 1024 for r in entry["repeats"]) and entry["verdict"] == "ok"
    assert "held by vllm-prefill-1/dp1 (j-p0-0/1), conductor matched 1152 of 1200" in af.prefix_line(entry)


def test_repeats_elsewhere_fail_and_say_where_they_went():
    got = report(probe(repeats_to="j-p0-0/0", hit=0))
    entry = got["prefixes"][0]
    assert not got["passed"] and got["fraction"] == 0.0 and entry["verdict"] == "fail"
    assert "a repeat went to j-p0-0/0, not to the holder j-p0-0/1" in entry["reasons"]


def test_failed_request_says_what_the_coordinator_answered():
    p = probe()
    p["prefixes"][0]["steps"][2].update(status=500, error='{"detail":"All retries failed"}')
    entry = report(p)["prefixes"][0]
    assert entry["verdict"] == "fail"
    assert '1 of 4 requests failed (coordinator: HTTP 500 {"detail":"All retries failed"})' in entry["reasons"]


def test_holder_without_cache_hits_fails():
    entry = report(probe(hit=0))["prefixes"][0]
    assert entry["verdict"] == "fail" and "without a prefix-cache hit" in " ".join(entry["reasons"])


def test_conductor_that_indexed_nothing_fails_precisely():
    p = probe()
    for step in p["prefixes"][0]["steps"]:
        step["query"] = query(EMPTY)
    got = report(p)
    assert not got["passed"]
    assert "the conductor matched no token of the prefix" in got["prefixes"][0]["reasons"][0]


def test_conductor_down_is_reported_not_guessed():
    p = probe()
    for step in p["prefixes"][0]["steps"]:
        step["query"] = {"status": -1, "error": "[Errno 111] Connection refused"}
    entry = report(p)["prefixes"][0]
    assert entry["verdict"] == "unknown"
    assert entry["reasons"] == ["conductor /query: no answer ([Errno 111] Connection refused)"]


def test_metrics_off_falls_back_to_the_conductor_and_says_why():
    p = probe()
    off = {"status": 200, "lines": []}
    p["metrics_before"] = {k: off for k in p["metrics_before"]}
    for step in p["prefixes"][0]["steps"][1:]:
        step["metrics"] = {k: off for k in step["metrics"]}
    got = report(p)
    entry = got["prefixes"][0]
    assert got["passed"] and entry["on_holder"] == 3
    assert "no vllm:prefix_cache_queries / vllm:prefix_cache_hits family" in entry["notes"][0]
    assert "judged from the conductor alone" in entry["notes"][0]


def test_tls_failure_of_metrics_names_tls():
    p = probe()
    bad = {"status": -1, "error": "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"}
    p["metrics_before"] = {k: bad for k in p["metrics_before"]}
    entry = report(p)["prefixes"][0]
    assert "TLS: check the CA/cert/key the tls_config section names" in entry["notes"][0]


def test_spread_over_two_instances_fails():
    p = probe()
    spread = {"default": {"vllm-prefill-1": {"longest_matched": 1152, "DP": {"0": 1152, "1": 1152}}}}
    p["prefixes"][0]["steps"][-1]["query"] = query(spread)
    entry = report(p)["prefixes"][0]
    assert entry["spread"] == ["vllm-prefill-1/dp0", "vllm-prefill-1/dp1"] and entry["verdict"] == "fail"


def test_tokens_unavailable_is_a_reason():
    p = {"tokens": {"source": None, "detail": "http://x/tokenize answered 404"},
         "prefixes": [{"name": "prefix-0", "error": "prompt tokens unavailable: http://x/tokenize answered 404",
                       "steps": []}]}
    got = report(p)
    assert not got["passed"] and got["reasons"][0] == "prompt tokens unavailable: http://x/tokenize answered 404"


def test_verify_report_has_one_check_per_prefix_and_no_header():
    raw = {"services": SERVICES, "probe": dict(probe(), endpoints={}, unrelated=[{"status": 200}])}
    checks = {c["check"]: c for c in verify_report(plan(), raw)["checks"]}
    per_prefix = checks["affinity: repeats of a shared prefix go to the instance holding it"]
    assert per_prefix["ok"] and per_prefix["target"] == "prefix-0"
    assert checks["affinity: fraction of repeats served with the cached prefix"]["ok"]
    down = verify_report(plan(), {"services": {}, "services_error": "HTTP -1 refused", "probe": {}})
    detail = {c["check"]: c["detail"] for c in down["checks"]}["conductor lists every prefill DP rank"]
    assert detail.startswith("conductor /services unreadable (HTTP -1 refused)")


@pytest.mark.parametrize("tls, scheme", [(None, "http"), ({"mgmt_tls_config": {"enable_tls": False}}, "http"),
                                         ({"mgmt_tls_config": {"enable_tls": True, "ca_file": "/c/ca.crt",
                                                               "cert_file": "/c/s.crt", "key_file": "/c/s.key"}},
                                          "https")])
def test_targets_follow_the_tls_sections(tls, scheme):
    targets = service_targets(plan(tls))
    for name in ("controller", "coordinator"):
        assert targets[name]["url"].startswith(scheme + "://")
    assert targets["node_managers"]["j-p0-0"]["url"].startswith(scheme + "://10.0.0.1:1026/")
    assert targets["engines"]["j-d0-0/1"]["url"] == scheme + "://10.0.0.1:10003/status"
    assert targets["inference"]["url"] == "http://10.0.0.2:1025/v1/chat/completions"  # infer_tls_config is off
    assert targets["conductor"]["url"] == "http://10.0.0.2:13333"  # the Mooncake conductor serves plain http
    assert sorted(targets["metrics"]) == ["j-p0-0/0", "j-p0-0/1"]
    assert targets["tokenize"]["url"] == "http://10.0.0.1:10000/tokenize"
    args = uri_args(targets["controller"])
    assert args == ({} if scheme == "http" else
                    {"validate_certs": True, "ca_path": "/c/ca.crt", "client_cert": "/c/s.crt", "client_key": "/c/s.key"})


def test_probe_args_carry_the_targets():
    args = probe_args(plan(), {"model": "qwen3-8B", "block_size": 128})
    assert args["conductor"]["url"] == "http://10.0.0.2:13333/query"
    assert args["endpoints"] == ["tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558"]
    assert args["model"] == "qwen3-8B" and set(args["engines"]) == {"j-p0-0/0", "j-p0-0/1"}
