# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A rolled engine instance leaves the coordinator's routing before its pods stop (reconcile/roll_drain.py,
roles/motor_service/tasks/roll_drain.yml): upstream's "del" event, the id read from the coordinator's
/metrics?type=dp. The event is checked against upstream's models in ../shared/upstream (those tests skip when
absent)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import yaml
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile import roll_drain
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import reconcile
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import spec_digest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers of the neighbouring tests (importlib mode)

from test_motor_reconcile import deployed  # noqa: E402
from test_roll_separation import PYMOTOR, REPO, line, needs_upstream  # noqa: E402

SEED = REPO / "examples" / "seed_pd_separation"
HOSTS = {
    "h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "h2": {"motor_host_ip": "10.0.0.2", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]},
}
TASKS = REPO / "roles" / "motor_service" / "tasks"


def make_plan(p=2, d=2, mutate=None):
    user = json.loads((SEED / "user_config.json").read_text())
    user["motor_deploy_config"].update(p_instances_num=p, d_instances_num=d)
    if mutate:
        mutate(user)
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


def rolling(plan):
    """(rolling entry as diff.reconcile gives it: job_name, role, containers; its plan containers) per instance."""
    by_job = {}
    for c in plan["containers"]:
        if c["tier"] == 2:
            by_job.setdefault(c["job_name"], []).append(c)
    return [({"job_name": job, "role": members[0]["role"],
              "containers": [{"name": c["name"], "host": c["host"]} for c in members]}, members)
            for job, members in by_job.items()]


def dp_metrics_of(plan, ids, roles=("prefill", "decode")):
    """The coordinator's GET /metrics?type=dp with instance ``ids`` (job -> id), as upstream's collector writes it
    (metrics_collector.py _generate_dp_metrics: dp_rank, role, instance_id, pod_ip before the engine's labels)."""
    lines = ["# HELP vllm:num_requests_running Number of requests.", "# TYPE vllm:num_requests_running gauge"]
    for c in plan["containers"]:
        if c["role"] in roles and c["job_name"] in ids:
            for ep in c["endpoints"]:
                lines.append('vllm:num_requests_running{dp_rank="%d",role="%s",instance_id="%d",pod_ip="%s",'
                             'model_name="m"} 0.0' % (ep["dp_rank"], c["role"], ids[c["job_name"]], c["ip"]))
    return "\n".join(lines) + "\n"


def test_a_prefill_instance_with_another_one_serving_drains_with_a_del_to_the_coordinators_management_port():
    plan = make_plan()
    (inst, members), = [(i, m) for i, m in rolling(plan) if i["role"] == "prefill"][:1]
    drain = roll_drain.roll_drain(plan, inst, members)
    assert drain["how"] == "del"
    # motor_wait read targets: the controller's one client (roll_drain.yml)
    coordinator = plan["coordinator"]
    assert drain["refresh"] == {"url": "http://%s:%s/instances/refresh" % (coordinator["ip"], coordinator["mgmt_port"]),
                                "tls": None}
    assert drain["routes"] == {"url": "http://%s:%s/metrics?type=dp" % (coordinator["ip"], coordinator["obs_port"]),
                               "tls": None, "text": True}
    assert drain["ips"] == sorted({c["ip"] for c in members}) and drain["role"] == "prefill"
    assert drain["instance"] == {"job_name": inst["job_name"], "role": "prefill",
                                 "model_name": plan["containers"][0]["user_config"]["motor_engine_prefill_config"]
                                 ["engine_config"]["served_model_name"]}
    assert "tls" not in drain and drain["grace_s"] == roll_drain.DRAIN_GRACE_S


def test_the_event_carries_the_id_the_coordinator_lists_at_the_instances_own_hosts_for_every_role():
    plan = make_plan()
    ids = {inst["job_name"]: n for n, (inst, _members) in zip((7, 9, 11, 12), rolling(plan))}
    for inst, members in rolling(plan):
        event = roll_drain.drain_event(roll_drain.roll_drain(plan, inst, members), dp_metrics_of(plan, ids))
        model = event["instances"][0]["model_name"]
        assert event == {"event": "del", "instances": [{"job_name": inst["job_name"], "role": inst["role"],
                                                        "id": ids[inst["job_name"]], "model_name": model}]}
        assert model


def test_no_event_when_the_coordinator_lists_nothing_of_the_instance_or_more_than_one_id():
    plan = make_plan()
    (inst, members), (other, _other_members) = [(i, m) for i, m in rolling(plan) if i["role"] == "decode"]
    drain = roll_drain.roll_drain(plan, inst, members)
    assert roll_drain.drain_event(drain, "") == {}
    assert roll_drain.drain_event(drain, "garbage\nx{instance_id=\"a\"} 1\n") == {}
    assert roll_drain.drain_event(drain, dp_metrics_of(plan, {other["job_name"]: 2})) == {}
    stale = dp_metrics_of(plan, {inst["job_name"]: 5})
    assert roll_drain.drain_event(drain, dp_metrics_of(plan, {inst["job_name"]: 1}) + stale) == {}  # two ids: none
    assert roll_drain.drain_ids(drain, dp_metrics_of(plan, {inst["job_name"]: 1}) + stale) == [1, 5]
    # a prefill id at the decode instance's host is not its id
    assert roll_drain.drain_ids(drain, dp_metrics_of(plan, {inst["job_name"]: 4}, roles=("prefill",))) == []


def test_a_single_instance_of_its_role_and_a_plan_without_observability_port_keep_the_bounded_wait():
    single = make_plan(p=1, d=2)
    inst, members = next((i, m) for i, m in rolling(single) if i["role"] == "prefill")
    drain = roll_drain.roll_drain(single, inst, members)
    assert drain["how"] == "none" and "only prefill instance" in drain["why"]
    plan = make_plan()
    blind = dict(plan, coordinator=dict(plan["coordinator"], obs_port=None))
    inst, members = next((i, m) for i, m in rolling(blind) if i["role"] == "decode")
    drain = roll_drain.roll_drain(blind, inst, members)
    assert drain["how"] == "none" and "observability port" in drain["why"]


def test_with_mgmt_tls_the_del_goes_over_https_with_the_ca_client_certificate_and_key_password():
    def tls(user):
        user["motor_deploy_config"]["tls_config"] = {"mgmt_tls_config": {
            "enable_tls": True, "ca_file": "/c/ca.pem", "cert_file": "/c/cert.pem", "key_file": "/c/key.pem",
            "passwd_file": "/c/key_pwd.txt"}}
    plan = make_plan(mutate=tls)
    inst, members = next((i, m) for i, m in rolling(plan) if i["role"] == "prefill")
    drain = roll_drain.roll_drain(plan, inst, members)
    assert drain["refresh"]["url"].startswith("https://")
    # motor_wait's target TLS options: an encrypted key opens with its passwd_file (ansible.builtin.uri could not)
    assert drain["refresh"]["tls"] == {"ca_file": "/c/ca.pem", "cert_file": "/c/cert.pem", "key_file": "/c/key.pem",
                                       "passwd_file": "/c/key_pwd.txt", "check_hostname": True}
    # upstream's observability port serves plain http whatever tls_config says (observability_server.py:126-135)
    assert drain["routes"]["url"].startswith("http://") and drain["routes"]["tls"] is None


def test_each_instance_of_a_reconciled_prefill_roll_drains():
    def labels(plan):
        return {c["name"]: {"image": "sha256:img", "spec": spec_digest(c), "shared": "s1"} for c in plan["containers"]}
    plan = make_plan()
    changed = make_plan(mutate=lambda u: u["motor_engine_prefill_config"]["engine_config"].update(max_num_seqs=17))
    result = reconcile(changed, labels(changed), deployed(plan, labels(plan)))
    assert [i["role"] for i in result["rolling"]] == ["prefill", "prefill"]
    by_name = {c["name"]: c for c in changed["containers"]}
    for inst in result["rolling"]:
        members = [by_name[m["name"]] for m in inst["containers"]]
        assert roll_drain.roll_drain(changed, inst, members)["how"] == "del"


def _required_fields(path: str, cls: str) -> set:
    """The fields of pydantic model ``cls`` in ``path`` declared ``Field(...)`` (required)."""
    tree = ast.parse((PYMOTOR / path).read_text(encoding="utf-8"))
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    out = set()
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.value, ast.Call) and item.value.args:
            if isinstance(item.value.args[0], ast.Constant) and item.value.args[0].value is Ellipsis:
                out.add(item.target.id)
    return out


@needs_upstream
def test_the_event_has_exactly_what_upstreams_ins_event_msg_and_instance_require():
    plan = make_plan()
    inst, members = next((i, m) for i, m in rolling(plan) if i["role"] == "prefill")
    event = roll_drain.drain_event(roll_drain.roll_drain(plan, inst, members),
                                   dp_metrics_of(plan, {i["job_name"]: n for n, (i, _members) in enumerate(rolling(plan))}))
    assert set(event) == _required_fields("motor/common/resources/http_msg_spec.py", "InsEventMsg")
    assert set(event["instances"][0]) == _required_fields("motor/common/resources/instance.py", "Instance")
    assert 'DEL = "del"' in line("motor/common/resources/http_msg_spec.py", 125)
    assert isinstance(event["instances"][0]["id"], int)


@needs_upstream
def test_the_cited_upstream_lines_say_what_roll_drain_claims():
    assert '"/instances/refresh"' in line("motor/coordinator/api_server/management_server.py", 276)
    assert "InsEventMsg(**body)" in line("motor/coordinator/api_server/management_server.py", 351)
    assert "EventType.DEL" in line("motor/coordinator/domain/instance_manager.py", 300)
    assert "_delete_instances" in line("motor/coordinator/domain/instance_manager.py", 301)
    assert "_unavailable_pool" in line("motor/coordinator/domain/instance_manager.py", 338)
    assert 'dp_rank="{ep_id}",role="{role}",instance_id="{instance_id}",pod_ip="{pod_ip}"' in line(
        "motor/coordinator/metrics/metrics_collector.py", 769)
    assert '"pod_ip": en_info.ip' in line("motor/coordinator/metrics/metrics_collector.py", 605)
    assert "for ins_info in available_instances.values()" in line("motor/coordinator/metrics/metrics_collector.py", 573)
    assert "reuse_time: int = 3" in line("motor/config/coordinator.py", 155)
    assert "id=self.ins_id_cnt" in line("motor/controller/core/instance_assembler.py", 306)
    assert "self.ins_id_cnt += 1" in line("motor/controller/core/instance_assembler.py", 317)
    assert "EventType.SET" in line("motor/controller/core/event_pusher.py", 217)
    assert "status_code=410" in line("motor/coordinator/api_server/observability_server.py", 119)
    assert '"ID": instance.job_name' in line("motor/controller/observability/inventory/inventory_collector.py", 94)


def test_roll_instance_drains_before_the_stop_and_only_outside_check_mode():
    tasks = yaml.safe_load((TASKS / "roll_instance.yml").read_text())
    names = [t["name"] for t in tasks]
    drain = next(i for i, t in enumerate(tasks) if t.get("ansible.builtin.include_tasks") == "roll_drain.yml")
    assert drain < next(i for i, n in enumerate(names) if n.startswith("Stop the pods"))
    assert "not ansible_check_mode" in tasks[drain]["when"] and "'del'" not in tasks[drain]["when"]
    steps = yaml.safe_load((TASKS / "roll_drain.yml").read_text())
    # both requests go through motor_wait's reads (the del a POST: the target has a body): the controller's one
    # client, which takes the controller's TLS files and reads passwd_file; no ansible.builtin.uri
    assert not [t["name"] for t in steps if "ansible.builtin.uri" in t]
    reads = [t for t in steps if (t.get("pymotor.ascend.motor_wait") or {}).get("reads")]
    assert [list(t["pymotor.ascend.motor_wait"]["reads"]["drain"]) for t in reads] == [["routes"], ["refresh"]]
    assert reads[0]["pymotor.ascend.motor_wait"]["reads"]["drain"]["routes"] == "{{ motor_service_instance.drain.routes }}"
    post = reads[1]
    refresh = post["pymotor.ascend.motor_wait"]["reads"]["drain"]["refresh"]
    assert "drain.refresh | combine({'body': motor_service_roll_event})" in refresh
    assert "motor_reconcile_drain_event" in post["vars"]["motor_service_roll_event"]
    assert "answers.drain.routes.text" in post["vars"]["motor_service_roll_event"]
    assert "answers" in tasks[drain]["vars"]["motor_service_roll_refresh"]  # the coordinator's answer, read after
    assert any("drain.grace_s" in str((t.get("ansible.builtin.pause") or {}).get("seconds")) for t in steps)


def test_a_drained_instance_waits_until_its_engines_hold_no_request_bounded_by_the_drain_timeout():
    from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import condition_met  # noqa: PLC0415
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import idle_checks  # noqa: PLC0415

    plan = make_plan()
    instance, members = rolling(plan)[0]
    context = roll_drain.drain_context(plan)
    checks = idle_checks(plan, context["targets"], members, 300)
    assert len(checks) == sum(len(c["endpoints"]) for c in members) > 0
    assert all(c["until"] == "idle" and c["url"].endswith("/metrics") and c["timeout"] == 300 for c in checks)
    assert {c["url"].rsplit("/", 1)[0] for c in checks} == {
        t["url"].rsplit("/", 1)[0] for key, t in context["targets"]["engines"].items()
        if key.rsplit("/", 1)[0] in {m["name"] for m in members}}  # the engines' management ports
    busy = ('vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0\n')
    assert not condition_met("idle", 200, None, None, busy)
    assert condition_met("idle", 200, None, None, busy.replace("} 1.0", "} 0.0"))
    assert not condition_met("idle", 200, None, None, "other 0\n")  # no gauges: not known to be idle
    assert not condition_met("idle", -1, None, None, "")
    steps = yaml.safe_load((TASKS / "roll_drain.yml").read_text())
    waits = [(t.get("pymotor.ascend.motor_wait") or {}).get("checks") for t in steps]
    idle = next(i for i, checks in enumerate(waits) if "drain.idle" in str(checks))
    assert steps[idle]["failed_when"] is False
    post = next(i for i, t in enumerate(steps) if "refresh" in str((t.get("pymotor.ascend.motor_wait") or {}).get("reads")))
    assert post < idle  # after the del; roll_instance.yml stops the pods after roll_drain.yml


def test_the_engines_request_gauges_are_read_where_upstreams_coordinator_reads_them():
    assert "query_metrics(f\"{en_info.ip}:{en_info.mgmt_port}\")" in line(
        "motor/coordinator/metrics/metrics_collector.py", 600)
    assert "timeout=2" in line("motor/coordinator/api_client/engine_server_api_client.py", 28)
    assert "self.ins_id_cnt = 1" in line("motor/controller/core/instance_assembler.py", 83)
    assert "max(self.ins_id_cnt, msg.instance_id + 1)" in line("motor/controller/core/instance_assembler.py", 378)
