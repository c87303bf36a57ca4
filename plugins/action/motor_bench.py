# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The benchmark's entry point, on the controller: replay a workload against the deployed job (``reports`` not
given) or write the comparison of several runs as JSON and HTML (``reports`` given). Progress lines go to the
console while it runs (plugin_utils/bench)."""

from __future__ import annotations

import json
import os
import uuid

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.pymotor.ascend.plugins.plugin_utils.bench import html, replay, report, workload
from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.secrets import api_key_header
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.targets import (
    controller_targets, controller_tls_variables, service_targets)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import plan_user_config

display = Display()


def bench_targets(plan, api_key=None, tls_vars=None):
    """The coordinator's /v1/completions (with the header of ``api_key``, api_key_config's name and prefix), every
    prefill engine's /metrics and the first one's /tokenize; their TLS files the controller's (``tls_vars``: the
    motor_tls_* variables, targets.controller_tls)."""
    targets = service_targets(plan)
    inference = dict(targets["inference"], url=targets["inference"]["url"].replace("/chat/completions", "/completions"),
                     headers=api_key_header(targets["api_key"], api_key))
    if not targets["metrics"] or targets["tokenize"] is None:
        raise AnsibleActionFail("the job has no KV-event publishing prefill engine: the benchmark reads the prefix-cache "
                                "counters of the prefill engines the plan lists with kv_events (vLLM with kv-events-config)")
    return controller_targets({"inference": inference, "metrics": targets["metrics"], "tokenize": targets["tokenize"]},
                              tls_vars or {})


def engine_settings(plan):
    """The stand-in engines' performance knobs (``MOTOR_SIM_*``) and ``VLLM_SERVER_DEV_MODE`` the job's prefill
    engines get from env.json, so a report of simulated engines says so (tests/sim/motor_image/motor_sim/perf.py)."""
    out = {}
    for container in plan.get("containers") or []:
        if container.get("role") not in ("prefill", "union"):
            continue
        for values in (container.get("shell_env") or {}).values():
            out.update({k: v for k, v in (values or {}).items()
                        if k.startswith("MOTOR_SIM_") or k == "VLLM_SERVER_DEV_MODE"})
        break
    if any(k.startswith("MOTOR_SIM_") for k in out):
        out["note"] = "stand-in engines: performance model of tests/sim/motor_image/motor_sim/perf.py, not NPU numbers"
    return out


def run_salt(label, nonce=None):
    """The salt of one run's prompts: its label and a fresh nonce, so no block of an earlier run (of any label, on any
    engine) matches them and every run starts cold whether or not the prefix caches could be emptied."""
    return "%s/%s" % (label, nonce or uuid.uuid4().hex[:12])


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_bench (documentation in plugins/modules/motor_bench.py)."""

    ARGUMENT_SPEC = {
        "plan": {"type": "dict"},
        "model": {"type": "str"},
        "label": {"type": "str"},
        "trace": {"type": "path"},
        "requests": {"type": "int", "default": 0},
        "time_scale": {"type": "float", "default": 1.0},
        "cold_start": {"type": "bool", "default": True},
        "timeout": {"type": "float", "default": 600.0},
        "scheduler": {"type": "dict", "default": {}},
        "reports": {"type": "list", "elements": "dict"},
        "dest": {"type": "path"},
    }
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        self._task_vars = task_vars
        if args["reports"] is not None:
            return self._write(args)
        if not args["plan"] or not args["model"]:
            raise AnsibleActionFail("motor_bench: plan and model are required to run")
        if self._play_context.check_mode:
            return {"skipped": True, "msg": "check mode: no request sent"}
        return self._run(args)

    def _run(self, args):
        plan, n = args["plan"], args["requests"]
        try:
            if args["trace"]:
                with open(args["trace"], encoding="utf-8") as handle:
                    requests = workload.parse_trace(handle, n or None)
                source = {"trace": args["trace"]}
            else:
                requests = workload.shared_prefix_workload(requests=n or 200)
                source = {"workload": "built-in shared prefix (8 system prompts of 4 blocks, 2 own blocks each)"}
            # motor_api_key straight from the variables (Vault-friendly): never a task argument, so never in -vvv
            targets = bench_targets(plan, self._templar.template(self._task_vars.get("motor_api_key") or ""),
                                    controller_tls_variables(self._task_vars, self._templar.template))
            calibration = workload.calibrate(replay.tokenizer_count(targets["tokenize"]))
        except (OSError, workload.WorkloadError) as exc:
            raise AnsibleActionFail("motor_bench: %s" % exc)
        # vLLM serves POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1 (a development route), so a site's
        # engines answer 404; the run's fresh salt makes it cold anyway: the answers go to the report, not a warning
        cold = replay.reset_prefix_caches(targets["metrics"]) if args["cold_start"] else {}
        if cold and any(v != "ok" for v in cold.values()):
            display.vv("motor_bench: prefix caches not emptied (%s); the run's prompts carry a fresh salt, so no "
                       "earlier run's blocks match them" % "; ".join("%s: %s" % kv for kv in cold.items()))
        scheduler = dict((plan_user_config(plan).get("motor_coordinator_config") or {}).get("scheduler_config") or {})
        scheduler.update(args["scheduler"])
        label = args["label"] or " ".join("%s=%s" % kv for kv in sorted((args["scheduler"] or {
            "scheduler_type": scheduler.get("scheduler_type", "load_balance")}).items()))
        run = replay.replay(targets, requests, calibration, args["model"], label, args["time_scale"], salt=run_salt(label),
                            timeout=args["timeout"], progress=display.display)
        run.update(source, scheduler=scheduler, ideal_hit_ratio=workload.ideal_hit_ratio(requests),
                   time_scale=args["time_scale"], engine_model=engine_settings(plan),
                   cold_start=("reset_prefix_cache: " + ", ".join("%s %s" % kv for kv in sorted(cold.items())))
                   if cold else "not asked")
        return {"report": report.run_report(run)}

    def _write(self, args):
        if not args["dest"]:
            raise AnsibleActionFail("motor_bench: dest (the JSON report's path) is required with reports")
        comp = report.comparison(args["reports"])
        path = os.path.realpath(args["dest"])
        page = os.path.splitext(path)[0] + ".html"
        result = {"changed": True, "dest": path, "html": page, "table": report.summary_table(comp).splitlines(),
                  "summary": comp["summary"]}
        if self._play_context.check_mode:
            return result
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            json.dump(comp, out, indent=2, sort_keys=True)
            out.write("\n")
        with open(page, "w", encoding="utf-8") as out:
            out.write(html.render(comp))
        return result
