#!/usr/bin/env bash
# `make demo` (deploy part): the seed's PD-separation config (examples/seed_pd_separation) deployed with
# playbooks/deploy.yml onto a simulated cluster (2 Atlas 800I A2 hosts + a control host, tests/sim/simctl.py),
# then playbooks/verify.yml: requests sharing long prefixes through the coordinator, and where KV-cache affinity
# routed them, read from the conductor's /query and the engines' prefix-cache counters.
#
# Env: MOTOR_DEMO_PREFIX (default pymotor-demo), MOTOR_DEMO_CONFIG_DIR (default examples/seed_pd_separation),
#      MOTOR_DEMO_IMAGE_BUILD=playbook|fast (default playbook: playbooks/build_image.yml builds the conductor-patched
#      image from the PyMotor stand-in with the offline fixtures; fast: the prebuilt fixture conductor binary),
#      MOTOR_DEMO_ASSERT=1 (CI: fail unless every repeated prefix was a KV-cache hit on the instance holding it),
#      MOTOR_DEMO_TEARDOWN=1 (CI: remove the simulated cluster at the end, also when a step failed).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export PATH="$repo/.venv/bin:$PATH" ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_PIPELINING=true
prefix="${MOTOR_DEMO_PREFIX:-pymotor-demo}"
config_dir="${MOTOR_DEMO_CONFIG_DIR:-examples/seed_pd_separation}"
build_mode="${MOTOR_DEMO_IMAGE_BUILD:-playbook}"
state="$repo/.build/demo-deploy"
inventory="$state/inventory.yml"
image="local/pymotor-demo:latest-conductor"
mkdir -p "$state"
if [ "${MOTOR_DEMO_TEARDOWN:-0}" = 1 ]; then
  trap 'echo "== Tearing down the simulated cluster"; python tests/sim/simctl.py down --prefix "$prefix"' EXIT
fi

echo "== Simulated cluster: 2 x 800I_A2 + control host (prefix $prefix)"
python tests/sim/simctl.py up --count 2 --hardware 800I_A2 --control --prefix "$prefix" --inventory "$inventory"

echo "== Image: PyMotor stand-in + mooncake_conductor -> $image on every host"
base=$(python tests/sim/motor_image/build.py | tail -n 1)
if [ "$build_mode" = fast ]; then
  python extensions/molecule/pd_separation/standin_image.py "$image" >/dev/null
  python tests/sim/simctl.py load-image --prefix "$prefix" "$image"
else
  go_version=1.23.9
  go_tarball=$(GO_VERSION=$go_version PYTHON="$repo/.venv/bin/python" tests/fixtures/mooncake/make_go_tarball.sh "$repo/.build" | tail -n 1)
  tests/fixtures/mooncake/make_repo.sh "$state/mooncake" >/dev/null
  ansible-playbook -i "$inventory" playbooks/build_image.yml \
    -e motor_build_host=localhost -e motor_base_image="$base" -e motor_image="$image" \
    -e conductor_image_mooncake_repo="$state/mooncake" -e conductor_image_go_version=$go_version \
    -e conductor_image_go_tarball="$go_tarball" -e conductor_image_go_sha256="$(cut -d' ' -f1 "$go_tarball.sha256")" \
    -e conductor_image_goproxy=off -e conductor_image_goflags=-mod=mod \
    -e conductor_image_work_dir="$state/work" -e conductor_image_build_container="$prefix-build" \
    -e conductor_image_candidate_image="local/pymotor-demo-candidate:build" \
    -e image_distribution_cache_dir="$state/cache" -e image_distribution_controller_dir="$state/controller-cache"
fi

echo "== Deploying $config_dir"
ansible-playbook -i "$inventory" playbooks/deploy.yml -e motor_config_dir="$config_dir" -e motor_image="$image" \
  -e motor_plan_output="$state/plan.json"

echo "== KV-cache affinity: requests sharing long prefixes through the coordinator (playbooks/verify.yml)"
# Judged only from what a real deployment exposes: the prefill engine's /tokenize, the KV conductor's /query before
# and after the requests, and the engines' vllm:prefix_cache_* counters (which instance served the repeats).
verify_fail=false
[ "${MOTOR_DEMO_ASSERT:-0}" = 1 ] && verify_fail=true
ansible-playbook -i "$inventory" playbooks/verify.yml -e motor_config_dir="$config_dir" -e motor_image="$image" \
  -e motor_verify_report="$state/verify.json" -e motor_operations_fail=$verify_fail
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

[ "${MOTOR_DEMO_TEARDOWN:-0}" = 1 ] && exit 0
cat <<EOT

The cluster keeps running. Try it:
  curl -s $(python -c "import json;print(json.load(open('$state/plan.json'))['coordinator']['url'])")/v1/chat/completions \\
    -H 'Content-Type: application/json' -d '{"model":"qwen3-8B","messages":[{"role":"user","content":"hi"}]}'
Re-deploy (changes nothing): ansible-playbook -i $inventory playbooks/deploy.yml -e motor_config_dir=$config_dir -e motor_image=$image
Tear it down:               .venv/bin/python tests/sim/simctl.py down --prefix $prefix
EOT
