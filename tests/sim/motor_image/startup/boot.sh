#!/bin/bash
# Container entrypoint, as in PyMotor: docker run ... bash -c "source \$CONFIGMAP_PATH/boot.sh".
# boot.sh -> common.sh -> the role script, all read from CONFIGMAP_PATH (the deployer copies these
# scripts out of the image into that host directory and injects the set_*_env functions into them).
# Role scripts may sit flat in CONFIGMAP_PATH (PyMotor's ConfigMap layout) or under roles/.
set -euo pipefail

echo "[boot] ROLE=${ROLE:-} JOB_NAME=${JOB_NAME:-} POD_IP=${POD_IP:-} HOST_IP=${HOST_IP:-}" \
  "CONFIGMAP_PATH=${CONFIGMAP_PATH:-} CONFIG_PATH=${CONFIG_PATH:-}"
: "${CONFIGMAP_PATH:?CONFIGMAP_PATH must point at the directory holding boot.sh and user_config.json}"
: "${ROLE:?ROLE must be set (controller, coordinator, prefill, decode, union, kv_pool, kv_conductor)}"
export CONFIG_PATH="${CONFIG_PATH:-/usr/local/Ascend/pyMotor/conf}"

# startup_script NAME: path of a startup script in the config dir, flat or under roles/.
startup_script() {
  local name=$1
  for candidate in "$CONFIGMAP_PATH/$name" "$CONFIGMAP_PATH/roles/$name"; do
    if [ -f "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  echo "[boot] ERROR: $name not found in $CONFIGMAP_PATH (nor in $CONFIGMAP_PATH/roles)" >&2
  return 1
}

case "$ROLE" in
  controller | coordinator | kv_pool | kv_conductor) role_script=$ROLE.sh ;;
  prefill | decode | union | encode) role_script=engine.sh ;;
  *)
    echo "[boot] ERROR: unknown ROLE '$ROLE'" >&2
    exit 1
    ;;
esac

common_sh=$(startup_script common.sh)
role_sh=$(startup_script "$role_script")
# shellcheck source=/dev/null
source "$common_sh"
# shellcheck source=/dev/null
source "$role_sh"
