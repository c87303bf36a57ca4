"""Smoke test of the conformance image, without the collection: the REAL controller, coordinator and two node
managers (P and D, each spawning the fake engine) on one Docker network, wired as upstream's docker-only guide does
(env per component, controller stdin kept open). Coordinator /readiness must say ready, and a chat request must go
the real P/D path: D engine -> coordinator metaserver -> P engine."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import model_fixture
from conformance_cluster import http

PREFIX = f"pymotor-conf-smoke-{os.getpid()}"

USER_CONFIG = {
    "version": "v2.0",
    "motor_deploy_config": {"p_instances_num": 1, "d_instances_num": 1, "single_p_instance_pod_num": 1,
                            "single_d_instance_pod_num": 1, "p_pod_npu_num": 1, "d_pod_npu_num": 1,
                            "job_id": "smoke", "hardware_type": "800I_A2"},
    "motor_controller_config": {"fault_tolerance_config": {"enable_fault_tolerance": False},
                                "logging_config": {"host_log_dir": "/tmp/log"}},
    "motor_coordinator_config": {"inference_workers_config": {"num_workers": 1},
                                 "logging_config": {"host_log_dir": "/tmp/log"}},
    "motor_nodemanger_config": {"logging_config": {"host_log_dir": "/tmp/log"}},
    "motor_engine_prefill_config": {"engine_type": "vllm", "engine_config": {
        "served_model_name": "smoke-model", "model": "/model", "data_parallel_size": 1, "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1, "block_size": 16}},
    "motor_engine_decode_config": {"engine_type": "vllm", "engine_config": {
        "served_model_name": "smoke-model", "model": "/model", "data_parallel_size": 1, "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1, "block_size": 16}},
}


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check:
        assert result.returncode == 0, f"docker {' '.join(args)}: {result.stderr}"
    return result


def run(name: str, image: str, cfg: Path, role: str, module: str, job: str = "") -> None:
    # POD_IP is the container's own address: every PyMotor process binds it, not 0.0.0.0.
    docker("run", "-d", "-i", "--name", f"{PREFIX}-{name}", "--network", PREFIX, "--network-alias", name,
           "-v", f"{cfg}:/cfg:ro", "-v", f"{cfg / 'model'}:/model:ro",
           "-e", f"ROLE={role}", "-e", f"JOB_NAME={job}", "-e", "USER_CONFIG_PATH=/cfg/user_config.json",
           "-e", "CONTROLLER_SERVICE=ctl", "-e", "COORDINATOR_SERVICE=coord", image,
           "bash", "-c", f"export POD_IP=$(hostname -i); exec python3 -m {module}")


def coordinator_url() -> str:
    out = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", f"{PREFIX}-coord")
    return f"http://{out.stdout.strip()}"


def logs(name: str) -> str:
    result = docker("logs", f"{PREFIX}-{name}", check=False)
    return result.stdout + result.stderr


def test_real_control_plane_serves_through_pd(conformance_image, tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "user_config.json").write_text(json.dumps(USER_CONFIG))
    model_fixture.write_model_dir(cfg / "model")
    for path in [cfg, *cfg.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    docker("network", "create", PREFIX)
    started = time.monotonic()
    try:
        run("ctl", conformance_image, cfg, "controller", "motor.controller.main")
        run("coord", conformance_image, cfg, "coordinator", "motor.coordinator.main")
        # As the collection's deploy does (decide.engine_step_waits): the engines start once the coordinator
        # answers. Upstream's controller pushes an assembled instance to the coordinator once; with the fake engine
        # ready in a second, a decode instance pushed while the coordinator still starts is lost for good (its
        # /readiness says ready with the prefill alone, so the controller never sends the full set again).
        base = coordinator_url()
        deadline = time.monotonic() + 120
        while http(f"{base}:1026/readiness", timeout=5)[0] == 0:
            assert time.monotonic() < deadline, f"the coordinator never answered\n{logs('coord')[-3000:]}"
            time.sleep(0.5)
        run("p0", conformance_image, cfg, "prefill", "motor.node_manager.main", job="smoke-p0")
        run("d0", conformance_image, cfg, "decode", "motor.node_manager.main", job="smoke-d0")
        ready = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, answer = http(f"{base}:1026/readiness")
            ready = answer if isinstance(answer, dict) else {"answer": answer}
            if status == 200 and ready.get("ready") and ready.get("message", "").lower().find("only") < 0:
                break
            time.sleep(2)
        assert ready.get("ready") is True, f"coordinator not ready: {ready}\n{logs('coord')[-3000:]}\n" \
                                           f"{logs('ctl')[-3000:]}\n{logs('p0')[-2000:]}"
        time_to_ready = time.monotonic() - started
        # Upstream's dispatch (router/dispatch.py) serves a PD job as single-node while its own instance view has
        # the P but not yet the D instance, and that view can lag the /readiness answer on a loaded machine: the
        # P/D path must be taken within 60 s, and from then on.
        deadline, fallbacks = time.monotonic() + 60, 0
        while True:
            status, answer = http(f"{base}:1025/v1/chat/completions", {
                "model": "smoke-model", "messages": [{"role": "user", "content": "hello real coordinator"}],
                "max_tokens": 8}, timeout=60)
            assert status == 200, f"{answer}\n{logs('coord')[-3000:]}\n{logs('d0')[-2000:]}"
            content = answer["choices"][0]["message"]["content"]
            if not content.startswith("conformance prefill") or time.monotonic() > deadline:
                break
            fallbacks += 1
            time.sleep(2)
        assert content.startswith("conformance decode"), f"{answer} after {fallbacks} single-node fallback(s)\n" \
                                                         f"{logs('coord')[-4000:]}\n{logs('ctl')[-4000:]}\n" \
                                                         f"{logs('d0')[-2000:]}"
        assert "metaserver hand-off answered" in logs("d0"), logs("d0")[-3000:]
        prefill_log = logs("p0")
        assert '"max_tokens": 1' in prefill_log and '"do_remote_decode": true' in prefill_log, prefill_log[-3000:]
        print(f"real control plane ready in {time_to_ready:.1f} s ({fallbacks} single-node fallback(s) before P/D)")
    finally:
        for name in ("ctl", "coord", "p0", "d0"):
            docker("rm", "-f", f"{PREFIX}-{name}", check=False)
        docker("network", "rm", PREFIX, check=False)
