# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""monitoring.yml: Prometheus scrape targets, alert rules and a Grafana dashboard of one job, from its plan (pure).

Where each component serves its metrics (upstream, read in shared/upstream):
- the coordinator: ``GET /metrics`` on its observability port ``coordinator_obs_port``
  (``motor/coordinator/api_server/observability_server.py:106`` and ``:127-130``); it re-exports the engines'
  vLLM metrics aggregated (``motor/coordinator/metrics/metrics_collector.py:600`` reads each engine's management
  ``/metrics``) and adds ``motor:active_prefill_workers`` / ``motor:active_decode_workers``
  (``motor/coordinator/metrics/metric_computer.py:75-87``);
- every engine endpoint (one per DP rank): ``GET /metrics`` on its management port, PyMotor's engine server
  (``motor/engine_server/core/mgmt_endpoint.py:41-55``: vLLM's multiprocess registry, so vLLM's own names:
  ``vllm:prefix_cache_queries_total``, ``vllm:prefix_cache_hits_total``, ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:time_to_first_token_seconds``, ``vllm:e2e_request_latency_seconds``,
  as upstream's registry lists them: ``motor/coordinator/metrics/metric_registry.py:87-151``, and vLLM's
  ``vllm/v1/metrics/loggers.py``); https when ``mgmt_tls_config`` is enabled (``targets.tls_settings``);
- the controller: no ``/metrics``; its observability port serves ``/observability/metrics``, a deprecated proxy of
  the coordinator's (``motor/controller/api_server/controller_api.py:174-178``, ``:478``): scraped for ``up`` only,
  the dashboard and the rules read the vLLM series of the engines and the coordinator's ``motor:`` series;
- the KV pool (Mooncake master): ``GET /metrics`` on ``--metrics_port`` (the plan's ``kv_pool.metrics_port``);
- master/standby (``plan["standby"]``, docs/ha.md): every replica host's HAProxy, its Prometheus exporter
  (``plan/vip.py`` ``METRICS_PORT``, ``haproxy_backend_active_servers{proxy=...}``: the replicas whose /readiness
  answers 200, i.e. the master); every etcd member's ``/metrics`` on its client port (etcd serves it there;
  ``etcd_server_has_leader``), a scrape job of its own because the members require a client certificate of their CA
  (``--client-cert-auth``): its ``tls_config`` names one on the Prometheus host (``ha["etcd_tls"]``);
- the KV conductor: no metrics endpoint (``mooncake-conductor/conductor-ctrl/main.go:109`` "TODO support print
  metrics for conductor"): its registrations are exported by the job's KV watcher
  (``motor_kv_conductor_registrations``, ``roles/motor_service/files/motor_kv_watcher.py``) where the plan gives it a
  metrics port.

Every target carries the labels ``job`` (the job_id), ``role``, ``instance`` (PyMotor's instance name, e.g.
``job-p0``, or the container's name for the control plane), ``pod``, ``host``, ``dp_rank`` (engines only).
"""

from __future__ import annotations

import json

import yaml

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import WATCHER_ROLE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import tls_settings
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.fields import url_host
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.vip import METRICS_PORT as HAPROXY_METRICS_PORT

ENGINE_ROLES = ("prefill", "decode", "union")
REGISTRATIONS_METRIC = "motor_kv_conductor_registrations"
# the controller's healer writes it to motor_healer.prom in the controller's log directory (plugin_utils/heal.py
# write_metrics; node_exporter's textfile collector exports it): 1 while a rule holds and its restart budget is spent
HEALER_ALARM_METRIC = "motor_healer_alarm"
# every host's healer writes it to motor_host_healer.prom in its log directory (module_utils/motor_host_healer.py,
# rule npu_unhealthy): 1 while npu-smi reports a planned NPU's health other than OK; nothing restarts for it
NPU_UNHEALTHY_METRIC = "motor_npu_unhealthy"
DEFAULTS = {
    "scrape_interval": "15s",
    "hit_ratio_min": 0.3,  # prefix-cache hit ratio of the publishing role below this ...
    "hit_ratio_window": "15m",  # ... over this window
    "load_factor": 1.5,  # one prefill instance's load above this many times the mean (at most N with N instances) ...
    "load_min": 4,  # ... and at least this many requests running + waiting
    "restarts_window": "15m",
    "restarts_max": 2,  # restarts of a target within the window before the alert
    "for": "2m",
    "no_master_for": "1m",  # a failover takes 10-30 s (docs/ha.md): longer than that is no failover
}
# the HAProxy frontends whose backends are the replicas (plan/vip.py frontends): none up is no master
MASTER_PROXIES = {"controller": "controller_api", "coordinator": "coordinator_mgmt"}


def _address(ip, port) -> str:
    return "%s:%s" % (url_host(str(ip)), port)


def _group(address, labels, path="/metrics", scheme="http") -> dict:
    # an empty label is no label to Prometheus: left out (dp_rank off the engines)
    out = {"targets": [address], "labels": {k: str(v) for k, v in labels.items() if v not in (None, "")}}
    if path != "/metrics":
        out["labels"]["__metrics_path__"] = path
    if scheme != "http":
        out["labels"]["__scheme__"] = scheme
    return out


def metrics_targets(plan: dict) -> list:
    """The Prometheus ``file_sd`` groups of the job: one target per metrics endpoint, in the plan's order."""
    job = plan.get("job_id") or ""
    mgmt = tls_settings(plan)["mgmt"]
    out = []

    def labels(c, role=None, dp_rank=None):
        instance = c.get("job_name") if c.get("tier") == 2 else c.get("name")
        return {"job": job, "role": role or c.get("role"), "instance": instance,
                "pod": c.get("name"), "host": c.get("host"), "dp_rank": dp_rank}

    for c in plan.get("containers") or []:
        role, ports = c.get("role"), c.get("port_map") or {}
        if role == "coordinator" and ports.get("obs"):
            out.append(_group(_address(c["ip"], ports["obs"]), labels(c)))
        elif role == "controller" and ports.get("obs"):
            out.append(_group(_address(c["ip"], ports["obs"]), labels(c), "/observability/metrics"))
        elif role == "kv_pool" and ports.get("metrics"):
            out.append(_group(_address(c["ip"], ports["metrics"]), labels(c)))
        elif role == WATCHER_ROLE and ports.get("metrics"):
            out.append(_group(_address(c["ip"], ports["metrics"]), labels(c, "kv_conductor")))
        elif role in ENGINE_ROLES:
            for ep in c.get("endpoints") or []:
                out.append(_group(_address(c["ip"], ep["mgmt_port"]), labels(c, dp_rank=ep["dp_rank"]),
                                  scheme="https" if mgmt else "http"))
    for host, ip in haproxy_hosts(plan):
        out.append(_group(_address(ip, HAPROXY_METRICS_PORT),
                          {"job": job, "role": "haproxy", "instance": "%s-haproxy" % job, "pod": "%s-haproxy" % job,
                           "host": host}))
    return out


def haproxy_hosts(plan: dict) -> list:
    """``[(host, ip)]`` of the hosts that run the job's HAProxy (every replica host, plan/vip.py), in order."""
    out = []
    for role in (plan.get("standby") or {}).get("roles") or []:
        for r in plan["standby"]["replicas"][role]:
            if (r["host"], r["ip"]) not in out:
                out.append((r["host"], r["ip"]))
    return out


def etcd_scrape(plan: dict, ha: dict | None, interval: str):
    """The scrape job of the etcd members (master/standby only; None without members): https on their client port,
    with the client certificate ``ha["etcd_tls"]`` (``ca_file``, ``cert_file``, ``key_file`` on the Prometheus host)
    when given; without one the members refuse the scrape and ``MotorEtcdMemberDown`` fires, which says why."""
    hosts = plan.get("hosts") or {}
    names = (ha or {}).get("etcd_members") or [h for h, v in hosts.items() if v.get("control")]
    members = [{"host": h, "ip": hosts[h]["ip"]} for h in names if h in hosts and hosts[h].get("ip")]
    if not plan.get("standby") or not members:
        return None
    job = plan.get("job_id") or ""
    port = (ha or {}).get("etcd_port") or (plan["standby"].get("etcd") or {}).get("port") or 2379
    tls = {k: v for k, v in ((ha or {}).get("etcd_tls") or {}).items() if k in ("ca_file", "cert_file", "key_file") and v}
    scrape = {"job_name": "pymotor-%s-etcd" % job, "scrape_interval": interval,
              "scheme": "https" if (ha or {}).get("etcd_scheme", "https") == "https" else "http",
              "static_configs": [{"targets": [_address(m["ip"], port)],
                                  "labels": {"job": job, "role": "etcd", "instance": m["host"], "host": m["host"]}}
                                 for m in members]}
    if tls and scrape["scheme"] == "https":
        scrape["tls_config"] = tls
    return scrape


def publishing_ranks(plan: dict) -> int:
    """How many registrations the KV conductor should hold: one per DP rank of every instance of the role that
    publishes KV events (prefill, or union in a hybrid job); 0 without KV-cache affinity."""
    role = (plan.get("kv_events") or {}).get("role")
    return sum(int(i.get("dp") or 0) for i in plan.get("instances") or [] if role and i.get("role") == role)


def _has_watcher_metrics(plan) -> bool:
    return any(c.get("role") == WATCHER_ROLE and (c.get("port_map") or {}).get("metrics")
               for c in plan.get("containers") or [])


def _rule(name, expr, duration, severity, summary, runbook) -> dict:
    return {"alert": name, "expr": expr, "for": duration, "labels": {"severity": severity},
            "annotations": {"summary": summary, "runbook": runbook}}


def alert_rules(plan: dict, settings: dict | None = None) -> dict:
    """The Prometheus rule file of the job (one group ``pymotor-<job>``): recording rules of the hit ratio and the
    prefill load, and the alerts; ``settings`` overrides ``DEFAULTS``."""
    s = dict(DEFAULTS, **(settings or {}))
    job = plan.get("job_id") or ""
    sel = 'job="%s"' % job
    publisher = (plan.get("kv_events") or {}).get("role") or ("union" if plan.get("mode") == "pd_hybrid" else "prefill")
    pub = '%s,role="%s"' % (sel, publisher)
    run = "ansible-playbook -i <inventory> playbooks/%s.yml -e motor_config_dir=<config_dir>"
    w = s["hit_ratio_window"]
    rules = [
        {"record": "motor:prefix_cache_hit_ratio:rate%s" % w,
         "expr": "sum by (job, instance) (rate(vllm:prefix_cache_hits_total{%s}[%s]))"
                 " / sum by (job, instance) (rate(vllm:prefix_cache_queries_total{%s}[%s]) > 0)" % (pub, w, pub, w)},
        {"record": "motor:prefix_cache_hit_ratio_overall:rate%s" % w,
         "expr": "sum by (job) (rate(vllm:prefix_cache_hits_total{%s}[%s]))"
                 " / sum by (job) (rate(vllm:prefix_cache_queries_total{%s}[%s]) > 0)" % (pub, w, pub, w)},
        {"record": "motor:prefill_load:sum",
         "expr": "sum by (job, instance) (vllm:num_requests_running{%s})"
                 " + sum by (job, instance) (vllm:num_requests_waiting{%s})" % (pub, pub)},
    ]
    not_ready = 'up{%s,role="coordinator"} == 0' % sel
    if plan.get("mode") != "pd_hybrid":
        not_ready += (" or motor:active_prefill_workers{%s} == 0 or motor:active_decode_workers{%s} == 0"
                      % (sel, sel))
    rules.append(_rule(
        "MotorCoordinatorNotReady", not_ready, s["for"], "critical",
        "Coordinator of job %s is down or has no prefill/decode instance to schedule to" % job,
        "Run %s; then %s (readiness wait and repair)" % (run % "status", run % "deploy")))
    if plan.get("standby"):
        proxies = "|".join(MASTER_PROXIES[role] for role in plan["standby"].get("roles") or [])
        rules.append(_rule(
            "MotorNoMaster",
            'max by (job, proxy) (haproxy_backend_active_servers{%s,role="haproxy",proxy=~"%s"}) < 1'
            ' or max by (job) (up{%s,role="haproxy"}) < 1' % (sel, proxies, sel),
            s["no_master_for"], "critical",
            "No master behind HAProxy frontend {{ $labels.proxy }} of job %s (no replica answers readiness 200), or "
            "no HAProxy of the job answers" % job,
            "Run %s (the master/standby table: each replica's role, the VIP, etcd); a lost etcd majority stops "
            "every election" % (run % "status")))
        rules.append(_rule(
            "MotorEtcdMemberDown", 'up{%s,role="etcd"} == 0 or etcd_server_has_leader{%s,role="etcd"} == 0'
            % (sel, sel), s["no_master_for"], "critical",
            "etcd member {{ $labels.host }} does not answer its /metrics or has no leader",
            "Run %s (etcd members table) and docker logs pymotor-etcd on {{ $labels.host }}; %s starts it again"
            % (run % "status", "ansible-playbook -i <inventory> playbooks/etcd.yml")))
    rules.append(_rule(
        "MotorEngineEndpointDown", 'up{%s,role=~"%s"} == 0' % (sel, "|".join(ENGINE_ROLES)), s["for"], "critical",
        "Engine endpoint {{ $labels.pod }} DP rank {{ $labels.dp_rank }} on {{ $labels.host }} is down",
        "Run %s and read the pod's log (collect_logs.yml); %s restarts what is missing" % (
            run % "status", run % "deploy")))
    expected = publishing_ranks(plan)
    if expected and _has_watcher_metrics(plan):
        rules.append(_rule(
            "MotorKVRegistrationsMissing",
            "%s{%s} < %d or absent(%s{%s})" % (REGISTRATIONS_METRIC, sel, expected, REGISTRATIONS_METRIC, sel),
            s["for"], "warning",
            "KV conductor of job %s holds fewer registrations than the %d %s DP ranks: KV-cache affinity degrades"
            % (job, expected, publisher),
            "Run %s (KV conductor registrations table); %s repairs lost registrations" % (
                run % "status", run % "deploy")))
    if plan.get("affinity"):
        rules.append(_rule(
            "MotorPrefixCacheHitRatioLow",
            "motor:prefix_cache_hit_ratio_overall:rate%s{%s} < %s" % (w, sel, s["hit_ratio_min"]), w, "warning",
            "Prefix-cache hit ratio of job %s below %s over %s" % (job, s["hit_ratio_min"], w),
            "Run %s (KV-cache affinity probe) and check the KV conductor registrations (%s)" % (
                run % "verify", run % "status")))
    load = "motor:prefill_load:sum{%s}" % sel
    rules.append(_rule(
        "MotorPrefillLoadImbalance",
        "%s > on (job) group_left () (%s * avg by (job) (%s)) and %s >= %s"
        % (load, s["load_factor"], load, load, s["load_min"]),
        s["for"], "warning",
        "%s instance {{ $labels.instance }} carries over %sx the mean load" % (publisher, s["load_factor"]),
        "Check a hot prefix pinned to one instance (%s), or scale out the %s instances (p_instances_num) and run %s"
        % (run % "verify", publisher, run % "deploy")))
    rw = s["restarts_window"]
    rules.append(_rule(
        "MotorContainerRestarting",
        "(changes(process_start_time_seconds{%s}[%s]) >= %d) or (changes(up{%s}[%s]) >= %d)"
        % (sel, rw, s["restarts_max"], sel, rw, 2 * s["restarts_max"]),
        "0m", "warning",
        "{{ $labels.pod }} ({{ $labels.role }}) on {{ $labels.host }} restarted repeatedly within %s" % rw,
        "Run %s (RESTARTS column) and %s for its log" % (run % "status", run % "collect_logs")))
    rules.append(_rule(
        "MotorHealerBudgetSpent", "%s{%s} > 0" % (HEALER_ALARM_METRIC, sel), "0m", "critical",
        "The healer of {{ $labels.container }} sees rule {{ $labels.rule }} hold but spent its restart budget: it "
        "alarms instead of restarting",
        "Read its line (docker logs {{ $labels.container }} | grep motor-healer), run %s, then %s (docs/design.md, "
        "'A budget, then alarms')" % (run % "status", run % "deploy")))
    rules.append(_rule(
        "MotorNpuUnhealthy", "%s{%s} > 0" % (NPU_UNHEALTHY_METRIC, sel), "0m", "critical",
        "npu-smi reports NPU {{ $labels.npu }} of {{ $labels.container }} on {{ $labels.host }} {{ $labels.health }}: "
        "no healer restarts anything for it",
        "Read npu-smi info -t health -i <card> on the host; repair the NPU, or leave it out with motor_npu_ids and run "
        "%s (its precheck refuses an NPU in Alarm or Critical)" % (run % "deploy")))
    return {"groups": [{"name": "pymotor-%s" % job, "rules": rules}]}


def prometheus_config(plan: dict, directory: str, settings: dict | None = None, ha: dict | None = None) -> dict:
    """A Prometheus configuration for the job, reading the files this module writes under ``directory``: a
    Prometheus of its own can run it as is; a site's Prometheus copies its ``scrape_configs`` entry."""
    s = dict(DEFAULTS, **(settings or {}))
    job = plan.get("job_id") or ""
    root = str(directory).rstrip("/")
    scrape = {"job_name": "pymotor-%s" % job, "scrape_interval": s["scrape_interval"],
              "file_sd_configs": [{"files": ["%s/targets/%s.json" % (root, job)]}]}
    mgmt = tls_settings(plan)["mgmt"]
    if mgmt:
        tls = {k: mgmt[v] for k, v in (("ca_file", "ca_file"), ("cert_file", "cert_file"), ("key_file", "key_file"))
               if mgmt.get(v)}
        scrape["tls_config"] = tls
    etcd = etcd_scrape(plan, ha, s["scrape_interval"])
    return {"global": {"scrape_interval": s["scrape_interval"], "evaluation_interval": s["scrape_interval"]},
            "rule_files": ["%s/rules/%s.rules.yml" % (root, job)], "scrape_configs": [scrape] + ([etcd] if etcd else [])}


def _panel(pid, title, exprs, y, x=0, unit="short", width=12):
    return {"id": pid, "type": "timeseries", "title": title, "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": width, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(65 + i), "expr": e, "legendFormat": legend} for i, (e, legend) in enumerate(exprs)]}


def dashboard(plan: dict, settings: dict | None = None) -> dict:
    """The Grafana dashboard of the job (JSON model, provisioned as a file): request rate, TTFT and latency
    percentiles, prefix-cache hit ratio per publishing instance and overall, conductor registrations, load per
    instance, restarts."""
    s = dict(DEFAULTS, **(settings or {}))
    job = plan.get("job_id") or ""
    sel = 'job="%s",role=~"%s"' % (job, "|".join(ENGINE_ROLES))
    w = s["hit_ratio_window"]
    lat = "histogram_quantile(%s, sum by (le) (rate(%s_bucket{%s}[5m])))"
    panels = [
        _panel(1, "Requests per second (finished, by role)",
               [("sum by (role) (rate(vllm:request_success_total{%s}[5m]))" % sel, "{{role}}")], 0, 0, "reqps"),
        _panel(2, "Time to first token", [(lat % (q, "vllm:time_to_first_token_seconds", sel), "p%d" % int(q * 100))
                                          for q in (0.5, 0.95, 0.99)], 0, 12, "s"),
        _panel(3, "End-to-end request latency", [(lat % (q, "vllm:e2e_request_latency_seconds", sel),
                                                  "p%d" % int(q * 100)) for q in (0.5, 0.95, 0.99)], 8, 0, "s"),
        _panel(4, "Prefix-cache hit ratio", [
            ('motor:prefix_cache_hit_ratio:rate%s{job="%s"}' % (w, job), "{{instance}}"),
            ('motor:prefix_cache_hit_ratio_overall:rate%s{job="%s"}' % (w, job), "overall")], 8, 12, "percentunit"),
        _panel(5, "KV conductor registrations (expected %d)" % publishing_ranks(plan),
               [('%s{job="%s"}' % (REGISTRATIONS_METRIC, job), "registered")], 16, 0),
        _panel(6, "Load per publishing instance (running + waiting)",
               [('motor:prefill_load:sum{job="%s"}' % job, "{{instance}}")], 16, 12),
        _panel(7, "Restarts (%s)" % s["restarts_window"], [
            ('changes(process_start_time_seconds{job="%s"}[%s])' % (job, s["restarts_window"]), "{{pod}}"),
            ('up{job="%s"}' % job, "up {{pod}} {{dp_rank}}")], 24, 0, width=24),
    ]
    return {"uid": ("pymotor-" + job)[:40], "title": "PyMotor job %s" % job, "tags": ["pymotor", job],
            "timezone": "utc", "schemaVersion": 39, "version": 1, "refresh": "30s",
            "time": {"from": "now-1h", "to": "now"},
            "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                     "label": "Prometheus"}]},
            "panels": panels}


def readable_yaml(data) -> str:
    """Block-style YAML in the order the document was built (Prometheus' own order of keys), no line wrapped (a PromQL
    expression stays on one line); plain Python types first (the plan's strings may be Ansible's tagged ones)."""
    plain = json.loads(json.dumps(data))
    return "---\n" + yaml.safe_dump(plain, default_flow_style=False, sort_keys=False, width=100000, allow_unicode=True)


def monitoring_files(plan: dict, directory: str, settings: dict | None = None, ha: dict | None = None) -> list:
    """Every file of the job under ``directory``: ``[{"path", "text"}]`` (targets, rules, config, dashboard). ``ha``
    (master/standby): ``etcd_members`` (host names of the plan, default its control hosts), ``etcd_port``,
    ``etcd_scheme`` (``https`` unless ``http``), ``etcd_tls``."""
    job = plan.get("job_id") or ""
    root = str(directory).rstrip("/")

    def dump(data):
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    # the rule and config files are YAML people read and edit, in Prometheus' own layout
    return [{"path": "%s/targets/%s.json" % (root, job), "text": dump(metrics_targets(plan))},
            {"path": "%s/rules/%s.rules.yml" % (root, job), "text": readable_yaml(alert_rules(plan, settings))},
            {"path": "%s/prometheus/%s.yml" % (root, job),
             "text": readable_yaml(prometheus_config(plan, root, settings, ha))},
            {"path": "%s/dashboards/%s.json" % (root, job), "text": dump(dashboard(plan, settings))}]
