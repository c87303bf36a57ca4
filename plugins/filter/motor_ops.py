# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filter shims of the day-2 verbs (logic in plugin_utils/operations/).

One documentation file per filter: plugins/filter/<filter name>.yml (ansible-doc -t filter pymotor.ascend.<name>).
Only what roles and playbooks of your own use is a filter; the helpers behind them stay in plugin_utils."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.ha_status import ha_reads, ha_status, ha_table, host_read, readiness_url
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import (
    expected_kv_endpoints,
    kv_endpoint_urls,
    kv_format_verdict,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.monitoring import monitoring_files
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import mask_document, mask_secrets, mask_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import probe_args, service_targets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.status import conductor_url, status_rows, status_table
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.verify import http_results, verify_report, verify_table


def motor_ops(plan, raw, min_affinity=1.0):
    """Judge the verify observations against the plan."""
    if not isinstance(plan, dict) or "containers" not in plan:
        raise AnsibleFilterError("motor_ops: expects the output of pymotor.ascend.motor_plan")
    return verify_report(plan, raw or {}, float(min_affinity))


motor_ops_verify_table = verify_table  # Render a verify report as text.
motor_ops_status_rows = status_rows  # Status rows from docker inspect results per host.
motor_ops_status_table = status_table  # Render status rows (and the conductor's registrations) as text.
motor_ops_status_conductor = conductor_url  # The KV conductor's URL from the status rows.
motor_ops_mask = mask_secrets  # Mask the secrets of a structure.
motor_ops_mask_text = mask_text  # Mask the secrets of free text.
motor_ops_mask_document = mask_document  # Mask the secrets of a JSON document (or free text).
motor_ops_kv_verdict = kv_format_verdict  # Can the conductor read the engine's KV events.
motor_ops_http = http_results  # A uri loop's results as {container or container/dp_rank: {status, json}}.


def motor_ops_kv_endpoints(plan, containers=None):
    """The KV-event endpoints of every publishing DP rank of the plan (only of the named containers if given)."""
    if containers is None:
        return kv_endpoint_urls(plan)
    return [url for e in expected_kv_endpoints(plan) if e["container"] in containers for url in e["of"]]


motor_ops_targets = service_targets  # Every URL of the job with its TLS settings.
motor_ops_probe_args = probe_args  # The arguments of the affinity probe.
motor_ops_monitoring = monitoring_files  # The Prometheus targets, rules, config and Grafana dashboard of a job.
motor_ops_ha_reads = ha_reads  # What status.yml reads of master/standby on one host (replica probes, etcd member).
motor_ops_readiness_url = readiness_url  # A replica's own /readiness URL from its health check's target file.


def motor_ops_ha_status(per_host):
    """The master/standby status (replica roles, VIP holder, etcd members) and its table text, from each host's raw
    reads (``ha_status.host_read``'s arguments)."""
    status = ha_status({host: host_read(**(read or {})) for host, read in (per_host or {}).items()})
    return dict(status, text=ha_table(status))


class FilterModule:
    """The pymotor.ascend.motor_ops filters."""

    def filters(self):
        """Return the filters of this plugin."""
        return {
            "motor_ops": motor_ops,
            "motor_ops_verify_table": motor_ops_verify_table,
            "motor_ops_status_rows": motor_ops_status_rows,
            "motor_ops_status_table": motor_ops_status_table,
            "motor_ops_status_conductor": motor_ops_status_conductor,
            "motor_ops_mask": motor_ops_mask,
            "motor_ops_mask_text": motor_ops_mask_text,
            "motor_ops_mask_document": motor_ops_mask_document,
            "motor_ops_kv_verdict": motor_ops_kv_verdict,
            "motor_ops_http": motor_ops_http,
            "motor_ops_kv_endpoints": motor_ops_kv_endpoints,
            "motor_ops_targets": motor_ops_targets,
            "motor_ops_probe_args": motor_ops_probe_args,
            "motor_ops_monitoring": motor_ops_monitoring,
            "motor_ops_ha_reads": motor_ops_ha_reads,
            "motor_ops_readiness_url": motor_ops_readiness_url,
            "motor_ops_ha_status": motor_ops_ha_status,
        }
