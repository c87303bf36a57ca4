#!/bin/bash
# ROLE=mf_store (SGLang jobs): the memfabric config store, as PyMotor's mf_store.sh starts it. Like upstream it
# does not call the injected set_mf_store_env: the address comes from POD_IP and ASCEND_MF_STORE_PORT only.
if [ "$ROLE" != "mf_store" ]; then
  echo "[boot] ERROR: mf_store.sh is for the mf_store role only. Current ROLE=$ROLE" >&2
  exit 1
fi
: "${ASCEND_MF_STORE_PORT:?ASCEND_MF_STORE_PORT must be set for the mf_store role}"
export ASCEND_MF_STORE_URL="tcp://$POD_IP:$ASCEND_MF_STORE_PORT"
export ASCEND_MF_LOG_LEVEL=0
echo "[boot] starting the memfabric config store on $ASCEND_MF_STORE_URL"
exec python3 -m memfabric_hybrid.launch_ascend_mf_store
