#!/bin/bash
# Sourced by boot.sh. Applies the injected set_common_env, copies user_config.json from the config
# dir to CONFIG_PATH (and keeps syncing it, like PyMotor), and defines helpers for role scripts.

# require_env_function NAME FILE: the deployer must have injected NAME into FILE.
require_env_function() {
  local name=$1 file=$2
  if ! declare -F "$name" >/dev/null; then
    echo "[boot] ERROR: shell function $name is not defined: the deployer must inject it into" \
      "$CONFIGMAP_PATH/$file (export lines for this role's env)" >&2
    exit 1
  fi
  echo "[boot] applying $name"
  "$name"
}

require_env_function set_common_env common.sh

# As PyMotor's common.sh: USER_CONFIG_PATH is the copy in CONFIG_PATH, re-synced every CONFIG_SYNC_INTERVAL (10) s;
# without $CONFIGMAP_PATH/user_config.json boot goes on with USER_CONFIG_PATH pointing at that missing file (the
# components then log "Configuration file does not exist, using default configuration").
user_config_src="$CONFIGMAP_PATH/user_config.json"
mkdir -p "$CONFIG_PATH"
chmod 750 "$CONFIG_PATH"
if [ -f "$user_config_src" ]; then
  export USER_CONFIG_PATH="$CONFIG_PATH/user_config.json"
  cp -f "$user_config_src" "$USER_CONFIG_PATH"
  chmod 640 "$USER_CONFIG_PATH"
  echo "[boot] user_config copied to $USER_CONFIG_PATH"
  (
    while sleep "${CONFIG_SYNC_INTERVAL:-10}"; do
      cp "$user_config_src" "$USER_CONFIG_PATH.tmp" && mv "$USER_CONFIG_PATH.tmp" "$USER_CONFIG_PATH"
    done
  ) &
  echo $! >"$CONFIG_PATH/user_config_sync.pid"
else
  export USER_CONFIG_PATH="$user_config_src"
  echo "[boot] WARNING: $user_config_src not found: USER_CONFIG_PATH=$USER_CONFIG_PATH (missing)" >&2
fi

# Log directories under MOTOR_LOG_ROOT_PATH/MODEL_NAME/SERVICE_ID, as PyMotor lays them out.
setup_log_dirs() {
  local root="${MOTOR_LOG_ROOT_PATH:-/root/ascend/log}/${MODEL_NAME:-model}/${SERVICE_ID:-service}"
  export MOTOR_LOG_PATH="$root/motor" ASCEND_WORK_PATH="$root/ascend_work_path" ASCEND_CACHE_PATH="$root/ascend_cache_path"
  mkdir -p "$MOTOR_LOG_PATH" "$ASCEND_WORK_PATH" "$ASCEND_CACHE_PATH"
}

# As PyMotor's: LD_PRELOAD jemalloc when the image has it (the stand-in has none: a warning, boot goes on).
setup_jemalloc() {
  local jemalloc_path
  jemalloc_path=$(find /usr -type f -name "libjemalloc.so.2" 2>/dev/null | head -n 1)
  if [ -n "$jemalloc_path" ]; then
    export LD_PRELOAD="${jemalloc_path}:${LD_PRELOAD:-}"
    echo "jemalloc found at: $jemalloc_path"
  else
    echo "Warning: libjemalloc.so.2 not found under /usr"
  fi
}

# As PyMotor's: the rank table from $CONFIGMAP_PATH/hccl_tools.py when the config dir has it, else skipped.
gen_ranktable_config() {
  if [ -f "$CONFIGMAP_PATH/hccl_tools.py" ]; then
    echo "Using hccl_tools.py to generate ranktable.json..."
    export HCCL_PATH="$CONFIG_PATH/hccl.json"
    PYTHONUNBUFFERED=1 python3 "$CONFIGMAP_PATH/hccl_tools.py" --hccl_path "$HCCL_PATH"
    export RANKTABLE_PATH="$CONFIG_PATH/ranktable.json"
  else
    echo "hccl_tools.py does not exist, skip ranktable generation"
  fi
}

# Driver libraries (bind-mounted from the host on real clusters).
set_cann_env() {
  local driver="${CANN_INSTALL_PATH:-/usr/local/Ascend}/driver"
  export LD_LIBRARY_PATH="$driver/lib64/common:$driver/lib64/driver:${LD_LIBRARY_PATH:-}"
  export PATH="$PATH:$driver/tools"
}

# Engines with a KV pool get MOONCAKE_CONFIG_PATH, written from kv_cache_pool_config. As PyMotor's
# gen_kv_pool_config: the variable is exported first and a failure of mooncake_config.py is only logged (boot goes
# on; the engine then finds no Mooncake config).
gen_kv_pool_config() {
  [ -n "${KVP_MASTER_SERVICE:-}" ] || return 0
  echo "Updating kv cache pool configuration file..."
  if [ "$ROLE" = "SINGLE_CONTAINER" ]; then
    KVP_MASTER_SERVICE=$POD_IP
  fi
  export MOONCAKE_CONFIG_PATH="$CONFIG_PATH/kv_cache_pool_config.json"
  python3 "$CONFIGMAP_PATH/mooncake_config.py" pool "$MOONCAKE_CONFIG_PATH" "$USER_CONFIG_PATH" || true
}

# SGLang engines (PyMotor's common.sh set_mf_store_env): ASCEND_MF_STORE_URL as tcp://<host>:<port>; a host name is
# resolved to its address (5 tries), a malformed URL ends the container.
set_mf_store_env() {
  [ -n "${ASCEND_MF_STORE_URL:-}" ] || return 0
  if [[ ! "$ASCEND_MF_STORE_URL" =~ ^(tcp://)?([^:/]+)(:([0-9]+))?$ ]]; then
    echo "[boot] ERROR: ASCEND_MF_STORE_URL format invalid: $ASCEND_MF_STORE_URL" >&2
    exit 1
  fi
  local proto="${BASH_REMATCH[1]}" host="${BASH_REMATCH[2]}" port="${BASH_REMATCH[4]}" ip="" try
  if [[ ! "$host" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    for try in 1 2 3 4 5; do
      ip=$(getent hosts "$host" | awk '{print $1}' | head -n1)
      [ -n "$ip" ] && break
      echo "[boot] resolve $host failed, retry $try/5"
      sleep 2
    done
    if [ -z "$ip" ]; then
      echo "[boot] ERROR: cannot resolve the mf_store host $host" >&2
      exit 1
    fi
    export ASCEND_MF_STORE_URL="${proto}${ip}:${port}"
  fi
  echo "[boot] ASCEND_MF_STORE_URL: $ASCEND_MF_STORE_URL"
}
