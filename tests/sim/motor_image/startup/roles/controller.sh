#!/bin/bash
# ROLE=controller: python3 -m motor.controller.main --config $USER_CONFIG_PATH (stand-in module).
require_env_function set_controller_env controller.sh
setup_log_dirs
echo "[boot] starting controller"
# no exec, as upstream controller.sh: boot.sh stays PID 1 and the container ends when the controller does
python3 -m motor_sim.controller --config "$USER_CONFIG_PATH"
