#!/usr/bin/env bash
# `make test` after venv and images: every test part, in three lanes at once so that the CPU-bound checks (unit, lint,
# sanity) and the conformance suite overlap with the Docker suites, which spend much of their time waiting for
# containers (CI has 90 minutes on 2 cores); the simulated fleet's faults and the rolling upgrade and rollback under
# load on the real control plane (about 20 min, mostly waiting for engines that load for 60 s) take the third lane
# (the stand-in's rolls, make rolls, are on demand). Each lane's output is kept in its own log and printed whole when
# the lane ends; a lane goes on after a failed part; the exit code is non-zero when any part failed.
# MOTOR_TEST_LANES=1 runs the parts one after another.
set -uo pipefail
cd "$(dirname "$0")/.."
lanes=("unit lint sanity conformance" "integration molecule" "fleet-faults conformance-rolls")
if [ "${MOTOR_TEST_LANES:-2}" = 1 ]; then
  exec make --no-print-directory ${lanes[*]}
fi
logs=tests/output/lanes
mkdir -p "$logs"
pids=()
# One lane: its parts one after another, each timed (tests/README.md's lane table comes from these lines); a lane goes
# on after a failed part and fails at its end.
run_lane() {
  local lane_rc=0 part start
  for part in "$@"; do
    start=$SECONDS
    if make --no-print-directory "$part"; then
      echo "[lane] part $part: passed in $(( SECONDS - start )) s"
    else
      echo "[lane] part $part: FAILED in $(( SECONDS - start )) s"
      lane_rc=1
    fi
  done
  return "$lane_rc"
}
lanes_start=$SECONDS
for i in "${!lanes[@]}"; do
  # shellcheck disable=SC2086  # a lane is a list of make targets
  run_lane ${lanes[$i]} > "$logs/lane-$i.log" 2>&1 &
  pids+=("$!")
  echo "[test] lane $i (${lanes[$i]}) started, log $logs/lane-$i.log"
done
rc=0
for i in "${!pids[@]}"; do
  start=$SECONDS
  if wait "${pids[$i]}"; then status=passed; else status=FAILED; rc=1; fi
  echo "===== lane $i (${lanes[$i]}): $status ====="
  cat "$logs/lane-$i.log"
  echo "===== end of lane $i (waited $(( SECONDS - start )) s more, $(( SECONDS - lanes_start )) s since the lanes started) ====="
done
exit "$rc"
