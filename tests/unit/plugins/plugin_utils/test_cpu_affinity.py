# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""CPU/NUMA placement of engines (reconcile/cpu_affinity.py): the CPU Affinity column of a real ``npu-smi info -t
topo`` dump, the cpuset of each engine from its NPUs (motor_service_engine_cpu_affinity=npu), the warnings that leave
an engine without one, and the way through the precheck, the config hash and the create body."""

from __future__ import annotations

import json

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_start
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_host_probe import parse_topo
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.cpu_affinity import cpu_list, cpu_set, engine_cpusets
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import precheck
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.precheck import judge_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.runtime import runtime_options

from .test_motor_precheck import DEFAULTS, HOSTS, SEED, healthy_probe


@pytest.fixture(name="plan", scope="module")
def seed_plan():
    user = json.loads((SEED / "user_config.json").read_text())
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


# npu-smi info -t topo of an 8 x 910B3 Atlas 800I A2 (ms-swift's "NPU support" guide), trimmed Legend
A2_TOPO = """\t   NPU0       NPU1       NPU2       NPU3       NPU4       NPU5       NPU6       NPU7       CPU Affinity
NPU0       X          HCCS       HCCS       HCCS       HCCS       HCCS       HCCS       HCCS       144-167
NPU1       HCCS       X          HCCS       HCCS       HCCS       HCCS       HCCS       HCCS       144-167
NPU2       HCCS       HCCS       X          HCCS       HCCS       HCCS       HCCS       HCCS       96-119
NPU3       HCCS       HCCS       HCCS       X          HCCS       HCCS       HCCS       HCCS       96-119
NPU4       HCCS       HCCS       HCCS       HCCS       X          HCCS       HCCS       HCCS       0-23
NPU5       HCCS       HCCS       HCCS       HCCS       HCCS       X          HCCS       HCCS       0-23
NPU6       HCCS       HCCS       HCCS       HCCS       HCCS       HCCS       X          HCCS       48-71
NPU7       HCCS       HCCS       HCCS       HCCS       HCCS       HCCS       HCCS       X          48-71

Legend:

  X    = Self
  HCCS = Connection traversing HCCS.
"""


def topo_probe(online="0-191"):
    return {"npu_topo": {"cpus": parse_topo(A2_TOPO), "online": online, "error": ""}}


def test_the_real_topo_dump_is_parsed_and_cpu_lists_round_trip():
    cpus = parse_topo(A2_TOPO)
    assert cpus == {"0": "144-167", "1": "144-167", "2": "96-119", "3": "96-119", "4": "0-23", "5": "0-23",
                    "6": "48-71", "7": "48-71"}
    assert parse_topo("NPU0  X  1-2\n") == {}  # no CPU Affinity column: not a topo answer
    assert cpu_list(cpu_set("96-119,144-167,3")) == "3,96-119,144-167"
    assert cpu_set("") == set() and cpu_list(set()) == ""


def test_each_engine_gets_the_cpus_of_its_npus_only_with_npu_mode():
    engines = [{"name": "p0-0", "npu_ids": [0, 1, 2, 3]}, {"name": "d0-0", "npu_ids": [4]}, {"name": "ctl", "npu_ids": []}]
    assert engine_cpusets(engines, topo_probe(), "npu") == ({"p0-0": "96-119,144-167", "d0-0": "0-23"}, [])
    assert engine_cpusets(engines, topo_probe(), "none") == ({}, [])


def test_an_unlisted_npu_or_offline_cpus_leave_that_engine_without_a_cpuset_with_a_warning():
    engines = [{"name": "p0-0", "npu_ids": [0]}, {"name": "d0-0", "npu_ids": [8]}]
    sets, found = engine_cpusets(engines, topo_probe(online="0-159"), "npu")
    assert sets == {}
    assert [(c, w) for c, w, dummy in found] == [
        ("CPU affinity of p0-0", "CPUs 160-167 of its NPUs are not online (online: 0-159); no cpuset"),
        ("CPU affinity of d0-0", "npu-smi info -t topo lists no CPU Affinity for NPU 8; no cpuset")]
    sets, found = engine_cpusets(engines[:1], {"npu_topo": {"cpus": {}, "error": "npu-smi not found"}}, "npu")
    assert sets == {} and found[0][1] == "npu-smi not found; no cpuset"


def test_the_cpuset_reaches_the_spec_hash_and_create_body_of_engines_only(plan):
    probes = {h: dict(healthy_probe(plan, h), **topo_probe()) for h in ("h1", "ctl")}
    off = precheck(plan, ["h1", "ctl"], probes, DEFAULTS, {})
    on = precheck(plan, ["h1", "ctl"], probes, dict(DEFAULTS, motor_service_engine_cpu_affinity="npu"), {})
    assert off["problems"] == on["problems"] == [] and on["warnings"] == off["warnings"]
    engines = {c["name"]: c for c in plan["containers"] if c["npu_ids"]}
    settings = judge_hosts(plan, ["h1", "ctl"], probes, dict(DEFAULTS, motor_service_engine_cpu_affinity="npu"),
                           {})["settings"]["h1"]
    assert set(settings["cpusets"]) == set(engines)
    assert "cpusets" not in judge_hosts(plan, ["h1", "ctl"], probes, DEFAULTS, {})["settings"]["h1"]
    for name, cont in engines.items():
        want = cpu_list(set().union(*(cpu_set(parse_topo(A2_TOPO)[str(n)]) for n in cont["npu_ids"])))
        assert settings["cpusets"][name] == want
        assert on["parts"][name]["shared"] != off["parts"][name]["shared"]  # turning it on recreates the engine
        spec = runtime_options(cont, settings)
        assert spec["cpuset_cpus"] == want
        assert motor_start.create_body(dict(spec, name=name, image="i"))["HostConfig"]["CpusetCpus"] == want
        assert motor_start.planned(dict(spec, image="i"))["cpuset_cpus"] == want
    control = next(c for c in plan["containers"] if not c["npu_ids"])
    assert "cpuset_cpus" not in runtime_options(control, settings)
    assert "CpusetCpus" not in motor_start.create_body({"name": "x", "image": "i"})["HostConfig"]
