#!/usr/bin/env bash
# `make demo` (deploy part): the seed's PD-separation config (examples/seed_pd_separation) deployed with
# playbooks/deploy.yml onto a simulated cluster (2 Atlas 800I A2 hosts + a control host, tests/sim/simctl.py),
# then a few chat requests through the coordinator showing where KV-cache affinity routed them.
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

echo "== Requests through the coordinator (KV-cache affinity)"
python - "$state/plan.json" <<'PY'
import json
import os
import sys

import requests

plan = json.load(open(sys.argv[1]))
url = plan["coordinator"]["url"] + "/v1/chat/completions"
model = plan["containers"][0]["env"]["MODEL_NAME"]
support = "You are the support assistant of an Ascend cluster. " * 22
logs = "Summarise the following maintenance log in two sentences. " * 20
requests_to_send = [
    ("support prompt, question 1", support, "How do I check NPU health?"),
    ("support prompt, question 2", support, "And how do I reset one?"),
    ("log prompt, entry 1", logs, "Log 1: fan replaced."),
    ("log prompt, entry 2", logs, "Log 2: firmware upgraded."),
    ("support prompt, question 3", support, "Which driver version do I need?"),
]
print(f"coordinator: {url}")
print(f"{'request':28} {'prefill instance':18} {'dp':3} {'route':18} {'cached/prompt tokens':>21}  decode")
first_seen = {}
misses = []
for label, system, question in requests_to_send:
    body = {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}
    resp = requests.post(url, json=body, timeout=60)
    resp.raise_for_status()
    sim = resp.json().get("motor_sim", {})
    print(f"{label:28} {resp.headers.get('X-Motor-Prefill-Instance', '?'):18} {sim.get('prefill_dp_rank', '?')!s:3} "
          f"{sim.get('route', '?'):18} {sim.get('matched_tokens', 0):>10}/{sim.get('prompt_tokens', 0):<10}  "
          f"{sim.get('decode_instance', '?')}")
    target = (resp.headers.get("X-Motor-Prefill-Instance"), sim.get("prefill_dp_rank"))
    if system in first_seen and (target != first_seen[system] or not sim.get("matched_tokens")):
        misses.append(f"{label}: went to {target} with {sim.get('matched_tokens', 0)} cached tokens, "
                      f"its prefix is held by {first_seen[system]}")
    first_seen.setdefault(system, target)
print("Requests sharing a long prefix go to the prefill instance and DP rank that already holds its KV blocks.")
if os.environ.get("MOTOR_DEMO_ASSERT") == "1":
    if misses:
        sys.exit("demo: KV-cache affinity did not route the repeated prefixes:\n  " + "\n  ".join(misses))
    print(f"demo: every repeated prefix was a KV-cache hit ({len(requests_to_send) - len(first_seen)} of "
          f"{len(requests_to_send)} requests)")
PY

[ "${MOTOR_DEMO_TEARDOWN:-0}" = 1 ] && exit 0
cat <<EOT

The cluster keeps running. Try it:
  curl -s $(python -c "import json;print(json.load(open('$state/plan.json'))['coordinator']['url'])")/v1/chat/completions \\
    -H 'Content-Type: application/json' -d '{"model":"qwen3-8B","messages":[{"role":"user","content":"hi"}]}'
Re-deploy (changes nothing): ansible-playbook -i $inventory playbooks/deploy.yml -e motor_config_dir=$config_dir -e motor_image=$image
Tear it down:               .venv/bin/python tests/sim/simctl.py down --prefix $prefix
EOT
