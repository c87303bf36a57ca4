#!/bin/bash
# ROLE=kv_pool: mooncake_master with the pool settings deploy.py passes as env.
require_env_function set_kv_pool_env kv_pool.sh
for var in KV_POOL_PORT KV_POOL_EVICTION_HIGH_WATERMARK_RATIO KV_POOL_EVICTION_RATIO; do
  if [ -z "${!var:-}" ]; then
    echo "[boot] ERROR: $var is not set (kv_cache_pool_config incomplete?)" >&2
    exit 1
  fi
done
echo "[boot] starting mooncake_master on port $KV_POOL_PORT"
exec mooncake_master --port "$KV_POOL_PORT" \
  --eviction_high_watermark_ratio "$KV_POOL_EVICTION_HIGH_WATERMARK_RATIO" \
  --eviction_ratio "$KV_POOL_EVICTION_RATIO" \
  --default_kv_lease_ttl "${DEFAULT_KV_LEASE_TTL:-11000}"
