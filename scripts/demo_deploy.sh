#!/usr/bin/env bash
# `make demo` (deploy part): the seed's PD-separation config (examples/seed_pd_separation) deployed with
# playbooks/deploy.yml onto a simulated cluster (2 Atlas 800I A2 hosts + a control host, tests/sim/simctl.py),
# then playbooks/verify.yml: requests sharing long prefixes through the coordinator, and where KV-cache affinity
# routed them, read from the conductor's /query and the engines' prefix-cache counters; then the choice:
# playbooks/benchmark.yml replays a slice of the Mooncake trace (../shared/traces, else the built-in shared-prefix
# workload) with load_balance and with kv_cache_affinity and prints hit ratio and TTFT p50 of each (stand-in engines
# with the stated performance model: simulated times, not NPU times). The seed's 1 prefill instance becomes 2
# (motor_user_config_overrides), so there is a choice to make.
#
# Env: MOTOR_DEMO_PREFIX (default pymotor-demo), MOTOR_DEMO_CONFIG_DIR (default examples/seed_pd_separation),
#      MOTOR_DEMO_IMAGE_BUILD=playbook|fast (default playbook: playbooks/build_image.yml builds the conductor-patched
#      image from the PyMotor stand-in with the offline fixtures; fast: the prebuilt fixture conductor binary),
#      MOTOR_DEMO_ASSERT=1 (CI: fail unless every repeated prefix was a KV-cache hit on the instance holding it),
#      MOTOR_DEMO_TEARDOWN=1 (CI: remove the simulated cluster at the end, also when a step failed),
#      MOTOR_DEMO_BENCH_REQUESTS (default 150), MOTOR_DEMO_BENCH_TIME_SCALE (default 1.0), MOTOR_DEMO_BENCH=0 (skip).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export PATH="$repo/.venv/bin:$PATH" ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_PIPELINING=true
prefix="${MOTOR_DEMO_PREFIX:-pymotor-demo}"
config_dir="${MOTOR_DEMO_CONFIG_DIR:-examples/seed_pd_separation}"
build_mode="${MOTOR_DEMO_IMAGE_BUILD:-playbook}"
state="$repo/.build/demo-deploy"
inventory="$state/inventory.yml"
image="local/${prefix}:latest-conductor"
mkdir -p "$state"
# two prefill instances (one per host: each publishes KV events for DP ranks 0-1), so the scheduler has a choice
overrides='{"motor_user_config_overrides": [{"motor_deploy_config": {"p_instances_num": 2}}]}'
if [ "${MOTOR_DEMO_TEARDOWN:-0}" = 1 ]; then
  trap 'echo "== Tearing down the simulated cluster"; python tests/sim/simctl.py down --prefix "$prefix"' EXIT
fi

echo "== Simulated cluster: 2 x 800I_A2 + control host (prefix $prefix)"
python tests/sim/simctl.py up --count 2 --hardware 800I_A2 --control --prefix "$prefix" --inventory "$inventory"

echo "== Image: PyMotor stand-in + mooncake_conductor -> $image on every host"
if [ "$build_mode" = fast ]; then
  python extensions/molecule/pd_separation/standin_image.py "$image" >/dev/null
  python tests/sim/simctl.py load-image --prefix "$prefix" "$image"
else
  scripts/build_standin_conductor.sh "$image" "$state" "$prefix" "$inventory"
fi

echo "== Deploying $config_dir"
ansible-playbook -i "$inventory" playbooks/deploy.yml -e motor_config_dir="$config_dir" -e motor_image="$image" \
  -e "$overrides" -e motor_plan_output="$state/plan.json"

echo "== KV-cache affinity: requests sharing long prefixes through the coordinator (playbooks/verify.yml)"
# Judged only from what a real deployment exposes: the prefill engine's /tokenize, the KV conductor's /query before
# and after the requests, and the engines' vllm:prefix_cache_* counters (which instance served the repeats).
verify_fail=false
[ "${MOTOR_DEMO_ASSERT:-0}" = 1 ] && verify_fail=true
ansible-playbook -i "$inventory" playbooks/verify.yml -e motor_config_dir="$config_dir" -e motor_image="$image" \
  -e "$overrides" -e motor_verify_report="$state/verify.json" -e motor_operations_fail=$verify_fail
python - "$state/verify.json" <<'PY'
import json
import os
import sys

sys.path.insert(0, os.path.join(os.getcwd(), ".build", "collections"))
from ansible_collections.pymotor.ascend.plugins.plugin_utils.operations.affinity import prefix_line  # noqa: E402

report = json.load(open(sys.argv[1]))
affinity = report.get("affinity") or {}
print(f"tokens from: {(affinity.get('tokens') or {}).get('source')}")
for prefix in affinity.get("prefixes") or []:
    print(prefix_line(prefix))
print(f"{affinity.get('on_holder', 0)} of {affinity.get('repeats', 0)} repeats served by the instance holding "
      "their prefix, with a prefix-cache hit.")
if os.environ.get("MOTOR_DEMO_ASSERT") == "1":
    if not affinity.get("passed"):
        sys.exit("demo: KV-cache affinity did not route the repeated prefixes: " + "; ".join(affinity.get("reasons") or []))
    print("demo: every repeated prefix was a KV-cache hit on the instance holding it "
          "(conductor /query and vllm:prefix_cache_hits)")
PY

if [ "${MOTOR_DEMO_BENCH:-1}" = 1 ]; then
  trace="$repo/../shared/traces/mooncake_synthetic_trace.jsonl"
  [ -f "$trace" ] || trace="$repo/../../shared/traces/mooncake_synthetic_trace.jsonl"  # a worktree one level deeper
  trace_arg=()
  if [ -f "$trace" ]; then trace_arg=(-e "motor_bench_trace=$trace"); what="the first"; else what="built-in"; fi
  requests="${MOTOR_DEMO_BENCH_REQUESTS:-150}"
  echo "== The choice: load_balance vs kv_cache_affinity on $what $requests requests ${trace_arg:+of the Mooncake trace }(playbooks/benchmark.yml)"
  ansible-playbook -i "$inventory" playbooks/benchmark.yml -e motor_config_dir="$config_dir" -e motor_image="$image" \
    -e "$overrides" "${trace_arg[@]}" -e motor_bench_requests="$requests" \
    -e motor_bench_time_scale="${MOTOR_DEMO_BENCH_TIME_SCALE:-1.0}" -e motor_bench_report="$state/bench.json" \
    -e '{"motor_bench_compare": [{"scheduler_type": "load_balance"}, {"scheduler_type": "kv_cache_affinity"}]}' \
    >"$state/bench.log" || { tail -n 40 "$state/bench.log"; exit 1; }
  python - "$state/bench.json" <<'PY'
import json
import os
import sys

report = json.load(open(sys.argv[1]))
for run in report["runs"]:
    print(f"{run['scheduler']['scheduler_type']:>18}: hit ratio {run['hit_ratio']:.3f} (ideal {run['ideal_hit_ratio']:.3f}), "
          f"TTFT p50 {run['ttft_p50_s']:.3f} s, {run['failed']} of {run['requests']} failed, "
          f"max prefill share / mean {run['max_share_over_mean']:.2f}")
print(f"report: {sys.argv[1]} and {os.path.splitext(sys.argv[1])[0]}.html (simulated engines: times are not NPU times)")
if os.environ.get("MOTOR_DEMO_ASSERT") == "1" and any(run["failed"] for run in report["runs"]):
    sys.exit("demo: the benchmark had failed requests")
PY
fi

[ "${MOTOR_DEMO_TEARDOWN:-0}" = 1 ] && exit 0
cat <<EOT

The cluster keeps running. Try it:
  curl -s $(python -c "import json;print(json.load(open('$state/plan.json'))['coordinator']['url'])")/v1/chat/completions \\
    -H 'Content-Type: application/json' -d '{"model":"qwen3-8B","messages":[{"role":"user","content":"hi"}]}'
Re-deploy (changes nothing): ansible-playbook -i $inventory playbooks/deploy.yml -e motor_config_dir=$config_dir -e motor_image=$image -e '$overrides'
Tear it down:               .venv/bin/python tests/sim/simctl.py down --prefix $prefix
EOT
