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
# As PyMotor's kv_conductor.sh: output path first; a failure (no lib.utils on the path, say) is not fatal,
# the conductor then runs without its config (default port 13333, no kvevent_instance).
python3 "$CONFIGMAP_PATH/mooncake_config.py" conductor "$CONDUCTOR_CONFIG_PATH" "$USER_CONFIG_PATH" ||
  echo "[boot] mooncake_config.py conductor failed: $conductor_bin runs without $CONDUCTOR_CONFIG_PATH" >&2
echo "[boot] starting $conductor_bin (CONDUCTOR_CONFIG_PATH=$CONDUCTOR_CONFIG_PATH)"
cat "$CONDUCTOR_CONFIG_PATH" 2>/dev/null || true
exec "$conductor_bin"
