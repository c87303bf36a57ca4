#!/bin/bash
# Health probe, as PyMotor's: bash $CONFIGMAP_PATH/probe.sh startup|readiness|liveness
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/probe.py" "${ROLE:?}" "${1:?usage: probe.sh startup|readiness|liveness}"
