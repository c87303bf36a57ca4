# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The RETURN sample of every public filter is real output: each filter is run on the seed PD-separation config
planned on the example inventory (the plan `make demo` and the README show) and the sample must be part of what
it returns (mappings: the keys shown, with equal values; lists: the first items; text: the lines shown, in order)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml
from ansible.parsing.plugin_docs import read_docstring

from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTAINER_LABEL, HASH_LABEL, PARTS_LABEL, PLACEMENT_LABEL, PORTS_LABEL
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import kv_endpoint_urls
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.degraded import container_needs
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import container_hashes, spec_digest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import placement_label
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.roll_drain import roll_drain
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import own_files

REPO = Path(__file__).resolve().parents[2]
FILTER_DIR = REPO / "plugins" / "filter"
SEED = REPO / "examples" / "seed_pd_separation"


def filters() -> dict:
    found = {}
    for path in sorted(FILTER_DIR.glob("*.py")):
        found.update(importlib.import_module(f"ansible_collections.pymotor.ascend.plugins.filter.{path.stem}")
                     .FilterModule().filters())
    return found


FILTERS = filters()


def return_sample(name: str):
    """The RETURN sample ansible-doc shows: from <name>.yml next to the filter, else from <name>.py."""
    yml = FILTER_DIR / f"{name}.yml"
    if yml.is_file():
        returns = yaml.safe_load(yml.read_text())["RETURN"]
    else:
        returns = read_docstring(str(FILTER_DIR / f"{name}.py"))["returndocs"]
    return returns["_value"]["sample"]


def inventory_hosts() -> dict:
    """The example inventory as plan.yml hands it to the planner: host variables and group_names, in order."""
    groups = yaml.safe_load((REPO / "inventories" / "example" / "hosts.yml").read_text())["all"]["children"]
    hosts = {}
    for group, body in groups.items():
        for host, variables in body["hosts"].items():
            hosts.setdefault(host, {**variables, "group_names": []})["group_names"].append(group)
    return hosts


def seed(p_instances=1):
    user = json.loads((SEED / "user_config.json").read_text())
    user["motor_deploy_config"]["p_instances_num"] = p_instances
    env = json.loads((SEED / "env.json").read_text())
    return user, env


def seed_with_secret():
    """The seed with a secret-looking key to mask (not a key PyMotor reads: validation would refuse it)."""
    user, env = seed()
    user["motor_controller_config"] = {**user.get("motor_controller_config", {}), "api_key": "sk-not-a-real-key"}
    return user, env


def gen_cert_seed():
    """The seed with PyMotor's boot-time certificate generation on (env.json motor_common_env)."""
    user, env = seed()
    env["motor_common_env"] = dict(env["motor_common_env"], ENABLE_GEN_CERT="true")
    return user, env


def plan_of(p_instances=1):
    user, env = seed(p_instances)
    return build_plan(FILTERS["motor_config"](user, env), inventory_hosts())


def standby_plan():
    """The seed with master/standby on the example inventory plus a second control host and motor_vip."""
    user, env = seed()
    for section in ("motor_controller_config", "motor_coordinator_config"):
        user.setdefault(section, {})["standby_config"] = {"enable_master_standby": True}
    hosts = inventory_hosts()
    first = next(name for name, variables in hosts.items() if "motor_control_hosts" in variables["group_names"])
    hosts["ctl-02"] = {**hosts[first], "ansible_host": "192.0.2.22", "motor_host_ip": "192.0.2.22"}
    for variables in hosts.values():
        if "motor_control_hosts" in variables["group_names"]:
            variables["motor_vip"] = "192.0.2.100"
    return build_plan(FILTERS["motor_config"](user, env), hosts), first


def healthy_observations(plan):
    """What verify.yml observes on a healthy deployment of ``plan``: every probe answers as it should."""
    engines = [c for c in plan["containers"] if c.get("endpoints")]
    endpoints = kv_endpoint_urls(plan)
    return {
        "image_ids": {c["host"]: "sha256:4f1c" for c in plan["containers"]},
        "containers": {c["name"]: {"exists": True, "running": True, "status": "running", "image": "sha256:4f1c",
                                   "restarts": 0} for c in plan["containers"]},
        "controller": {"status": 200}, "coordinator": {"status": 200, "json": {"ready": True}},
        "node_managers": {c["name"]: {"status": 200, "json": {"status": True}} for c in engines},
        "engines": {f"{c['name']}/{e['dp_rank']}": {"status": 200, "json": {"status": "normal"}}
                    for c in engines for e in c["endpoints"]},
        "services": {"services": [{"Endpoint": e} for e in endpoints]},
        "inference": {"status": 200},
        "probe": {"endpoints": {e: {"block_stored": 3, "decode_errors": 0} for e in endpoints},
                  "unrelated": [{"status": 200}] * 2, "shapes": ["array"],
                  "tokens": {"source": "tokenize", "detail": ""}, "metrics_before": {},
                  "prefixes": [{"name": "prefix-0", "prompt_tokens": 1100,
                                "steps": [{"query": {"status": 200, "json": {"default": {"vllm-prefill-1": {
                                    "longest_matched": 0, "DP": {}}}}}}]
                                + [{"status": 200, "query": {"status": 200, "json": {"default": {"vllm-prefill-1": {
                                    "longest_matched": 1024, "DP": {"1": 1024}}}}}, "metrics": {}}] * 4}]},
        "kv_format": FILTERS["motor_ops_kv_verdict"]("0.11.0", ["array"]),
    }


def listed_by_docker(plan, parts):
    """What Docker lists per host after a deploy of ``plan`` with ``parts``."""
    hashes, labels = container_hashes(plan, parts)
    out = {}
    for c in plan["containers"]:
        out.setdefault(c["host"], []).append({
            "Names": ["/" + c["name"]], "State": "running",
            "Labels": {CONTAINER_LABEL: c["name"], "io.pymotor.role": c["role"], HASH_LABEL: hashes[c["name"]],
                       PARTS_LABEL: labels[c["name"]], PLACEMENT_LABEL: placement_label(c),
                       PORTS_LABEL: ",".join(str(p) for p in c["ports"])}})
    return out


def parts_of(plan):
    return {c["name"]: {"image": "sha256:4f1c", "spec": spec_digest(c), "shared": "s1"} for c in plan["containers"]}


def scale_in():
    """Two prefill instances deployed, one planned: the reconcile result that drains mindie-motor-p1-0."""
    before, after = plan_of(2), plan_of(1)
    return after, FILTERS["motor_reconcile"](after, parts_of(after), listed_by_docker(before, parts_of(before)))


def conductor_services(result):
    """The conductor's GET /services while the drained instance is still registered (as vllm-prefill-1)."""
    before = plan_of(2)
    drained = next(c for c in before["containers"] if c["name"] == result["drain"][0]["container"])
    return [{"Endpoint": f"tcp://{drained['ip']}:{before['kv_events']['endpoint_port'] + rank}",
             "InstanceID": "vllm-prefill-1", "TenantID": "default", "DPRank": rank} for rank in drained["dp_ranks"]]


def go_sum_mismatch(where=Path("/tmp/pymotor-go-sum-sample")):
    """A proxy whose go.mod differs from its go.sum pin, at the fixed path the sample names."""
    module = where / "example.com/m/@v"
    module.mkdir(parents=True, exist_ok=True)
    (module / "v1.0.0.mod").write_text("module example.com/m\n")
    (where / "go.sum").write_text("example.com/m v1.0.0/go.mod h1:c3RhbGU=\n")
    return FILTERS["motor_go_sum_problems"](str(where), str(where / "go.sum"))


def drain_event_output():
    """The "del" of the first prefill instance of 2 rolling, while the coordinator routes it as instance 3."""
    plan = plan_of(2)
    first = next(c for c in plan["containers"] if c["role"] == "prefill")
    members = [c for c in plan["containers"] if c["job_name"] == first["job_name"]]
    drain = roll_drain(plan, {"job_name": first["job_name"], "role": "prefill"}, members)
    routes = "".join(f'vllm:num_requests_running{{dp_rank="{rank}",role="prefill",instance_id="3",pod_ip="{c["ip"]}",'
                     f'model_name="m"}} 0.0\n' for c in members for rank in c["dp_ranks"])
    return FILTERS["motor_reconcile_drain_event"](drain, routes)


def inspected_prefill(plan):
    """docker inspect of the running prefill container of ``plan``, started 2h3m before 2026-01-01T02:03:00Z."""
    c = next(c for c in plan["containers"] if c["role"] == "prefill")
    return {"Name": "/" + c["name"], "RestartCount": 0, "Image": "sha256:4f1c",
            "State": {"Running": True, "Status": "running", "StartedAt": "2026-01-01T00:00:00.000000000Z",
                      "Health": {"Status": "healthy"}},
            "Config": {"Image": "pymotor:latest",
                       "Labels": {"io.pymotor.role": c["role"], CONTAINER_LABEL: c["name"],
                                  PORTS_LABEL: ",".join(str(p) for p in c["ports"])}},
            "HostConfig": {"Devices": [{"PathOnHost": f"/dev/davinci{n}"} for n in c["npu_ids"]]}}


def drain_output(name):
    """A drain filter on the scale-in result while the conductor still lists the drained instance."""
    result = scale_in()[1]
    return FILTERS[name](result["drain"], conductor_services(result))


def healthy_report(plan):
    return FILTERS["motor_ops"](plan, healthy_observations(plan))


def status_rows():
    plan = plan_of()
    info = inspected_prefill(plan)
    pod = info["Config"]["Labels"][CONTAINER_LABEL]
    # what the host's healer last read of the pod's NPUs (its state file's npu_health)
    reading = {"npu-a2-01": {pod: {"time": 0, "npus": {str(n): "OK" for n in range(4)}}}}
    return FILTERS["motor_ops_status_rows"]({"npu-a2-01": [info]}, "2026-01-01T02:03:00+00:00", reading)


def inspected_replica(plan, name):
    """docker inspect of a running controller/coordinator replica of a master/standby ``plan`` (its health check)."""
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.probes import healthcheck

    c = next(c for c in plan["containers"] if c["name"] == name)
    return {"Name": "/" + name, "State": {"Running": True},
            "Config": {"Labels": {"io.pymotor.role": c["role"], CONTAINER_LABEL: name},
                       "Healthcheck": {"Test": healthcheck(c)["test"]}}}


def inspected_etcd():
    return {"Name": "/pymotor-etcd", "State": {"Running": True},
            "Args": ["--listen-client-urls=https://192.0.2.22:2379,https://127.0.0.1:2379"]}


def ha_status_output():
    """Both controller replicas (the first the master, on the VIP's host) and one etcd member, as status.yml reads."""
    plan, first = standby_plan()
    standby = {"detail": {"message": "Controller is not ready", "reason": "Not master"}}
    member = json.dumps([{"Endpoint": "https://127.0.0.1:2379", "Status": {
        "header": {"member_id": 11, "raft_term": 2}, "leader": 11, "raftIndex": 42, "dbSize": 20480}}])
    return FILTERS["motor_ops_ha_status"]({
        first: {"readiness": [{"item": {"item": {"container": "mindie-motor-controller", "role": "controller"}},
                               "status": 200, "json": {"message": "Controller is ready"}}],
                "addresses": "2: eth0    inet 192.0.2.100/32 scope global eth0", "vip": "192.0.2.100",
                "etcd": {"container": "pymotor-etcd", "rc": 0, "stdout": member, "stderr": ""}},
        "ctl-02": {"readiness": [{"item": {"item": {"container": "mindie-motor-controller-2", "role": "controller"}},
                                  "status": 503, "json": standby}],
                   "addresses": "2: eth0    inet 192.0.2.22/24 scope global eth0", "vip": "192.0.2.100"}})


def precheck():
    plan = plan_of()
    defaults = {"motor_service_image": "local/pymotor:1", "motor_service_config_root": "/etc/pymotor",
                "motor_service_docker_min_version": "20.10.0", "motor_service_driver_dir": "/usr/local/Ascend/driver",
                "motor_service_hccn_tool": "/usr/local/Ascend/driver/tools/hccn_tool",
                "motor_service_log_root": "/var/log/pymotor", "motor_service_min_free_log_mb": 1024,
                "motor_service_check_links": True, "motor_service_engine_mounts": ["/usr/local/Ascend/driver"],
                "motor_service_command": ["bash", "-c", "source $CONFIGMAP_PATH/boot.sh"],
                "motor_service_restart_policy": "unless-stopped", "motor_service_log_max_size": "100m",
                "motor_service_log_max_file": "5", "motor_service_env_functions": {}, "motor_service_extra_volumes": []}
    hostvars = {}
    for host in inventory_hosts():
        npus = sorted({n for c in plan["containers"] if c["host"] == host for n in c["npu_ids"]}) or [0]
        hostvars[host] = {"motor_service_docker": {
            "can_talk_to_docker": True, "host_info": {"ServerVersion": "24.0.7"}, "images": [{"Id": "sha256:4f1c"}],
            "containers": [], "npu_devices": npus, "npu_health": {str(n): "OK" for n in npus}, "npu_error": "",
            "listening": [22], "links": {str(n): "UP" for n in npus},
            "npu_network": {str(n): {"ip": "29.%d.0.%d" % (sum(map(ord, host)) % 250, n + 1), "tls": "0"} for n in npus},
            "free_mb": 50000,
            "paths": {p: True for p in ["/usr/local/Ascend/driver", "/usr/local/Ascend/driver/tools/hccn_tool",
                                        "/mnt/weight", "/mnt/weight/qwen3_8B"]}}}
    return FILTERS["motor_precheck"](plan, list(hostvars), hostvars, defaults)


def etcd_probes(live_names, target):
    """A one-member cluster (ctl-01) growing to three, as the probes of the motor_etcd role read it."""
    urls = {h: f"192.0.2.1{h[-1]}" for h in target}
    members = [{"ID": 100 + i, "name": h, "peerURLs": [f"https://{urls[h]}:2380"], "clientURLs": [f"https://{urls[h]}:2379"]}
               for i, h in enumerate(live_names)]
    health = [{"endpoint": f"https://{urls[h]}:2379", "health": True} for h in live_names]
    return {h: {"data": h in live_names, "peer_url": f"https://{urls[h]}:2380",
                "members": json.dumps({"header": {"member_id": 100 + live_names.index(h)}, "members": members})
                if h in live_names else "", "health": json.dumps(health) if h in live_names else ""} for h in target}


# The input each sample was produced from: the seed config, its plan on the example inventory, a healthy
# verify, a scale-in from 2 to 1 prefill instances.
REAL_OUTPUT = {
    "motor_config": lambda: FILTERS["motor_config"](*seed()),
    "motor_contract_job_id_problem": lambda: FILTERS["motor_contract_job_id_problem"]("Mindie_Motor"),
    "motor_plan": plan_of,
    "motor_plan_table": lambda: FILTERS["motor_plan_table"](plan_of()),
    "motor_plan_vip": lambda: FILTERS["motor_plan_vip"](*standby_plan(), "eth0", "pymotor-vip:latest",
                                                        "/etc/pymotor/vip/mindie-motor"),
    "motor_plan_model_dirs": lambda: FILTERS["motor_plan_model_dirs"](FILTERS["motor_config"](*seed())),
    "motor_plan_weight_dir": lambda: FILTERS["motor_plan_weight_dir"](seed()[0]),
    "motor_plan_cert_dirs": lambda: FILTERS["motor_plan_cert_dirs"](FILTERS["motor_config"](*gen_cert_seed())),
    "motor_precheck": precheck,
    "motor_precheck_pings": lambda: FILTERS["motor_precheck_pings"](
        dict(plan_of(), containers=[dict(c, host="npu-a2-02") if c["role"] == "decode" else c
                                    for c in plan_of()["containers"]]),  # the seed's decode instance on a second host
        "npu-a2-01", {h: {"motor_service_docker": {"npu_network": {str(n): {"ip": "29.%d.0.%d" % (i, n + 1)}
                                                                   for n in range(8)}}}
                      for i, h in ((1, "npu-a2-01"), (2, "npu-a2-02"))}),
    "motor_reconcile": lambda: scale_in()[1],
    "motor_reconcile_table": lambda: FILTERS["motor_reconcile_table"](scale_in()[1]),
    "motor_reconcile_drain_requests": lambda: drain_output("motor_reconcile_drain_requests"),
    "motor_reconcile_drained": lambda: drain_output("motor_reconcile_drained"),
    "motor_reconcile_drain_event": drain_event_output,
    # what needs the second engine host of 2 prefill instances on the example inventory
    "motor_reconcile_needing": lambda: FILTERS["motor_reconcile_needing"](container_needs(plan_of(2)), ["npu-a2-02"]),
    "motor_ops": lambda: healthy_report(plan_of()),
    "motor_ops_verify_table": lambda: FILTERS["motor_ops_verify_table"](healthy_report(plan_of())),
    "motor_ops_http": lambda: FILTERS["motor_ops_http"]([
        {"item": {"name": "mindie-motor-p0-0"}, "status": 200, "json": {"status": True}},
        {"item": [{"name": "mindie-motor-p0-0"}, {"dp_rank": 1}], "status": -1}]),
    "motor_ops_kv_endpoints": lambda: FILTERS["motor_ops_kv_endpoints"](plan_of()),
    "motor_ops_targets": lambda: FILTERS["motor_ops_targets"](plan_of()),
    "motor_ops_probe_args": lambda: FILTERS["motor_ops_probe_args"](plan_of(), {}),
    "motor_ops_monitoring": lambda: FILTERS["motor_ops_monitoring"](plan_of(), "/srv/pymotor-monitoring"),
    "motor_reconcile_not_ready": lambda: FILTERS["motor_reconcile_not_ready"](
        {"msg": "x", "attempts": 3}, [{"item": {"name": "mindie-motor-p0-0", "host": "npu-a2-01"},
                                       "stdout": "ERROR engine died"}], 5),
    "motor_ops_kv_verdict": lambda: FILTERS["motor_ops_kv_verdict"]("0.11.0", ["array"]),
    "motor_ops_mask": lambda: FILTERS["motor_ops_mask"](seed_with_secret()[0]),
    "motor_ops_mask_text": lambda: FILTERS["motor_ops_mask_text"]('export HF_TOKEN="hf_not_a_real_token"'),
    "motor_ops_mask_document": lambda: FILTERS["motor_ops_mask_document"](json.dumps(
        {"motor_controller_config": {"api_key": "sk-not-a-real-key", "max_tokens": 512}})),
    "motor_go_sum_problems": go_sum_mismatch,
    "motor_ops_status_rows": status_rows,
    "motor_ops_ha_reads": lambda: FILTERS["motor_ops_ha_reads"](
        [inspected_replica(standby_plan()[0], "mindie-motor-controller-2")], [inspected_etcd()]),
    "motor_ops_readiness_url": lambda: FILTERS["motor_ops_readiness_url"](
        own_files(standby_plan()[0], "")["mindie-motor-controller-2"]["motor_probe.json"]),
    "motor_ops_ha_status": ha_status_output,
    "motor_etcd_member_plan": lambda: FILTERS["motor_etcd_member_plan"](
        etcd_probes(["ctl-01"], ["ctl-01", "ctl-02", "ctl-03"]), ["ctl-01", "ctl-02", "ctl-03"]),
    "motor_ops_status_table": lambda: FILTERS["motor_ops_status_table"](status_rows()),
    "motor_ops_status_conductor": lambda: FILTERS["motor_ops_status_conductor"]([
        {"role": "kv_conductor", "ip": "192.0.2.10", "ports": "13333"}]),
}


def part_of(sample, actual, where="_value") -> list[str]:
    """Where ``sample`` differs from ``actual`` (empty when the sample is part of the real output)."""
    if isinstance(sample, dict):
        if not isinstance(actual, dict):
            return [f"{where}: a mapping in the sample, {type(actual).__name__} in the output"]
        return [problem for key, value in sample.items()
                for problem in ([f"{where}.{key}: not in the output"] if key not in actual
                                else part_of(value, actual[key], f"{where}.{key}"))]
    if isinstance(sample, list):
        if not isinstance(actual, list) or len(actual) < len(sample):
            return [f"{where}: {len(sample)} items in the sample, output {actual!r:.200}"]
        return [problem for index, value in enumerate(sample) for problem in part_of(value, actual[index], f"{where}[{index}]")]
    if isinstance(sample, str) and isinstance(actual, str) and "\n" in sample.strip():
        lines = iter(actual.splitlines())
        missing = [line for line in sample.strip("\n").splitlines() if not any(line.rstrip() == out.rstrip() for out in lines)]
        return [f"{where}: line not in the output (in order): {line!r}" for line in missing[:1]]
    if sample != actual:
        return [f"{where}: sample {sample!r:.200}, output {actual!r:.200}"]
    return []


def test_every_public_filter_has_a_real_sample_check():
    assert sorted(REAL_OUTPUT) == sorted(FILTERS)


@pytest.mark.parametrize("name", sorted(REAL_OUTPUT))
def test_return_sample_is_real_output(name):
    problems = part_of(return_sample(name), REAL_OUTPUT[name]())
    assert not problems, "\n".join(problems)


def test_part_of_notices_a_wrong_sample():
    """The comparison is not vacuous: a changed value, a missing key or line, a reordered line are differences."""
    assert part_of({"a": 1}, {"a": 2}) and part_of({"b": 1}, {"a": 1}) and part_of([1, 2], [1])
    assert part_of("x\ny", "x\nz") and part_of("y\nx", "x\ny") and not part_of("x\nz", "x\ny\nz")
