#!/bin/bash
# ROLE=prefill|decode|union|encode: the node manager, which spawns engine_server per DP rank when
# the controller sends the start command. As PyMotor's engine.sh: the node manager runs in the background and
# any non-zero exit of it (255 when it gives up) ends the container with exit 1. (Stand-in only: SIGTERM is
# passed on to it, so docker stop does not wait out its timeout; PyMotor's bash, PID 1, ignores SIGTERM.)
gen_kv_pool_config
set_cann_env
set_mf_store_env
setup_log_dirs
require_env_function "set_${ROLE}_env" engine.sh
echo "[boot] starting node manager for $ROLE (JOB_NAME=${JOB_NAME:-})"
python3 -m motor_sim.node_manager &
nm_pid=$!
trap 'kill -TERM "$nm_pid" 2>/dev/null' TERM INT
echo "pull up $ROLE instance"
exit_code=0
wait "$nm_pid" || exit_code=$?
while kill -0 "$nm_pid" 2>/dev/null; do # wait was interrupted by the trap
  exit_code=0
  wait "$nm_pid" || exit_code=$?
done
if [ "$exit_code" -ne 0 ]; then
  echo "Error: mindie daemon exited with code $exit_code"
  exit 1
fi
echo "All processes finished successfully."
exit 0
