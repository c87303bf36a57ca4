"""Unit tests of plugins/plugin_utils/reconcile/ on real plans of the seed PD-separation config."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTAINER_LABEL, HASH_LABEL, PARTS_LABEL, PLACEMENT_LABEL, PORTS_LABEL, SCALE_KEYS
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import change_table, reconcile, tier_steps
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.drain import drain_requests, drained_endpoints
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import (
    READS,
    ROLE_SECTIONS,
    canonical_json,
    config_parts,
    container_hashes,
    sha256_hex,
    spec_digest,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.labels import placement_label, previous_placement
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import KV_PATCH_BLOCK, configmaps, container_spec
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.upgrade import image_only, left_behind, upgrade_work


SEED = Path(__file__).resolve().parents[4] / "examples" / "seed_pd_separation"
HOSTS = {
    "h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "h2": {"motor_host_ip": "10.0.0.2", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]},
}


def make_plan(p=1, d=1, mutate=None):
    user = json.loads((SEED / "user_config.json").read_text())
    user["motor_deploy_config"].update(p_instances_num=p, d_instances_num=d)
    if mutate:
        mutate(user)
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


def parts_of(plan, image="sha256:img", shared="s1"):
    return {c["name"]: {"image": image, "spec": spec_digest(c), "shared": shared} for c in plan["containers"]}


def deployed(plan, parts, state="running", skip=()):
    """What Docker would list after a deploy of ``plan`` with ``parts``."""
    hashes, labels = container_hashes(plan, parts)
    out = {}
    for c in plan["containers"]:
        if c["name"] in skip:
            continue
        out.setdefault(c["host"], []).append({
            "Names": ["/" + c["name"]], "State": state,
            "Labels": {CONTAINER_LABEL: c["name"], "io.pymotor.role": c["role"], HASH_LABEL: hashes[c["name"]],
                       PARTS_LABEL: labels[c["name"]], PLACEMENT_LABEL: placement_label(c),
                       PORTS_LABEL: ",".join(str(p) for p in c["ports"])}})
    return out


def actions(result):
    return {r["container"]: (r["action"], r["mode"]) for r in result["actions"]}


def test_first_deploy_creates_everything_in_parallel():
    plan = make_plan()
    result = reconcile(plan, parts_of(plan), {})
    assert {pair[0] for pair in actions(result).values()} == {"create"}
    assert {pair[1] for pair in actions(result).values()} == {"parallel"}
    assert sorted(n for names in result["start"].values() for n in names) == sorted(c["name"] for c in plan["containers"])
    assert result["rolling"] == [] and result["first"] == {} and result["drain"] == []


def test_rerun_keeps_everything():
    plan = make_plan()
    parts = parts_of(plan)
    result = reconcile(plan, parts, deployed(plan, parts))
    assert result["changes"] == [] and result["start"] == {}
    assert "no container changes" in change_table(result)


def test_stopped_containers_are_started_not_recreated():
    plan = make_plan()
    parts = parts_of(plan)
    result = reconcile(plan, parts, deployed(plan, parts, state="exited"))
    assert {pair[0] for pair in actions(result).values()} == {"start"}
    assert all(r["reason"] == "was exited" for r in result["changes"])


def test_decode_only_change_rolls_exactly_the_decode_instance():
    plan = make_plan()
    parts = parts_of(plan)
    changed = make_plan(mutate=lambda u: u["motor_engine_decode_config"]["engine_config"].update(max_num_seqs=17))
    result = reconcile(changed, parts_of(changed), deployed(plan, parts))
    touched = {r["container"]: r for r in result["changes"]}
    assert set(touched) == {"mindie-motor-d0-0"}
    assert touched["mindie-motor-d0-0"]["mode"] == "rolling"
    assert touched["mindie-motor-d0-0"]["reason"] == "own config changed"
    assert [r["job_name"] for r in result["rolling"]] == [touched["mindie-motor-d0-0"]["job_name"]]


def test_coordinator_only_change_restarts_only_the_coordinator():
    plan = make_plan()
    parts = parts_of(plan)

    def mutate(user):
        user.setdefault("motor_coordinator_config", {}).setdefault("timeout_config", {})["request_timeout"] = 77
    changed = make_plan(mutate=mutate)
    result = reconcile(changed, parts_of(changed), deployed(plan, parts))
    assert [(r["container"], r["action"], r["mode"]) for r in result["changes"]] == [
        ("mindie-motor-coordinator", "recreate", "parallel")]


def test_controller_change_removes_engines_first():
    plan = make_plan()
    parts = parts_of(plan)

    def mutate(user):
        user.setdefault("motor_controller_config", {}).setdefault("instance_config", {})["instance_heartbeat_timeout"] = 12
    changed = make_plan(mutate=mutate)
    result = reconcile(changed, parts_of(changed), deployed(plan, parts))
    got = actions(result)
    assert got["mindie-motor-controller"] == ("recreate", "parallel")
    assert got["mindie-motor-p0-0"] == ("recreate", "first") and got["mindie-motor-d0-0"] == ("recreate", "first")
    assert got["mindie-motor-coordinator"] == ("keep", "none")
    assert sorted(result["first"]["h1"]) == ["mindie-motor-d0-0", "mindie-motor-p0-0"]
    assert "restarts with mindie-motor-controller" in {r["container"]: r for r in result["changes"]}["mindie-motor-p0-0"]["reason"]


def test_image_change_names_the_image():
    plan = make_plan()
    parts = parts_of(plan)
    result = reconcile(plan, parts_of(plan, image="sha256:other"), deployed(plan, parts))
    reasons = {r["container"]: r["reason"] for r in result["changes"]}
    assert reasons["mindie-motor-kv-pool"] == "image changed"
    assert reasons["mindie-motor-p0-0"] == "image changed"  # it rolls; no removal before the controller returns
    assert actions(result)["mindie-motor-p0-0"] == ("recreate", "rolling")


def test_scale_out_leaves_existing_containers_untouched():
    plan = make_plan(p=1)
    parts = parts_of(plan)
    bigger = make_plan(p=2)
    result = reconcile(bigger, parts_of(bigger), deployed(plan, parts))
    assert [(r["container"], r["action"], r["mode"]) for r in result["changes"]] == [
        ("mindie-motor-p1-0", "create", "parallel")]


def test_scale_in_drains_the_removed_prefill_instance():
    plan = make_plan(p=2)
    parts = parts_of(plan)
    smaller = make_plan(p=1)
    result = reconcile(smaller, parts_of(smaller), deployed(plan, parts))
    assert [(r["container"], r["action"], r["mode"]) for r in result["changes"]] == [
        ("mindie-motor-p1-0", "remove", "drain")]
    drain = result["drain"]
    p1 = next(c for c in plan["containers"] if c["name"] == "mindie-motor-p1-0")
    assert drain[0]["ip"] == plan["hosts"][p1["host"]]["ip"] and set(p1["ports"]) == set(drain[0]["ports"])
    events = plan["kv_events"]["endpoint_port"]
    services = [{"Endpoint": f"tcp://{drain[0]['ip']}:{events + r}", "InstanceID": "vllm-prefill-1", "TenantID": "default",
                 "DPRank": r} for r in p1["dp_ranks"]]
    services.append({"Endpoint": "tcp://10.0.0.1:5557", "InstanceID": "vllm-prefill-0", "TenantID": "default", "DPRank": 0})
    assert drain_requests(drain, services) == [
        {"instance_id": "vllm-prefill-1", "dp_rank": r, "tenant_id": "default"} for r in p1["dp_ranks"]]
    assert drained_endpoints(drain, services[-1:]) == []


def test_multi_pod_instance_rolls_as_a_whole():
    def two_pod_decode(user):
        user["motor_deploy_config"]["single_d_instance_pod_num"] = 2
        user["motor_engine_decode_config"]["engine_config"]["data_parallel_size"] = 2
    plan = make_plan(mutate=two_pod_decode)
    parts = parts_of(plan)
    parts_changed = copy.deepcopy(parts)
    parts_changed["mindie-motor-d0-1"]["spec"] = "different"
    result = reconcile(plan, parts_changed, deployed(plan, parts))
    assert len(result["rolling"]) == 1
    assert sorted(c["name"] for c in result["rolling"][0]["containers"]) == ["mindie-motor-d0-0", "mindie-motor-d0-1"]
    reasons = {r["container"]: r["reason"] for r in result["changes"]}
    assert reasons["mindie-motor-d0-0"].startswith("pod of ") and reasons["mindie-motor-d0-1"] == "own config changed"


def test_previous_placement_reads_labels_and_skips_garbage():
    plan = make_plan()
    existing = deployed(plan, parts_of(plan))
    existing["h1"].append({"Names": ["/junk"], "Labels": {PLACEMENT_LABEL: "{not json"}})
    previous = previous_placement(existing)
    p0 = next(c for c in plan["containers"] if c["name"] == "mindie-motor-p0-0")
    assert previous["mindie-motor-p0-0"] == {"host": "h1", "npu_ids": p0["npu_ids"], "port_map": p0["port_map"]}
    assert "junk" not in previous


def test_container_on_a_wrong_host_is_removed_and_created():
    plan = make_plan()
    parts = parts_of(plan)
    existing = deployed(plan, parts)
    moved = existing["h1"].pop(0)
    existing.setdefault("h2", []).append(moved)
    name = moved["Labels"][CONTAINER_LABEL]
    result = reconcile(plan, parts, existing)
    rows = [(r["container"], r["host"], r["action"]) for r in result["changes"]]
    assert (name, "h2", "remove") in rows and (name, "h1", "create") in rows


@pytest.mark.parametrize("key", SCALE_KEYS)
def test_spec_digest_ignores_instance_counts(key):
    plan = make_plan()
    entry = copy.deepcopy(plan["containers"][0])
    before = spec_digest(entry)
    entry["user_config"]["motor_deploy_config"][key] = 99
    assert spec_digest(entry) == before
    entry["env"]["X"] = "1"
    assert spec_digest(entry) != before


SETTINGS = {"image": "local/pymotor:1", "command": ["bash", "-c", "source $CONFIGMAP_PATH/boot.sh"], "job_id": "job",
            "log_root": "/var/log/pymotor", "weight_dir": "/mnt/weight", "extra_volumes": ["/data:/data:ro"],
            "restart_policy": "unless-stopped", "log_max_size": "100m", "log_max_file": 5,
            "mounts": ["/usr/local/Ascend/driver", "/etc/hccn.conf"], "driver_dir": "/usr/local/Ascend/driver"}


def test_container_spec_of_an_engine_and_of_the_controller():
    plan = make_plan()
    parts = parts_of(plan)
    result = reconcile(plan, parts, {})
    by_name = {c["name"]: c for c in plan["containers"]}
    engine = next(c for c in plan["containers"] if c["role"] == "prefill")
    spec = container_spec(engine, result, SETTINGS)
    assert "user_config" not in spec and spec["name"] == engine["name"]
    assert spec["devices"] == engine["devices"] and spec["env"]["ROLE"] == engine["env"]["ROLE"]
    assert spec["volumes"] == [
        f"{engine['configmap_path']}:{engine['configmap_path']}:ro",
        f"/var/log/pymotor/job/{engine['name']}:{engine['env'].get('MOTOR_LOG_ROOT_PATH', '/root/ascend/log')}:rw",
        "/mnt/weight:/mnt/weight:ro", "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro",
        "/etc/hccn.conf:/etc/hccn.conf:ro", "/data:/data:ro"]
    assert spec["labels"][HASH_LABEL] == result["hashes"][engine["name"]]
    assert spec["labels"][PARTS_LABEL] == result["parts"][engine["name"]]
    assert spec["labels"][PLACEMENT_LABEL] == placement_label(engine)
    assert spec["labels"][PORTS_LABEL] == ",".join(str(p) for p in engine["ports"])
    assert spec["log_options"] == {"max-size": "100m", "max-file": "5"}
    controller = by_name[next(n for n, c in by_name.items() if c["role"] == "controller")]
    control_spec = container_spec(controller, result, SETTINGS)
    assert not any(v.startswith("/usr/local/Ascend") for v in control_spec["volumes"])
    assert control_spec["devices"] == [] and control_spec["volumes"][-1] == "/data:/data:ro"
    # stdin open only for the controller (it spins on EOF); the node manager blocks in input() on an open stdin
    # and would never exit after giving up
    assert control_spec["stdin_open"] is True and spec["stdin_open"] is False
    assert not any(container_spec(c, result, SETTINGS)["stdin_open"] for c in plan["containers"]
                   if c["role"] != "controller")
    # without the init setting (older callers) no docker-init; with it every container runs one that signals the
    # startup script's whole process group
    assert spec["init"] is False and "TINI_KILL_PROCESS_GROUP" not in spec["env"]
    with_init = container_spec(engine, result, dict(SETTINGS, init=True))
    assert with_init["init"] is True and with_init["env"]["TINI_KILL_PROCESS_GROUP"] == "1"


def test_kv_pool_and_conductor_get_the_driver_only():
    """As upstream's kv_pool/kv_conductor templates: the driver directory (where the host has it), no other engine
    mount; the controller and coordinator get none."""
    plan = make_plan()
    result = reconcile(plan, parts_of(plan), {})
    driver = "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro"
    by_role = {c["role"]: container_spec(c, result, SETTINGS)["volumes"] for c in plan["containers"]}
    assert {"kv_pool", "kv_conductor"} <= set(by_role)
    for role in ("kv_pool", "kv_conductor"):
        assert driver in by_role[role] and "/etc/hccn.conf:/etc/hccn.conf:ro" not in by_role[role], role
    for role in ("controller", "coordinator"):
        assert not any(v.startswith("/usr/local/Ascend") for v in by_role[role]), role
    no_driver = dict(SETTINGS, mounts=["/etc/hccn.conf"])  # a CPU-only control host
    pool = next(c for c in plan["containers"] if c["role"] == "kv_pool")
    assert not any(v.startswith("/usr/local/Ascend") for v in container_spec(pool, result, no_driver)["volumes"])


def test_boot_time_certificates_mount_the_ca_and_script_directories_read_only():
    plan = make_plan()
    result = reconcile(plan, parts_of(plan), {})
    engine = next(c for c in plan["containers"] if c["role"] == "prefill")
    assert not any("cert" in v for v in container_spec(engine, result, SETTINGS)["volumes"])
    common = dict(engine["shell_env"]["set_common_env"], ENABLE_GEN_CERT="true", CA_PATH="/srv/pki/ca")
    with_certs = dict(engine, shell_env=dict(engine["shell_env"], set_common_env=common))
    volumes = container_spec(with_certs, result, SETTINGS)["volumes"]
    assert {"/srv/pki/ca:/srv/pki/ca:ro", "/mnt/cert_scripts:/mnt/cert_scripts:ro"} <= set(volumes)


def test_config_parts_match_the_jinja_digest_of_the_shared_settings():
    """The shared digest must stay what `to_json(sort_keys=true) | hash('sha256')` gave (no restart on upgrade)."""
    import hashlib

    from ansible.plugins.filter.core import to_json

    plan = make_plan()
    shared_spec = {"image": "local/pymotor:1", "command": ["bash", "-c", "source $CONFIGMAP_PATH/boot.sh"],
                   "restart_policy": "unless-stopped", "log": ["/var/log/pymotor", "100m", "5"],
                   "weight_dir": "/mnt/weight", "mounts": ["/etc/hccn.conf"], "extra_volumes": [],
                   "env_functions": {"engine.sh": ["set_prefill_env", "set_decode_env"], "common.sh": ["set_common_env"]}}
    parts = config_parts(plan["containers"], "sha256:img", shared_spec)
    jinja_shared = hashlib.sha256(to_json(shared_spec, sort_keys=True).encode("utf-8")).hexdigest()
    assert set(parts) == {c["name"] for c in plan["containers"]}
    for c in plan["containers"]:
        assert parts[c["name"]] == {"image": "sha256:img", "shared": jinja_shared, "spec": spec_digest(c)}


@pytest.mark.parametrize("hosts_by_tier, steps", [
    ({0: ["ctl"], 1: ["ctl", "ctl", "ctl"], 2: ["h1", "h2"]}, [[0, 1], [2]]),
    ({0: ["ctl"], 1: ["ctl", "ctl2"], 2: ["h1"]}, [[0], [1], [2]]),
    ({0: ["c2"], 1: ["ctl"], 2: ["h1"]}, [[0], [1], [2]]),
    ({0: ["h1"], 1: ["h1"], 2: ["h1", "h1"]}, [[0, 1, 2]]),
    ({1: ["ctl"], 2: ["h1"]}, [[1], [2]]),
])
def test_tier_steps_merge_consecutive_tiers_of_one_host(hosts_by_tier, steps):
    plan = {"containers": [{"name": f"c{t}{i}", "tier": t, "host": h}
                           for t, hosts in hosts_by_tier.items() for i, h in enumerate(hosts)]}
    assert tier_steps(plan) == steps


def test_seed_plan_starts_the_control_plane_in_one_step():
    assert reconcile(make_plan(), parts_of(make_plan()), {})["tier_steps"] == [[0, 1], [2]]


def test_engines_wait_for_the_control_plane_to_answer_when_they_start_in_a_later_step():
    """Upstream's controller pushes an assembled instance to the coordinator once: engines that come up while the
    coordinator is still starting are never served. The first engine step without tier 1 waits for the controller,
    the coordinator and the KV conductor to answer; a step starting both runs them in tier order, without a wait."""
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import engine_step_waits, step_list

    plan = make_plan()
    waits = engine_step_waits(plan, {"port": 30, "ready": 300})
    assert [c["name"] for c in waits] == ["the controller answers before the engines start",
                                          "the coordinator answers before the engines start",
                                          "the KV conductor answers before the engines start"]
    assert {c["until"] for c in waits} == {"answers"} and {c["timeout"] for c in waits} == {30}
    assert waits[1]["url"] == "http://%s:%s/readiness" % (plan["coordinator"]["ip"], plan["coordinator"]["mgmt_port"])
    steps = step_list({"first": {}}, [[0, 1], [2]], waits)
    assert "wait" not in steps[0] and steps[1]["wait"] == waits
    assert all("wait" not in s for s in step_list({"first": {}}, [[0, 1, 2]], waits))
    assert all("wait" not in s for s in step_list({"first": {}}, [[0, 1]], waits))  # no engine starts
    removal_first = step_list({"first": {"h1": ["x"]}}, [[2]], waits)
    assert "wait" not in removal_first[0] and removal_first[1]["wait"] == waits


def test_spec_digest_leaves_its_input_alone_and_masks_like_a_deep_copy():
    """spec_digest copies only the levels it changes (a deep copy of Ansible's lazy containers was slow); the
    digest is the one of a deep copy with the counts removed, and the plan entry keeps its counts."""
    plan = make_plan(p=2)
    entry = plan["containers"][0]
    before = json.dumps(entry, sort_keys=True)
    masked = copy.deepcopy(entry)
    for key in SCALE_KEYS:
        masked["user_config"]["motor_deploy_config"].pop(key, None)
    reads = READS[entry["role"]]
    masked["user_config"] = {k: v for k, v in masked["user_config"].items() if k not in ROLE_SECTIONS or k in reads}
    assert spec_digest(entry) == sha256_hex(canonical_json(masked))
    assert json.dumps(entry, sort_keys=True) == before


def test_configmaps_inject_the_functions_of_the_plan_and_write_nice_json():
    from ansible.plugins.filter.core import to_nice_json

    plan = make_plan()
    functions = {"common.sh": ["set_common_env"], "engine.sh": ["set_prefill_env", "set_decode_env"]}
    engine = next(c for c in plan["containers"] if c["role"] == "decode")
    (out,) = configmaps([engine], functions)
    assert out["name"] == engine["name"] and out["path"] == engine["configmap_path"]
    shell = engine["shell_env"]
    # every function with its PyMotor body (common + role section), in every directory, as PyMotor's one ConfigMap
    assert out["functions"] == {"common.sh": {"set_common_env": shell["set_common_env"]},
                                "engine.sh": {"set_prefill_env": shell["set_prefill_env"],
                                              "set_decode_env": shell["set_decode_env"]}}
    assert shell["set_common_env"] and not set(shell["set_decode_env"]) & set(engine["env"]) - {"MOTOR_LOG_ROOT_PATH"}
    assert engine["kv_patch"] is bool(plan["kv_pool"] and plan["kv_conductor"])
    assert out["prepend"] == ({"boot.sh": KV_PATCH_BLOCK} if engine["kv_patch"] else {})
    assert out["files"] == {"user_config.json": to_nice_json(engine["user_config"], indent=2) + "\n",
                            "env.json": to_nice_json(engine["env"], indent=2) + "\n"}


def _upgraded(p=2, d=2):
    """A 2P+2D job deployed with one image and re-planned with another (same config)."""
    plan = make_plan(p=p, d=d)
    old = deployed(plan, parts_of(plan, image="sha256:old", shared="s-old"))
    for items in old.values():
        for item in items:
            item["Image"] = "local/motor:1.0"
    return plan, old, reconcile(plan, parts_of(plan, image="sha256:new", shared="s-new"), old)


def test_image_upgrade_restarts_the_control_plane_once_and_rolls_engines_one_instance_at_a_time():
    upgraded = _upgraded()
    plan, result = upgraded[0], upgraded[2]
    got = actions(result)
    engines = [c for c in plan["containers"] if c["tier"] == 2]
    control = [c["name"] for c in plan["containers"] if c["tier"] != 2]
    assert all(got[name] == ("recreate", "parallel") for name in control)
    assert all(got[c["name"]] == ("recreate", "rolling") for c in engines)
    assert result["first"] == {}
    assert sorted(n for names in result["start"].values() for n in names) == sorted(control)
    # one roll entry per engine instance, in plan order, each with all the pods of its instance
    order = []
    for c in engines:
        if c["job_name"] not in order:
            order.append(c["job_name"])
    assert [r["job_name"] for r in result["rolling"]] == order and len(order) == 4
    assert all({m["name"] for m in r["containers"]} == {c["name"] for c in engines if c["job_name"] == r["job_name"]}
               for r in result["rolling"])
    assert all(r["reason"].startswith("image changed") for r in result["rolling"])


def test_image_upgrade_work_waits_for_the_control_plane_and_names_the_rollback():
    plan, old, result = _upgraded()
    work = upgrade_work(result, old, "local/motor:2.0", [{"name": "ready"}])
    assert work["wait"] == [{"name": "ready"}]
    assert set(work["control_plane"]) == {c["name"] for c in plan["containers"] if c["tier"] != 2}
    assert work["order"] == [r["job_name"] for r in result["rolling"]]
    assert work["previous_image"] == "local/motor:1.0" and work["image"] == "local/motor:2.0"
    assert "-e motor_image=local/motor:1.0" in work["rollback"]
    # a rollback is the same roll the other way
    back = upgrade_work(result, {h: [dict(i, Image="local/motor:2.0") for i in items] for h, items in old.items()},
                        "local/motor:1.0", [])
    assert back["previous_image"] == "local/motor:2.0" and "motor_image=local/motor:2.0" in back["rollback"]


def test_rerun_after_the_roll_changes_nothing():
    plan = make_plan(p=2, d=2)
    parts = parts_of(plan, image="sha256:new", shared="s-new")
    result = reconcile(plan, parts, deployed(plan, parts))
    assert result["changes"] == [] and result["rolling"] == []
    assert upgrade_work(result, deployed(plan, parts), "local/motor:2.0", [{"name": "ready"}])["wait"] == []


def test_a_controller_config_change_with_a_new_image_still_removes_engines_first():
    plan = make_plan()
    parts = parts_of(plan)

    def mutate(user):
        user.setdefault("motor_controller_config", {}).setdefault("instance_config", {})["instance_heartbeat_timeout"] = 12
    changed = make_plan(mutate=mutate)
    result = reconcile(changed, parts_of(changed, image="sha256:new"), deployed(plan, parts))
    got = actions(result)
    assert got["mindie-motor-p0-0"] == ("recreate", "first") and result["rolling"] == []


def test_image_only_needs_the_same_own_config():
    assert image_only({"image": "a", "spec": "s", "shared": "x"}, {"image": "b", "spec": "s", "shared": "y"})
    assert not image_only({"image": "a", "spec": "s"}, {"image": "b", "spec": "t"})
    assert not image_only({"image": "a", "spec": "s"}, {"image": "a", "spec": "s"})
    assert not image_only({}, {"image": "b", "spec": "s"})


def test_rollback_after_a_failed_roll_does_not_wait_for_the_broken_instance():
    plan = make_plan(p=2, d=2)
    good = parts_of(plan, image="sha256:old", shared="s-old")
    bad = parts_of(plan, image="sha256:bad", shared="s-bad")
    now = deployed(plan, good)
    broken = "mindie-motor-p0-0"
    bad_now = deployed(plan, bad)
    for host, items in now.items():  # the failed roll replaced p0 with the bad image, then stopped
        for i, item in enumerate(items):
            if item["Names"] == ["/" + broken]:
                items[i] = next(x for x in bad_now[host] if x["Names"] == ["/" + broken])
            items[i]["Image"] = "local/motor:bad" if items[i]["Names"] == ["/" + broken] else "local/motor:1.0"
    # the control plane runs the bad image too: it restarts, and only the broken instance rolls back
    for host, items in now.items():
        for i, item in enumerate(items):
            if item["Labels"]["io.pymotor.role"] not in ("prefill", "decode"):
                items[i] = dict(next(x for x in bad_now[host] if x["Names"] == item["Names"]), Image="local/motor:bad")
    result = reconcile(plan, good, now)
    assert [r["job_name"] for r in result["rolling"]] == ["mindie-motor-p0"]
    assert left_behind(result, now) == {broken}
    work = upgrade_work(result, now, "local/motor:1.0", [{"name": "ready"}])
    assert work["wait"] and work["rollback"] == ""  # most engines already run the target image
    fresh = _upgraded()
    assert left_behind(fresh[2], fresh[1]) == frozenset()


def judged_with(plan, image, image_id):
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.precheck import containers_by_host  # noqa: PLC0415

    settings = {"image": image, "command": "", "restart_policy": "unless-stopped", "log_root": "/var/log/motor",
                "log_max_size": "100m", "log_max_file": 5, "env_functions": [], "extra_volumes": []}
    own = containers_by_host(plan)
    return {"own": own, "hosts": {h: {"image_id": image_id, "mounts_present": []} for h in own},
            "settings": {h: dict(settings) for h in own}}


def listed(plan, parts, image, image_id):
    out = deployed(plan, parts)
    for items in out.values():
        for item in items:
            item.update(Image=image, ImageID=image_id)
    return out


def test_a_new_name_for_the_running_image_id_restarts_nothing_and_a_new_id_rolls():
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import hash_parts  # noqa: PLC0415

    plan = make_plan()
    before = hash_parts(plan, judged_with(plan, "motor:1.0", "sha256:aaa"))
    running = listed(plan, before, "motor:1.0", "sha256:aaa")
    retagged = judged_with(plan, "registry.example/motor:release", "sha256:aaa")
    result = reconcile(plan, hash_parts(plan, retagged, running), running)
    assert result["changes"] == [] and result["rolling"] == []  # the record follows the container: 0 changed
    # without the listing (or before this rule) the same deploy said "role settings changed" for every container
    changes = reconcile(plan, hash_parts(plan, retagged), running)["changes"]
    assert len(changes) == len(plan["containers"]) and all(r["reason"].startswith("role settings changed")
                                                           for r in changes)
    # a new image id under the new name: the usual roll (image changed, engines one instance at a time)
    upgraded = judged_with(plan, "registry.example/motor:release", "sha256:bbb")
    result = reconcile(plan, hash_parts(plan, upgraded, running), running)
    assert actions(result)["mindie-motor-p0-0"] == ("recreate", "rolling")
    assert "image changed" in {r["container"]: r["reason"] for r in result["changes"]}["mindie-motor-p0-0"]
    # the old tag removed: Docker lists the id, the name the containers were created from is unknown: restart
    untagged = listed(plan, before, "sha256:aaa", "sha256:aaa")
    assert reconcile(plan, hash_parts(plan, retagged, untagged), untagged)["changes"]


def test_rolling_the_only_running_instance_of_a_role_is_a_problem_naming_what_to_do():
    from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.upgrade import outage_problems  # noqa: PLC0415

    def decode_change(user):
        user["motor_engine_decode_config"]["engine_config"].update(max_num_seqs=17)
    for d, expected in ((1, 1), (2, 0)):
        plan = make_plan(d=d)
        parts = parts_of(plan)
        changed = make_plan(d=d, mutate=decode_change)
        result = reconcile(changed, parts_of(changed), deployed(plan, parts))
        assert len(result["rolling"]) == d
        problems = outage_problems(changed, result)
        assert len(problems) == expected
    assert problems == []
    problem = str(outage_problems(*_one_decode_roll(decode_change))[0])
    assert problem.startswith("motor_roll_allow_outage: the roll restarts mindie-motor-d0, the only running decode")
    assert "-e motor_roll_allow_outage=true" in problem
    # a second decode instance created by this deploy does not serve yet: the roll of d0 is still an outage
    plan = make_plan(d=1)
    changed = make_plan(d=2, mutate=decode_change)
    result = reconcile(changed, parts_of(changed), deployed(plan, parts_of(plan)))
    assert len(outage_problems(changed, result)) == 1


def _one_decode_roll(mutate):
    plan = make_plan(d=1)
    changed = make_plan(d=1, mutate=mutate)
    return changed, reconcile(changed, parts_of(changed), deployed(plan, parts_of(plan)))
