"""Unit tests of plugins/plugin_utils/operations/monitoring.py: the targets, rules, config and dashboard of a job from
its plan, and Prometheus' own promtool on the generated files (check config, check rules, test rules: each alert
fires on a series that should fire it and stays silent on one that should not)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.monitoring import (
    HAPROXY_METRICS_PORT,
    REGISTRATIONS_METRIC,
    alert_rules,
    dashboard,
    metrics_targets,
    monitoring_files,
    publishing_ranks,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan

_SPEC = importlib.util.spec_from_file_location("motor_plan_helpers", Path(__file__).with_name("test_motor_plan.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)
contract_config = _HELPERS.contract_config
inventory = _HELPERS.inventory

PROMTOOL = shutil.which("promtool")


@pytest.fixture()
def promtool_bin():
    """promtool, or a skip with the reason; under CI (make test installs it: scripts/ensure_tools.sh) a failure."""
    if PROMTOOL is None:
        reason = "promtool absent (Debian package prometheus; make unit/test install it: scripts/ensure_tools.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return PROMTOOL


def affinity_plan(prefill=2, watcher_metrics=True):
    cfg = contract_config(roles={"prefill": (prefill, 1, 2, 2), "decode": (1, 1, 2, 2)}, affinity=True, pool=True)
    plan = build_plan(cfg, inventory(engine=prefill + 1, control=1))
    if not watcher_metrics:
        for c in plan["containers"]:
            c["port_map"].pop("metrics", None) if c["role"] == "kv_watcher" else None
    return plan


def by_pod(targets):
    out = {}
    for group in targets:
        out.setdefault(group["labels"]["pod"], []).append(group)
    return out


def test_targets_every_endpoint_with_its_labels():
    plan = affinity_plan()
    targets = metrics_targets(plan)
    pods = by_pod(targets)
    # every engine endpoint (one per DP rank) on its management port, labelled with job, instance, pod, host, rank
    engines = [c for c in plan["containers"] if c["tier"] == 2]
    for c in engines:
        got = {g["labels"]["dp_rank"]: g for g in pods[c["name"]]}
        assert sorted(got) == sorted(str(ep["dp_rank"]) for ep in c["endpoints"])
        for ep in c["endpoints"]:
            group = got[str(ep["dp_rank"])]
            assert group["targets"] == ["%s:%s" % (c["ip"], ep["mgmt_port"])]
            assert group["labels"] == {"job": "job", "role": c["role"], "instance": c["job_name"], "pod": c["name"],
                                       "host": c["host"], "dp_rank": str(ep["dp_rank"])}
    coord = plan["coordinator"]
    assert pods["job-coordinator"][0]["targets"] == ["%s:%s" % (coord["ip"], coord["obs_port"])]
    assert pods["job-controller"][0]["labels"]["__metrics_path__"] == "/observability/metrics"
    assert pods["job-kv-pool"][0]["targets"] == ["%s:%s" % (plan["kv_pool"]["ip"], plan["kv_pool"]["metrics_port"])]
    assert len(targets) == sum(len(c["endpoints"]) for c in engines) + len(pods) - len(engines)


def test_scale_out_adds_the_new_instance_targets():
    small, large = metrics_targets(affinity_plan(2)), metrics_targets(affinity_plan(3))
    new = {g["labels"]["instance"] for g in large} - {g["labels"]["instance"] for g in small}
    assert new == {"job-p2"}
    assert publishing_ranks(affinity_plan(3)) == 6


def test_https_when_mgmt_tls_is_on():
    plan = affinity_plan()
    plan["containers"][0]["user_config"]["motor_deploy_config"]["tls_config"] = {
        "mgmt_tls_config": {"enable_tls": True, "ca_file": "/ca.pem", "cert_file": "/c.pem", "key_file": "/k.pem"}}
    engine = [g for g in metrics_targets(plan) if g["labels"]["role"] == "prefill"][0]
    assert engine["labels"]["__scheme__"] == "https"
    files = {Path(f["path"]).parent.name: yaml.safe_load(f["text"]) for f in monitoring_files(plan, "/srv/mon")}
    tls = files["prometheus"]["scrape_configs"][0]["tls_config"]
    assert tls == {"ca_file": "/ca.pem", "cert_file": "/c.pem", "key_file": "/k.pem"}


def test_rules_follow_the_plan():
    names = [r.get("alert") for r in alert_rules(affinity_plan())["groups"][0]["rules"] if "alert" in r]
    assert names == ["MotorCoordinatorNotReady", "MotorEngineEndpointDown", "MotorKVRegistrationsMissing",
                     "MotorPrefixCacheHitRatioLow", "MotorPrefillLoadImbalance", "MotorContainerRestarting",
                     "MotorHealerBudgetSpent", "MotorNpuUnhealthy"]
    for rule in alert_rules(affinity_plan())["groups"][0]["rules"]:
        if "alert" in rule:
            assert rule["annotations"]["summary"] and "playbooks/" in rule["annotations"]["runbook"]
    # no watcher metrics endpoint: no registrations rule (it would always fire on an absent series)
    names = [r.get("alert") for r in alert_rules(affinity_plan(watcher_metrics=False))["groups"][0]["rules"]]
    assert "MotorKVRegistrationsMissing" not in names
    plain = build_plan(contract_config(), inventory(engine=2, control=1))
    names = [r.get("alert") for r in alert_rules(plain)["groups"][0]["rules"]]
    assert "MotorPrefixCacheHitRatioLow" not in names and "MotorKVRegistrationsMissing" not in names


def test_dashboard_reads_only_series_that_exist():
    board = dashboard(affinity_plan())
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for name in ("vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:e2e_request_latency_seconds_bucket", "motor:prefix_cache_hit_ratio:rate15m",
                 REGISTRATIONS_METRIC, "motor:prefill_load:sum", "process_start_time_seconds"):
        assert name in exprs
    recorded = {r["record"] for r in alert_rules(affinity_plan())["groups"][0]["rules"] if "record" in r}
    assert {"motor:prefix_cache_hit_ratio:rate15m", "motor:prefix_cache_hit_ratio_overall:rate15m",
            "motor:prefill_load:sum"} <= recorded
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def write_files(plan, root):
    for f in monitoring_files(plan, str(root)):
        Path(f["path"]).parent.mkdir(parents=True, exist_ok=True)
        Path(f["path"]).write_text(f["text"], encoding="utf-8")


def promtool(*args):
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)


def test_promtool_checks_config_and_rules(tmp_path, promtool_bin):
    write_files(affinity_plan(), tmp_path)
    for args in (("check", "config", str(tmp_path / "prometheus" / "job.yml")),
                 ("check", "rules", str(tmp_path / "rules" / "job.rules.yml"))):
        result = promtool(*args)
        assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------------------------------
# promtool test rules: per alert a case where it fires and one where it stays silent (interval 1m)

P0 = {"job": "job", "role": "prefill", "instance": "job-p0", "pod": "job-p0-0", "host": "e1", "dp_rank": "0"}
P1 = dict(P0, instance="job-p1", pod="job-p1-0", host="e2")
COORD = {"job": "job", "role": "coordinator", "instance": "job-coordinator", "pod": "job-coordinator", "host": "c1"}
HEALER = {"job": "job", "container": "job-controller", "rule": "lost_add"}
NPU = {"job": "job", "host": "e1", "container": "job-p0-0", "npu": "2", "health": "Alarm"}
NPU_OK = dict(NPU, npu="3", health="OK")
WATCHER = {"job": "job", "role": "kv_conductor", "instance": "job-kv-watcher", "pod": "job-kv-watcher", "host": "c1"}


def series(name, labels, values):
    return {"series": "%s{%s}" % (name, ",".join('%s="%s"' % kv for kv in sorted(labels.items()))), "values": values}


def case(alert, eval_time, inputs, fired):
    """One promtool test: the input series and the alerts expected at eval_time (fired: a list of label dicts)."""
    return {"interval": "1m", "input_series": inputs,
            "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": [
                {"exp_labels": labels} for labels in fired]}]}


def rule_cases():
    healthy_coord = [series("up", COORD, "1x30"), series("motor:active_prefill_workers", COORD, "2x30"),
                     series("motor:active_decode_workers", COORD, "1x30")]
    load = [series("vllm:num_requests_running", P0, "9x30"), series("vllm:num_requests_waiting", P0, "0x30"),
            series("vllm:num_requests_running", P1, "1x30"), series("vllm:num_requests_waiting", P1, "0x30")]
    even = [series("vllm:num_requests_running", P0, "5x30"), series("vllm:num_requests_waiting", P0, "0x30"),
            series("vllm:num_requests_running", P1, "4x30"), series("vllm:num_requests_waiting", P1, "0x30")]
    return [
        case("MotorCoordinatorNotReady", "10m", [series("up", COORD, "0x30")], [dict(COORD, severity="critical")]),
        case("MotorCoordinatorNotReady", "10m", [series("up", COORD, "1x30"),
                                                 series("motor:active_prefill_workers", COORD, "0x30"),
                                                 series("motor:active_decode_workers", COORD, "1x30")],
             [dict(COORD, severity="critical")]),
        case("MotorCoordinatorNotReady", "10m", healthy_coord, []),
        case("MotorEngineEndpointDown", "10m", [series("up", P0, "0x30"), series("up", P1, "1x30")],
             [dict(P0, severity="critical")]),
        case("MotorEngineEndpointDown", "10m", [series("up", P0, "1x30"), series("up", P1, "1x30")], []),
        case("MotorKVRegistrationsMissing", "10m", [series(REGISTRATIONS_METRIC, WATCHER, "3x30")],
             [dict(WATCHER, severity="warning")]),
        case("MotorKVRegistrationsMissing", "10m", [], [{"job": "job", "severity": "warning"}]),  # watcher silent
        case("MotorKVRegistrationsMissing", "10m", [series(REGISTRATIONS_METRIC, WATCHER, "4x30")], []),
        case("MotorPrefixCacheHitRatioLow", "40m", [series("vllm:prefix_cache_hits_total", P0, "0+1x60"),
                                                    series("vllm:prefix_cache_queries_total", P0, "0+10x60")],
             [{"job": "job", "severity": "warning"}]),
        case("MotorPrefixCacheHitRatioLow", "40m", [series("vllm:prefix_cache_hits_total", P0, "0+8x60"),
                                                    series("vllm:prefix_cache_queries_total", P0, "0+10x60")], []),
        case("MotorPrefixCacheHitRatioLow", "40m", [series("vllm:prefix_cache_hits_total", P0, "0x60"),
                                                    series("vllm:prefix_cache_queries_total", P0, "0x60")], []),
        case("MotorPrefillLoadImbalance", "10m", load,
             [{"job": "job", "instance": "job-p0", "severity": "warning"}]),
        case("MotorPrefillLoadImbalance", "10m", even, []),
        case("MotorContainerRestarting", "10m", [series("process_start_time_seconds", P0, "100 100 200 200 300 300 300"),
                                                 series("up", P0, "1x10")],
             [dict(P0, severity="warning")]),
        case("MotorContainerRestarting", "10m", [series("up", P0, "1 1 0 0 1 1 0 1 1 1 1"),
                                                 series("process_start_time_seconds", P1, "100x10")],
             [dict(P0, severity="warning")]),
        case("MotorContainerRestarting", "10m", [series("process_start_time_seconds", P0, "100x10"),
                                                 series("up", P0, "1x10")], []),
        case("MotorHealerBudgetSpent", "5m", [series("motor_healer_alarm", HEALER, "0 0 1 1 1 1 1")],
             [dict(HEALER, severity="critical")]),
        case("MotorHealerBudgetSpent", "5m", [series("motor_healer_alarm", HEALER, "0 1 1 0 0 0 0")], []),
        case("MotorNpuUnhealthy", "5m", [series("motor_npu_unhealthy", NPU, "1x10"),
                                         series("motor_npu_unhealthy", NPU_OK, "0x10")],
             [dict(NPU, severity="critical")]),
        case("MotorNpuUnhealthy", "5m", [series("motor_npu_unhealthy", NPU_OK, "0x10")], []),
    ]


def with_annotations(cases, rules):
    """Each expected alert gets its rule's summary and runbook with the alert's labels filled in (promtool compares
    them too: the templates must render)."""
    annotations = {r["alert"]: r["annotations"] for r in rules["groups"][0]["rules"] if "alert" in r}
    for test in cases:
        check = test["alert_rule_test"][0]
        for alert in check["exp_alerts"]:
            alert["exp_annotations"] = {
                key: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: alert["exp_labels"].get(m.group(1), ""), text)
                for key, text in annotations[check["alertname"]].items()}
    return cases


def test_promtool_test_rules_fire_and_stay_silent(tmp_path, promtool_bin):
    plan = affinity_plan()
    write_files(plan, tmp_path)
    cases = with_annotations(rule_cases(), alert_rules(plan))
    fired = {c["alert_rule_test"][0]["alertname"] for c in cases if c["alert_rule_test"][0]["exp_alerts"]}
    silent = {c["alert_rule_test"][0]["alertname"] for c in cases if not c["alert_rule_test"][0]["exp_alerts"]}
    alerts = {r["alert"] for r in alert_rules(plan)["groups"][0]["rules"] if "alert" in r}
    assert fired == silent == alerts  # every alert both ways
    test_file = tmp_path / "rules_test.yml"
    test_file.write_text(json.dumps({"rule_files": [str(tmp_path / "rules" / "job.rules.yml")],
                                     "evaluation_interval": "1m", "tests": cases}, indent=1), encoding="utf-8")
    result = promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_test_rules_catches_a_wrong_expectation(tmp_path, promtool_bin):
    """The harness is not vacuous: a silent case expected to fire fails promtool."""
    write_files(affinity_plan(), tmp_path)
    wrong = with_annotations([case("MotorEngineEndpointDown", "10m", [series("up", P0, "1x30")],
                                   [dict(P0, severity="critical")])], alert_rules(affinity_plan()))[0]
    test_file = tmp_path / "wrong_test.yml"
    test_file.write_text(json.dumps({"rule_files": [str(tmp_path / "rules" / "job.rules.yml")],
                                     "evaluation_interval": "1m", "tests": [wrong]}), encoding="utf-8")
    assert promtool("test", "rules", str(test_file)).returncode != 0


def test_rules_and_prometheus_config_are_block_yaml_people_read():
    files = {Path(f["path"]).parent.name: f["text"] for f in monitoring_files(affinity_plan(), "/srv/mon")}
    for name in ("rules", "prometheus"):
        text = files[name]
        assert text.startswith("---\n") and "{" not in text.splitlines()[1], text[:200]  # block style, not JSON
        assert yaml.safe_load(text)
    rules = files["rules"]
    assert "groups:\n- name: " in rules and "\n  rules:\n  - " in rules and "\n  - alert: " in rules, rules[:300]
    # no value wrapped onto a line of its own: every line is a key (or list item) with its whole value
    assert all(re.match(r"^ *(- )?[A-Za-z_]+:( |$)", line) for line in rules.splitlines()[1:]), rules
    assert "scrape_configs:\n- job_name: " in files["prometheus"], files["prometheus"][:300]


# --------------------------------------------------------------------------------------------------
# master/standby (docs/ha.md): each replica host's HAProxy exporter, the etcd members' scrape job, MotorNoMaster and
# MotorEtcdMemberDown

def standby_plan():
    spec = importlib.util.spec_from_file_location("standby_helpers", Path(__file__).with_name("test_standby_plan.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    return build_plan(helpers.standby_config(), helpers.standby_hosts(control=3))


ETCD_TLS = {"ca_file": "/etc/prometheus/etcd/ca.crt", "cert_file": "/etc/prometheus/etcd/client.crt",
            "key_file": "/etc/prometheus/etcd/client.key"}
HAPROXY = {"job": "job", "role": "haproxy", "instance": "job-haproxy", "pod": "job-haproxy", "host": "c1"}
HAPROXY2 = dict(HAPROXY, host="c2")
ETCD1 = {"job": "job", "role": "etcd", "instance": "c1", "host": "c1"}
ETCD2 = dict(ETCD1, instance="c2", host="c2")


def test_master_standby_adds_haproxy_targets_the_etcd_scrape_job_and_its_alerts():
    plan = standby_plan()
    haproxy = [g for g in metrics_targets(plan) if g["labels"]["role"] == "haproxy"]
    replica_hosts = {(r["host"], r["ip"]) for rs in plan["standby"]["replicas"].values() for r in rs}
    assert sorted((g["labels"]["host"], g["targets"][0]) for g in haproxy) == sorted(
        (host, "%s:%d" % (ip, HAPROXY_METRICS_PORT)) for host, ip in replica_hosts)
    files = {Path(f["path"]).parent.name: yaml.safe_load(f["text"])
             for f in monitoring_files(plan, "/srv/mon", ha={"etcd_tls": ETCD_TLS})}
    main, etcd = files["prometheus"]["scrape_configs"]
    assert main["job_name"] == "pymotor-job" and etcd["job_name"] == "pymotor-job-etcd"
    assert etcd["scheme"] == "https" and etcd["tls_config"] == ETCD_TLS
    controls = sorted(h for h, v in plan["hosts"].items() if v["control"])
    assert sorted(s["labels"]["host"] for s in etcd["static_configs"]) == controls  # default: the control hosts
    assert all(s["targets"][0].endswith(":2379") for s in etcd["static_configs"])
    names = [r.get("alert") for r in alert_rules(plan)["groups"][0]["rules"] if "alert" in r]
    assert "MotorNoMaster" in names and "MotorEtcdMemberDown" in names
    # members named (motor_etcd_members) and plain http: the scrape follows, no tls_config
    files = {Path(f["path"]).parent.name: yaml.safe_load(f["text"])
             for f in monitoring_files(plan, "/srv/mon",
                                       ha={"etcd_members": ["c1"], "etcd_scheme": "http", "etcd_port": 12379})}
    etcd = files["prometheus"]["scrape_configs"][1]
    assert etcd["scheme"] == "http" and "tls_config" not in etcd
    assert [s["targets"] for s in etcd["static_configs"]] == [["%s:12379" % plan["hosts"]["c1"]["ip"]]]


def test_without_master_standby_no_haproxy_no_etcd_and_no_such_alert():
    plan = affinity_plan()
    assert not [g for g in metrics_targets(plan) if g["labels"]["role"] == "haproxy"]
    files = {Path(f["path"]).parent.name: yaml.safe_load(f["text"])
             for f in monitoring_files(plan, "/srv/mon", ha={"etcd_tls": ETCD_TLS})}
    assert len(files["prometheus"]["scrape_configs"]) == 1
    names = [r.get("alert") for r in alert_rules(plan)["groups"][0]["rules"] if "alert" in r]
    assert "MotorNoMaster" not in names and "MotorEtcdMemberDown" not in names


def ha_rule_cases():
    def active(labels, proxy, values):
        return series("haproxy_backend_active_servers", dict(labels, proxy=proxy), values)

    healthy = [series("up", HAPROXY, "1x30"), series("up", HAPROXY2, "1x30"),
               active(HAPROXY, "controller_api", "1x30"), active(HAPROXY2, "controller_api", "1x30"),
               active(HAPROXY, "coordinator_mgmt", "1x30"), active(HAPROXY2, "coordinator_mgmt", "1x30")]
    no_coordinator = healthy[:4] + [active(HAPROXY, "coordinator_mgmt", "1 1 0x28"),
                                    active(HAPROXY2, "coordinator_mgmt", "1 1 0x28")]
    failover = healthy[:4] + [active(HAPROXY, "coordinator_mgmt", "1 1 1 1 1 0 1x24"),  # 1 min without: no alert
                              active(HAPROXY2, "coordinator_mgmt", "1 1 1 1 1 0 1x24")]
    return [
        case("MotorNoMaster", "10m", no_coordinator,
             [{"job": "job", "proxy": "coordinator_mgmt", "severity": "critical"}]),
        case("MotorNoMaster", "10m", [series("up", HAPROXY, "0x30"), series("up", HAPROXY2, "0x30")],
             [{"job": "job", "severity": "critical"}]),
        case("MotorNoMaster", "10m", healthy, []),
        case("MotorNoMaster", "6m", failover, []),
        case("MotorEtcdMemberDown", "10m", [series("up", ETCD1, "1x30"), series("up", ETCD2, "0x30")],
             [dict(ETCD2, severity="critical")]),
        case("MotorEtcdMemberDown", "10m", [series("up", ETCD1, "1x30"), series("etcd_server_has_leader", ETCD1, "0x30")],
             [dict(ETCD1, severity="critical")]),
        case("MotorEtcdMemberDown", "10m", [series("up", ETCD1, "1x30"), series("etcd_server_has_leader", ETCD1, "1x30"),
                                            series("up", ETCD2, "1x30")], []),
    ]


def test_promtool_checks_and_tests_the_master_standby_rules(tmp_path, promtool_bin):
    plan = standby_plan()
    tls = {key: str(tmp_path / Path(path).name) for key, path in ETCD_TLS.items()}  # promtool checks they exist
    for path in tls.values():
        Path(path).write_text("", encoding="utf-8")
    for f in monitoring_files(plan, str(tmp_path), ha={"etcd_tls": tls}):
        Path(f["path"]).parent.mkdir(parents=True, exist_ok=True)
        Path(f["path"]).write_text(f["text"], encoding="utf-8")
    for args in (("check", "config", str(tmp_path / "prometheus" / "job.yml")),
                 ("check", "rules", str(tmp_path / "rules" / "job.rules.yml"))):
        result = promtool(*args)
        assert result.returncode == 0, result.stdout + result.stderr
    cases = with_annotations(ha_rule_cases(), alert_rules(plan))
    test_file = tmp_path / "ha_rules_test.yml"
    test_file.write_text(json.dumps({"rule_files": [str(tmp_path / "rules" / "job.rules.yml")],
                                     "evaluation_interval": "1m", "tests": cases}, indent=1), encoding="utf-8")
    result = promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr
