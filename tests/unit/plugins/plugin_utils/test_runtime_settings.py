# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Runtime settings as upstream sets them (reconcile/runtime.py): device logs, core dumps, SYS_NICE for NUMA binding,
seccomp, memory limit, /dev/infiniband with an rdma KV pool; the create body the host sends to Docker."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_start
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.diff import reconcile
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import shared_spec
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.specs import container_spec

from .test_motor_reconcile import SETTINGS, make_plan, parts_of

RUNTIME = {"npu_log_dir": "/var/log/npu", "coredump_dir": "/var/coredump", "engine_cap_add": ["SYS_NICE"],
           "seccomp_profile": "", "engine_memory": "256g"}


def specs(plan, settings):
    result = reconcile(plan, parts_of(plan), {})
    return {c["role"]: container_spec(c, result, settings) for c in plan["containers"]}


def test_engines_get_device_logs_core_dumps_sys_nice_and_memory_control_plane_core_dumps_only():
    by_role = specs(make_plan(), dict(SETTINGS, **RUNTIME))
    engine, controller = by_role["prefill"], by_role["controller"]
    assert "/var/log/npu:/usr/slog:rw" in engine["volumes"] and "/var/coredump:/var/coredump:rw" in engine["volumes"]
    assert engine["cap_add"] == ["SYS_NICE"] and engine["memory"] == "256g" and "security_opt" not in engine
    assert "/var/coredump:/var/coredump:rw" in controller["volumes"]
    assert not any(v.endswith(":/usr/slog:rw") for v in controller["volumes"])
    assert "cap_add" not in controller and "memory" not in controller
    body = motor_start.create_body(engine)["HostConfig"]
    assert body["CapAdd"] == ["SYS_NICE"] and body["Memory"] == 256 * 1024 ** 3 and body["Privileged"] is False
    assert "SecurityOpt" not in body  # Docker's default seccomp profile
    assert motor_start.planned(engine)["cap_add"] == ["SYS_NICE"]


def test_unconfined_seccomp_is_a_choice_and_empty_settings_change_nothing():
    by_role = specs(make_plan(), dict(SETTINGS, **dict(RUNTIME, seccomp_profile="unconfined")))
    assert motor_start.create_body(by_role["decode"])["HostConfig"]["SecurityOpt"] == ["seccomp=unconfined"]
    plain = specs(make_plan(), SETTINGS)
    assert all(k not in s for s in plain.values() for k in ("cap_add", "security_opt", "memory"))
    assert not any(":/usr/slog:" in v or ":/var/coredump:" in v for s in plain.values() for v in s["volumes"])
    # the shared hash part stays what it was for a host without these settings (no recreation for nothing)
    base = {"image": "i", "command": [], "restart_policy": "no", "log_root": "/l", "log_max_size": "1m",
            "log_max_file": "1", "env_functions": {}, "extra_volumes": []}
    assert "runtime" not in shared_spec(base, [], make_plan())
    assert shared_spec(dict(base, **RUNTIME), [], make_plan())["runtime"]["engine_memory"] == "256g"


def test_rdma_kv_pool_gives_engines_the_infiniband_devices():
    def rdma(user):
        user["kv_cache_pool_config"]["protocol"] = "rdma"

    plan = make_plan(mutate=rdma)
    engines = [c for c in plan["containers"] if c["tier"] == 2]
    assert engines and all("/dev/infiniband:/dev/infiniband:rwm" in c["devices"] for c in engines)
    assert not any("/dev/infiniband:/dev/infiniband:rwm" in c["devices"] for c in make_plan()["containers"])
