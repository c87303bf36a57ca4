#!/usr/bin/env bash
# `make demo`: the main job on the embedded default. Today: validate the seed PD-separation config
# (user's document), print its normalized form, then print the deployment plan on the example inventory.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"
config_dir="${MOTOR_DEMO_CONFIG_DIR:-examples/seed_pd_separation}"
mkdir -p .build/demo

echo "== Validating $config_dir and showing the normalized configuration"
ansible-playbook playbooks/validate.yml -e motor_config_dir="$config_dir" -e motor_show_normalized=true

echo "== Planning the deployment on inventories/example/hosts.yml (touches no host)"
ansible-playbook -i inventories/example/hosts.yml playbooks/plan.yml \
  -e motor_config_dir="$config_dir" -e motor_plan_output=.build/demo/plan.json

echo "Plan written to .build/demo/plan.json"
