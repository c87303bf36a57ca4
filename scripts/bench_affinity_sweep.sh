#!/usr/bin/env bash
# On demand (not in make test; ~25 min on 2 cores): the issue-35 "done when" run. The conformance cluster (real
# PyMotor coordinator and Mooncake conductor, fake engines with the stated performance model) with 4 prefill
# instances (x DP 1, one per simulated engine host), the first 1,000 requests of ../shared/traces' Mooncake trace at
# MOTOR_BENCH_TIME_SCALE (default 0.5), every scheduler setting below through one motor_bench_compare, then the table
# of all of them (markdown) from the report. Evidence in tests/output/conformance-benchmark.{json,html,log,png}.
# Env: MOTOR_BENCH_COMPARE (JSON list, replaces the settings), MOTOR_SIM_PREFIX_SUFFIX (own cluster names).
set -euo pipefail
cd "$(dirname "$0")/.."
export MOTOR_BENCH_P_INSTANCES="${MOTOR_BENCH_P_INSTANCES:-4}" MOTOR_REQUIRE_DOCKER=1
# (the default list is assigned when the variable is empty: a "}" inside ${VAR:-...} would end the expansion)
if [ -z "${MOTOR_BENCH_COMPARE:-}" ]; then
  MOTOR_BENCH_COMPARE='[
  {"scheduler_type": "load_balance"},
  {"scheduler_type": "kv_cache_affinity"},
  {"scheduler_type": "kv_cache_affinity", "kv_affinity_load_weight": 0.3},
  {"scheduler_type": "kv_cache_affinity", "kv_affinity_overlap_credit": 2.0},
  {"scheduler_type": "kv_cache_affinity", "kv_affinity_prefill_load_scale": 2.0},
  {"scheduler_type": "kv_cache_affinity", "kv_affinity_mode": "load_gated"},
  {"scheduler_type": "kv_cache_affinity", "kv_affinity_mode": "load_gated", "kv_affinity_load_gate_topn": 3}]'
fi
export MOTOR_BENCH_COMPARE
status=0
.venv/bin/pytest -q -rxXs --import-mode=importlib tests/conformance/test_benchmark.py || status=$?
.venv/bin/python - tests/output/conformance-benchmark.json <<'PY'
import json
import sys

runs = json.load(open(sys.argv[1]))["runs"]
base = runs[0]["ttft_p50_s"]
print("| setting | hit ratio | ideal | hit / ideal | TTFT p50 s | TTFT p90 s | p50 / first | max share / mean | failed |")
print("|---|---|---|---|---|---|---|---|---|")
for r in runs:
    setting = ", ".join(f"{k}={v}" for k, v in r["scheduler"].items())
    print(f"| {setting} | {r['hit_ratio']:.3f} | {r['ideal_hit_ratio']:.3f} | {r['hit_over_ideal']:.2f} | "
          f"{r['ttft_p50_s']:.3f} | {r['ttft_p90_s']:.3f} | {r['ttft_p50_s'] / base:.2f} | "
          f"{r['max_share_over_mean']:.2f} | {r['failed']} of {r['requests']} |")
PY
exit $status
