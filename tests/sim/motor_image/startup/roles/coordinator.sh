#!/bin/bash
# ROLE=coordinator: python3 -m motor.coordinator.main (stand-in module). KV_CONDUCTOR_SERVICE
# enables the conductor client (and the tokenizer, which needs the model directory mounted).
require_env_function set_coordinator_env coordinator.sh
setup_log_dirs
echo "[boot] starting coordinator (KV_CONDUCTOR_SERVICE=${KV_CONDUCTOR_SERVICE:-})"
exec python3 -m motor_sim.coordinator
