"""The stand-in coordinator's GET /metrics?type=dp lists what upstream's metrics collector lists: every engine sample
of the instances it holds, labelled dp_rank, role, instance_id and pod_ip first
(motor/coordinator/metrics/metrics_collector.py:759-780), and leaves out an instance any of whose endpoints does not
answer its /metrics (:582-608). The roll's drain and its "routes" wait read it (module_utils/motor_health.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sim" / "motor_image"))

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_health import routed_instances  # noqa: E402
from motor_sim import coordinator as module  # noqa: E402
from motor_sim.coordinator import Coordinator  # noqa: E402


class Handler:
    def __init__(self, path):
        self.path = path


def inst(iid, role, ips):
    return {"id": iid, "role": role, "job_name": "job-%d" % iid, "model_name": "m",
            "endpoints": [{"dp_rank": n, "ip": ip, "port": 9000 + n, "mgmt_port": 9100 + n} for n, ip in enumerate(ips)]}


def test_dp_metrics_name_each_instance_with_its_pods_and_leave_out_one_whose_engine_does_not_answer(monkeypatch):
    coordinator = Coordinator({})
    coordinator.refresh({"event": "add", "instances": [inst(4, "prefill", ["192.0.2.1"]),
                                                       inst(5, "decode", ["192.0.2.2", "192.0.2.3"]),
                                                       inst(6, "decode", ["192.0.2.9"])]}, None)
    asked = []

    def http_json(method, url, *args, **kwargs):
        asked.append(url)
        if "192.0.2.9" in url:
            return 0, "connection refused"
        return 200, '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
    monkeypatch.setattr(module, "http_json", http_json)
    coordinator.dp_metrics = coordinator.collect_metrics()
    status, text = coordinator.metrics({}, Handler("/metrics?type=dp"))
    assert status == 200
    assert 'vllm:num_requests_running{dp_rank="1",role="decode",instance_id="5",pod_ip="192.0.2.3",engine="0"' in text
    assert routed_instances(text) == {4: {"role": "prefill", "ips": {"192.0.2.1"}},
                                      5: {"role": "decode", "ips": {"192.0.2.2", "192.0.2.3"}}}
    assert "http://192.0.2.2:9100/metrics" in asked
    assert coordinator.metrics({}, Handler("/metrics"))[1].startswith("motor_coordinator_ready 1")
    coordinator.refresh({"event": "del", "instances": [{"id": 5, "role": "decode", "job_name": "j", "model_name": "m"}]},
                        None)
    assert set(routed_instances(coordinator.collect_metrics())) == {4}
