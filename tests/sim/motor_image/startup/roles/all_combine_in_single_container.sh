#!/bin/bash
# ROLE=SINGLE_CONTAINER (deploy_mode single_container): every role of the job in this one container, in the order and
# shape of upstream's roles/all_combine_in_single_container.sh: the coordinator, the controller, the KV pool master
# when KVP_MASTER_SERVICE is set, then one node manager per prefill and per decode instance (ROLE, INDEX, JOB_NAME=p<i>
# / d<i>, RANKTABLE_PATH), all in the background with the one user_config; the counts are grepped from it as upstream
# does. As upstream's, the script waits for every process in turn and ends with 0: one process that dies does not end
# the container. (Stand-in modules for motor.*; no ccae_reporter, which upstream starts "not necessary if no ccae".)
if [ "$ROLE" != "SINGLE_CONTAINER" ]; then
  echo "Error: This script is for SINGLE_CONTAINER role only. Current ROLE=$ROLE"
  exit 1
fi

setup_jemalloc

export CONTROLLER_SERVICE="$POD_IP"
export COORDINATOR_SERVICE="$POD_IP"

gen_ranktable_config

set_cann_env

pids=()

require_env_function set_coordinator_env all_combine_in_single_container.sh
ROLE=coordinator python3 -m motor_sim.coordinator &
pids+=($!)

require_env_function set_controller_env all_combine_in_single_container.sh
ROLE=controller python3 -m motor_sim.controller --config "$USER_CONFIG_PATH" &
pids+=($!)

gen_kv_pool_config

if [ -n "${KVP_MASTER_SERVICE:-}" ]; then
  require_env_function set_kv_pool_env all_combine_in_single_container.sh
  ROLE=kv_pool mooncake_master --port "$KV_POOL_PORT" \
    --eviction_high_watermark_ratio "$KV_POOL_EVICTION_HIGH_WATERMARK_RATIO" \
    --eviction_ratio "$KV_POOL_EVICTION_RATIO" --default_kv_lease_ttl "$DEFAULT_KV_LEASE_TTL" &
  pids+=($!)
fi

# upstream's grep of the pretty-printed user_config: a count the grep cannot read leaves seq without instances
p_instances_num=$(grep '"p_instances_num"' "$USER_CONFIG_PATH" | sed 's/.*:[[:space:]]*\([0-9.]*\).*/\1/' || true)
d_instances_num=$(grep '"d_instances_num"' "$USER_CONFIG_PATH" | sed 's/.*:[[:space:]]*\([0-9.]*\).*/\1/' || true)

require_env_function set_prefill_env all_combine_in_single_container.sh
for i in $(seq 0 $((p_instances_num - 1))); do
  ROLE=prefill INDEX=$i JOB_NAME=p$i RANKTABLE_PATH=$CONFIG_PATH/ranktable_p${i}.json python3 -m motor_sim.node_manager &
  pids+=($!)
  echo "pull up instance: ROLE=prefill INDEX=$i JOB_NAME=p$i RANKTABLE_PATH=$CONFIG_PATH/ranktable_p${i}.json"
done

require_env_function set_decode_env all_combine_in_single_container.sh
for i in $(seq 0 $((d_instances_num - 1))); do
  ROLE=decode INDEX=$i JOB_NAME=d$i RANKTABLE_PATH=$CONFIG_PATH/ranktable_d${i}.json python3 -m motor_sim.node_manager &
  pids+=($!)
  echo "pull up instance: ROLE=decode INDEX=$i JOB_NAME=d$i RANKTABLE_PATH=$CONFIG_PATH/ranktable_d${i}.json"
done

trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
for pid in "${pids[@]}"; do
  wait "$pid" || true
done
echo "All processes finished successfully."
exit 0
