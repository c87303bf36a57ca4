#!/bin/bash
# Container entrypoint, as in PyMotor: docker run ... bash -c "source \$CONFIGMAP_PATH/boot.sh".
# boot.sh -> common.sh -> the role script, all read from CONFIGMAP_PATH (the deployer copies these
# scripts out of the image into that host directory and injects the set_*_env functions into them).
set -euo pipefail

echo "[boot] ROLE=${ROLE:-} JOB_NAME=${JOB_NAME:-} POD_IP=${POD_IP:-} HOST_IP=${HOST_IP:-}" \
  "CONFIGMAP_PATH=${CONFIGMAP_PATH:-} CONFIG_PATH=${CONFIG_PATH:-}"
: "${CONFIGMAP_PATH:?CONFIGMAP_PATH must point at the directory holding boot.sh and user_config.json}"
: "${ROLE:?ROLE must be set (SINGLE_CONTAINER, controller, coordinator, prefill, decode, union, kv_pool, kv_conductor, mf_store)}"
export CONFIG_PATH="${CONFIG_PATH:-/usr/local/Ascend/pyMotor/conf}"

# As PyMotor's boot.sh: common.sh and the role script are sourced from the directory of boot.sh itself
# ($SCRIPT_DIR, the config dir): role scripts must sit flat next to it, never under roles/.
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

case "$ROLE" in
  SINGLE_CONTAINER) role_script=all_combine_in_single_container.sh ;;
  controller | coordinator | kv_pool | kv_conductor | mf_store) role_script=$ROLE.sh ;;
  prefill | decode | union | encode) role_script=engine.sh ;;
  *)
    echo "[boot] ERROR: unknown ROLE '$ROLE'" >&2
    exit 1
    ;;
esac

# shellcheck source=/dev/null
source "$SCRIPT_DIR/common.sh"
# PyMotor's boot.sh sources common.sh (set_common_env, the user_config copy) before it looks for the role script:
# the same order here, and the same end when the role script is not next to boot.sh (exit 1).
if [ ! -f "$SCRIPT_DIR/$role_script" ]; then
  echo "[boot] ERROR: $SCRIPT_DIR/$role_script: No such file or directory (role scripts sit flat next to boot.sh)" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "$SCRIPT_DIR/$role_script"
