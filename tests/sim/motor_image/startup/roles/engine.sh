#!/bin/bash
# ROLE=prefill|decode|union|encode: the node manager, which spawns engine_server per DP rank when
# the controller sends the start command.
gen_kv_pool_config
set_cann_env
set_mf_store_env
setup_log_dirs
require_env_function "set_${ROLE}_env" engine.sh
echo "[boot] starting node manager for $ROLE (JOB_NAME=${JOB_NAME:-})"
exec python3 -m motor_sim.node_manager
