#!/usr/bin/env bash
# `make demo`: the main job on the embedded default, the seed PD-separation config (user's document):
# validate it and print its normalized form, print the deployment plan, then deploy it onto a simulated
# Ascend cluster and route a few requests through the coordinator (scripts/demo_deploy.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"
config_dir="${MOTOR_DEMO_CONFIG_DIR:-examples/seed_pd_separation}"
mkdir -p .build/demo

echo "== Validating $config_dir and showing the normalized configuration"
ansible-playbook playbooks/validate.yml -e motor_config_dir="$config_dir" -e motor_show_normalized=true

echo "== The plan on the example inventory (inventories/example: touches no host)"
ansible-playbook -i inventories/example/hosts.yml playbooks/plan.yml \
  -e motor_config_dir="$config_dir" -e motor_plan_output=.build/demo/plan.json

MOTOR_DEMO_CONFIG_DIR="$config_dir" exec bash scripts/demo_deploy.sh
