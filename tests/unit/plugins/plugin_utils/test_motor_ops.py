"""Unit tests of plugins/plugin_utils/operations/ (pure functions of the day-2 verbs)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.kv_events import kv_event_shape, kv_format_verdict
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import MASK, mask_document, mask_secrets, mask_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.status import (
    conductor_url,
    status_rows,
    status_table,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.verify import http_results, verify_report, verify_table


ARRAY_BATCH = [1.0, [["BlockStored", [2 ** 63 + 1], None, list(range(128)), 128, None, "GPU", None]], 0]
MAP_BATCH = [1.0, [{"type": "BlockStored", "block_hashes": [1], "medium": "GPU"}], 0]
LEGACY_BATCH = [1.0, [["BlockStored", [1], None, list(range(128)), 128]], 0]


QUERY_EMPTY = {"default": {"vllm-prefill-1": {"longest_matched": 0, "DP": {}}}}
QUERY_HELD = {"default": {"vllm-prefill-1": {"longest_matched": 1024, "DP": {"1": 1024}}}}
QUERY_SPREAD = {"default": {"vllm-prefill-1": {"longest_matched": 1024, "DP": {"0": 1024, "1": 1024}}}}


def plan():
    def engine(name, role, ip, ranks, tier=2):
        return {"name": name, "host": "h1", "ip": ip, "role": role, "tier": tier, "dp_ranks": ranks,
                "endpoints": [{"dp_rank": r, "mgmt_port": 10001 + 2 * i} for i, r in enumerate(ranks)]}
    return {"job_id": "j", "affinity": True, "controller": {"ip": "10.0.0.2"}, "coordinator": {"ip": "10.0.0.2"},
            "kv_conductor": {"ip": "10.0.0.2", "port": 13333},
            "kv_events": {"role": "prefill", "endpoint_port": 5557, "replay_port": 6667},
            "containers": [
                {"name": "j-controller", "host": "ctl", "ip": "10.0.0.2", "role": "controller", "tier": 1},
                engine("j-p0-0", "prefill", "10.0.0.1", [0, 1]),
                engine("j-d0-0", "decode", "10.0.0.1", [0, 1])]}


def good_raw():
    eps = ["tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558"]
    return {
        "image_ids": {"h1": "sha256:a", "ctl": "sha256:a"},
        "containers": {n: {"exists": True, "running": True, "status": "running", "image": "sha256:a", "restarts": 0}
                       for n in ("j-controller", "j-p0-0", "j-d0-0")},
        "controller": {"status": 200}, "coordinator": {"status": 200, "json": {"ready": True}},
        "node_managers": {"j-p0-0": {"status": 200, "json": {"status": True}},
                          "j-d0-0": {"status": 200, "json": {"status": True}}},
        "engines": {f"{n}/{r}": {"status": 200, "json": {"status": "normal"}} for n in ("j-p0-0", "j-d0-0") for r in (0, 1)},
        "services": {"services": [{"Endpoint": e} for e in eps]},
        "inference": {"status": 200},
        "probe": {"endpoints": {eps[0]: {"block_stored": 3, "decode_errors": 0}, eps[1]: {"block_stored": 0}},
                  "unrelated": [{"status": 200}] * 2, "shapes": ["array"],
                  "tokens": {"source": "tokenize", "detail": ""}, "metrics_before": {},
                  "prefixes": [{"name": "prefix-0", "prompt_tokens": 1100,
                                "steps": [{"query": {"status": 200, "json": QUERY_EMPTY}}]
                                + [{"status": 200, "query": {"status": 200, "json": QUERY_HELD}, "metrics": {}}
                                   for dummy in range(4)]}]},
        "kv_format": kv_format_verdict(None, ["array"]),
    }


def test_mask_secrets_hides_secret_values_only():
    data = {"api_key": "s1", "nested": [{"password": "s2", "tls_key_file": "/k.pem"}], "max_tokens": 5,
            "token_ids": [1, 2], "empty_token": "", "name": "x", "auth": {"token": "s3"}}
    masked = mask_secrets(data)
    text = json.dumps(masked)
    assert "s1" not in text and "s2" not in text and "s3" not in text and "/k.pem" not in text
    assert masked["max_tokens"] == 5 and masked["token_ids"] == [1, 2] and masked["empty_token"] == ""
    assert masked["name"] == "x" and data["api_key"] == "s1"  # input untouched


def test_mask_text_and_document():
    assert "hunter2" not in mask_text('login password=hunter2 and "api_key": "abc"')
    assert "abc" not in mask_text('"api_key": "abc"')
    doc = mask_document('{"motor_controller_config": {"api_key": "abc"}}')
    assert "abc" not in doc and json.loads(doc)["motor_controller_config"]["api_key"] == MASK
    assert mask_document("plain log line") == "plain log line"


@pytest.mark.parametrize(("batch", "shape"), [
    (ARRAY_BATCH, "array"), (MAP_BATCH, "map"), (LEGACY_BATCH, "legacy"), ({"ts": 1, "events": []}, "map"),
    ([1.0, [], 0], "empty"), ("x", "unknown")])
def test_kv_event_shape(batch, shape):
    assert kv_event_shape(batch) == shape


@pytest.mark.parametrize(("version", "shapes", "compatible", "source"), [
    (None, ["array"], True, "captured event"),
    ("0.20.0", ["map"], False, "captured event"),   # a captured event beats the version
    ("0.26.0", None, False, "vllm version"),
    ("0.27.1+ascend", [], False, "vllm version"),
    ("0.10.2", None, False, "vllm version"),
    ("0.11.0rc1", None, True, "vllm version"),
    (None, ["empty"], None, "none"),
    (None, ["legacy"], False, "captured event"),
])
def test_kv_format_verdict(version, shapes, compatible, source):
    verdict = kv_format_verdict(version, shapes)
    assert verdict["compatible"] is compatible and verdict["source"] == source and verdict["reason"]


def test_map_verdict_explains_the_conductor():
    reason = kv_format_verdict("0.26.0")["reason"]
    assert "42892" in reason and "array" in reason


def test_verify_report_passes_on_a_healthy_job():
    report = verify_report(plan(), good_raw())
    assert report["passed"], [c for c in report["checks"] if not c["ok"]]
    assert report["affinity"]["fraction"] == 1.0 and report["kv_events"]["block_stored"] == 3
    assert "0 failed" in verify_table(report)


@pytest.mark.parametrize(("mutate", "failing"), [
    (lambda r: r["containers"]["j-p0-0"].update(running=False, status="exited"), "container running with the planned image"),
    (lambda r: r["containers"]["j-d0-0"].update(image="sha256:b"), "container running with the planned image"),
    (lambda r: r["containers"]["j-d0-0"].update(status="restarting"), "container running with the planned image"),
    (lambda r: r["coordinator"].update(json={"ready": False}), "coordinator ready"),
    (lambda r: r["engines"].update({"j-d0-0/1": {"status": -1, "json": {}}}), "engine status normal"),
    (lambda r: r["services"].update(services=[{"Endpoint": "tcp://10.0.0.1:5557"}]), "conductor lists every prefill DP rank"),
    (lambda r: r["probe"]["endpoints"].clear(), "KV events flowing (BlockStored received)"),
    (lambda r: r["probe"]["prefixes"][0]["steps"][-1].update(query={"status": 200, "json": QUERY_SPREAD}),
     "affinity: repeats of a shared prefix go to the instance holding it"),
    (lambda r: r["probe"]["prefixes"][0]["steps"][1].update(query={"status": 200, "json": QUERY_EMPTY}),
     "affinity: repeats of a shared prefix go to the instance holding it"),
    (lambda r: r["probe"]["unrelated"].append({"status": 502}), "unrelated requests succeed"),
    (lambda r: r.update(kv_format=kv_format_verdict(None, ["map"])), "KV event format readable by the conductor"),
    (lambda r: r["inference"].update(status=503), "inference request succeeds"),
])
def test_verify_report_fails_each_check(mutate, failing):
    raw = good_raw()
    mutate(raw)
    report = verify_report(plan(), raw)
    assert not report["passed"]
    assert failing in {c["check"] for c in report["checks"] if not c["ok"]}


def test_verify_report_judges_the_discovery_probes():
    """verify.yml hands the hosts' discovery results (probes); the judgement is the one of observed containers."""
    def inspection(name, status="running", image="sha256:a"):
        return {"Name": "/" + name, "Image": image, "RestartCount": 1,
                "State": {"Running": status in ("running", "restarting"), "Status": status}}
    raw = good_raw()
    del raw["containers"], raw["image_ids"]
    raw["probes"] = {"ctl": {"images": [{"Id": "sha256:a"}], "inspections": [inspection("j-controller")]},
                     "h1": {"images": [{"Id": "sha256:a"}], "inspections": [inspection("j-p0-0"), inspection("j-d0-0")]}}
    report = verify_report(plan(), raw)
    assert report["passed"], [c for c in report["checks"] if not c["ok"]]
    assert {c["container"]: c["restarts"] for c in report["containers"]} == {"j-controller": 1, "j-p0-0": 1, "j-d0-0": 1}
    raw["probes"]["h1"]["inspections"] = [inspection("j-p0-0", "restarting"), inspection("j-d0-0", image="sha256:b")]
    failed = {c["target"] for c in verify_report(plan(), raw)["checks"] if not c["ok"]}
    assert failed == {"h1/j-p0-0", "h1/j-d0-0"}
    del raw["probes"]["ctl"]  # a host not read: its containers are missing
    report = verify_report(plan(), raw)
    assert {c["container"]: c["state"] for c in report["containers"]}["j-controller"] == "missing"


def test_http_results_keys():
    results = [{"item": {"name": "a"}, "status": 200, "json": {"status": True}},
               {"item": [{"name": "b"}, {"dp_rank": 3}], "status": -1}]
    assert http_results(results) == {"a": {"status": 200, "json": {"status": True}},
                                     "b/3": {"status": -1, "json": {}}}


def test_status_rows_and_table():
    info = {"Name": "/j-p0-0", "RestartCount": 2, "Image": "sha256:0123456789abcdef0123",
            "State": {"Running": True, "Status": "running", "StartedAt": "2026-01-01T00:00:00.123456789Z",
                      "Health": {"Status": "healthy"}},
            "Config": {"Image": "site/pymotor:2",
                       "Labels": {"io.pymotor.role": "prefill", "io.pymotor.container": "j-p0-0",
                                  "io.pymotor.ports": "3026,5557"}},
            "HostConfig": {"Devices": [{"PathOnHost": "/dev/davinci1"}, {"PathOnHost": "/dev/davinci0"},
                                       {"PathOnHost": "/dev/davinci_manager"}]}}
    stopped = {"Name": "/j-controller", "State": {"Running": False, "Status": "exited", "ExitCode": 0},
               "Config": {"Labels": {"io.pymotor.role": "controller"}}}
    rows = status_rows({"h1": [info], "ctl": [stopped]}, now="2026-01-01T01:02:03+00:00")
    assert [r["container"] for r in rows] == ["j-controller", "j-p0-0"]
    assert rows[1]["uptime"] == "1h2m" and rows[1]["npus"] == "0,1" and rows[1]["restarts"] == 2
    assert rows[0]["state"] == "exited" and rows[0]["uptime"] == ""
    table = status_table(rows)
    assert table.splitlines()[0].split() == ["HOST", "ROLE", "CONTAINER", "STATE", "HEALTH", "UPTIME", "RESTARTS",
                                             "IMAGE", "PORTS", "NPUS", "NPU", "HEALTH"]
    # which image each container runs (name and id: during a roll one tag may name two images) and its health
    assert table.splitlines()[3].split()[:9] == ["h1", "prefill", "j-p0-0", "running", "healthy", "1h2m", "2",
                                                 "site/pymotor:2", "(0123456789ab)"]
    assert rows[0]["health"] == "-" and rows[0]["image_name"] == "-"
    assert rows[1]["npu_health"] == "-" and rows[0]["npu_health"] == ""  # not read yet; no NPU
    assert status_table([]) == "no container of this job on the hosts"


def test_status_shows_the_npu_health_each_hosts_healer_last_read():
    info = {"Name": "/j-p0-0", "State": {"Running": True, "Status": "running"},
            "Config": {"Labels": {"io.pymotor.role": "prefill", "io.pymotor.container": "j-p0-0"}},
            "HostConfig": {"Devices": [{"PathOnHost": "/dev/davinci%d" % n} for n in (2, 3, 10)]}}
    other = dict(info, Name="/j-d0-0", Config={"Labels": {"io.pymotor.role": "decode", "io.pymotor.container": "j-d0-0"}})
    read = {"h1": {"j-p0-0": {"time": 1, "npus": {"10": "Critical", "2": "Alarm", "3": "OK"}},
                   "j-d0-0": {"time": 1, "npus": {"4": "OK"}}}}
    rows = {r["container"]: r for r in status_rows({"h1": [info, other]}, npu_health=read)}
    assert rows["j-p0-0"]["npu_health"] == "2:Alarm,10:Critical" and rows["j-d0-0"]["npu_health"] == "OK"
    assert "2:Alarm,10:Critical" in status_table(list(rows.values()))
    assert status_rows({"h1": [info]}, npu_health={"h2": read["h1"]})[0]["npu_health"] == "-"  # another host's


def test_status_lists_the_conductors_registrations_per_pod():
    """status: the conductor's URL from its row, then its registrations against the pods holding their endpoints;
    a publishing pod with none is named, an endpoint of no pod of the job too."""
    def inspected(name, role, ports, ip):
        return {"Name": "/" + name, "State": {"Running": True, "Status": "running"},
                "Config": {"Env": ["POD_IP=" + ip, "ROLE=" + role],
                           "Labels": {"io.pymotor.role": role, "io.pymotor.container": name, "io.pymotor.ports": ports}}}
    rows = status_rows({"ctl": [inspected("j-kv-conductor", "kv_conductor", "13333", "10.0.0.9")],
                        "h1": [inspected("j-p0-0", "prefill", "3026,5557,5558", "10.0.0.1")],
                        "h2": [inspected("j-p1-0", "prefill", "3026,5557,5558", "10.0.0.2")]})
    assert conductor_url(rows) == "http://10.0.0.9:13333" and conductor_url(rows[1:]) == ""
    services = {"services": [{"Endpoint": "tcp://10.0.0.1:5558", "InstanceID": "vllm-prefill-3", "DPRank": 1},
                             {"Endpoint": "tcp://10.0.0.1:5557", "InstanceID": "vllm-prefill-3", "DPRank": 0},
                             {"Endpoint": "tcp://10.0.0.7:5557", "InstanceID": "vllm-prefill-1", "DPRank": 0}]}
    lines = status_table(rows, services).splitlines()
    start = lines.index("KV conductor registrations (3):")
    assert lines[start + 1].split() == ["PUBLISHER", "DP", "RANK", "INSTANCE", "KV-EVENT", "ENDPOINT"]
    assert [line.split() for line in lines[start + 3:]] == [
        ["?", "(no", "pod", "of", "the", "job)", "0", "vllm-prefill-1", "tcp://10.0.0.7:5557"],
        ["j-p0-0", "0", "vllm-prefill-3", "tcp://10.0.0.1:5557"],
        ["j-p0-0", "1", "vllm-prefill-3", "tcp://10.0.0.1:5558"],
        ["j-p1-0", "-", "not", "registered"]]
    assert status_table(rows, "no answer (connection refused)").endswith(
        "KV conductor registrations: no answer (connection refused)")
    assert status_table(rows) == status_table(rows, None)


def test_verify_multi_pod_instance_any_registration_order():
    """A 2-pod prefill instance (DP 4): verify passes whichever pod registered first, and names the pod that lacks
    its ranks."""
    multi = plan()
    pod0 = multi["containers"][1]
    pod1 = dict(pod0, name="j-p0-1", ip="10.0.0.3", dp_ranks=[2, 3],
                endpoints=[{"dp_rank": r, "mgmt_port": 10001 + 2 * i} for i, r in enumerate((2, 3))])
    multi["containers"][1:2] = [dict(pod0, rank_pool=[0, 1, 2, 3]), dict(pod1, rank_pool=[0, 1, 2, 3])]
    for first, second in (("10.0.0.1", "10.0.0.3"), ("10.0.0.3", "10.0.0.1")):
        raw = good_raw()
        raw["containers"]["j-p0-1"] = dict(raw["containers"]["j-p0-0"])
        raw["node_managers"]["j-p0-1"] = raw["node_managers"]["j-p0-0"]
        raw["engines"].update({f"j-p0-1/{r}": {"status": 200, "json": {"status": "normal"}} for r in (2, 3)})
        raw["services"] = {"services": [{"Endpoint": f"tcp://{first}:{5557 + r}"} for r in (0, 1)]
                           + [{"Endpoint": f"tcp://{second}:{5557 + r}"} for r in (2, 3)]}
        raw["probe"]["endpoints"] = {f"tcp://{second}:5560": {"block_stored": 2, "decode_errors": 0}}
        report = verify_report(multi, raw)
        assert report["passed"], [c for c in report["checks"] if not c["ok"]]
        assert report["kv_events"]["block_stored"] == 2
    raw["services"]["services"] = raw["services"]["services"][:2]
    check = next(c for c in verify_report(multi, raw)["checks"] if c["check"] == "conductor lists every prefill DP rank")
    assert not check["ok"] and check["detail"] == "2/4 registered, missing j-p0-0: 0/2 of tcp://10.0.0.1:5557..5560"
    # per pod: the registrations the conductor holds of its ranks, and which pod lacks them
    raw["services"]["services"] = [dict(s, InstanceID="vllm-prefill-7", DPRank=r)
                                   for r, s in enumerate(raw["services"]["services"])]
    pods = {c["target"]: c for c in verify_report(multi, raw)["checks"]
            if c["check"] == "conductor registrations of the pod's DP ranks"}
    assert not pods["j-p0-0"]["ok"] and pods["j-p0-0"]["detail"] == "0/2 registered"
    assert pods["j-p0-1"]["ok"] and pods["j-p0-1"]["detail"] == (
        "2/2 registered: vllm-prefill-7/dp0 at tcp://10.0.0.3:5557; vllm-prefill-7/dp1 at tcp://10.0.0.3:5558")
