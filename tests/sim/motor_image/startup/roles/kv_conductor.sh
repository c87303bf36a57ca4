#!/bin/bash
# ROLE=kv_conductor: write $CONFIG_PATH/kv_conductor_config.json from user_config's
# kv_conductor_config and run the image's mooncake_conductor with CONDUCTOR_CONFIG_PATH pointing at it.
require_env_function set_kv_conductor_env kv_conductor.sh
conductor_bin=/usr/local/bin/mooncake_conductor
if [ ! -x "$conductor_bin" ]; then
  echo "[boot] ERROR: $conductor_bin not found: this image has no Mooncake conductor;" \
    "build it from Mooncake dev/kv-indexer into a patched image first" >&2
  exit 1
fi
export CONDUCTOR_CONFIG_PATH="$CONFIG_PATH/kv_conductor_config.json"
python3 "$CONFIGMAP_PATH/mooncake_config.py" conductor "$USER_CONFIG_PATH" "$CONDUCTOR_CONFIG_PATH"
echo "[boot] starting $conductor_bin (CONDUCTOR_CONFIG_PATH=$CONDUCTOR_CONFIG_PATH)"
cat "$CONDUCTOR_CONFIG_PATH"
exec "$conductor_bin"
