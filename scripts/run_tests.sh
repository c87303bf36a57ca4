#!/usr/bin/env bash
# `make test` after venv and images: every test part, on MOTOR_TEST_LANES workers (default 3) that take the parts
# from one queue, longest first (the expected seconds below are the measured ones of tests/README.md), so that no
# worker idles while another still has a long queue (CI has 90 minutes on 2 cores; the Docker suites spend much of
# their time waiting for containers, which is why 3 workers share 2 cores). The one-time builds (simulated host
# image, stand-in image, conformance image, real conductor: `make prebuild`) run once, first, while the checks that
# need no image (unit, lint, sanity) run beside them; no Docker part starts before they are done, so no two parts
# build the same image at once. Each part's output is kept in tests/output/lanes/<part>.log and printed whole when
# the part ends, with its status and time; a failed part does not stop the others; the exit code is non-zero when
# any part failed. MOTOR_TEST_LANES=1 runs the parts one after another.
set -uo pipefail
cd "$(dirname "$0")/.."

# part | expected seconds (tests/README.md, measured) | needs the one-time builds | command
# Integration and conformance run as one part per module (or group of short modules): each module brings up its
# own simulated cluster, so nothing is shared across parts that a split would pay twice.
parts=(
  "conformance-rolls|1350|yes|make --no-print-directory conformance-rolls"
  "conformance-deploy|900|yes|make --no-print-directory conformance FILES=tests/conformance/test_deploy.py"
  "conformance-benchmark|540|yes|make --no-print-directory conformance FILES=tests/conformance/test_benchmark.py"
  "conformance-multipod|400|yes|make --no-print-directory conformance FILES=tests/conformance/test_multipod.py"
  "conformance-smoke|150|yes|make --no-print-directory conformance FILES='tests/conformance/test_smoke.py tests/conformance/test_conductor_build.py'"
  "integration-faults|420|yes|make --no-print-directory integration FILES='tests/integration/test_faults.py'"
  "integration-bad-input|300|yes|make --no-print-directory integration FILES='tests/integration/test_bad_input_deploy.py'"
  "integration-ops|420|yes|make --no-print-directory integration FILES='tests/integration/test_day2.py tests/integration/test_host_failure.py tests/integration/test_heal.py'"
  "integration-hosts|420|yes|make --no-print-directory integration FILES='tests/integration/test_host_healer.py tests/integration/test_host_addresses.py tests/integration/test_npu_prechecks.py tests/integration/test_sim_hosts.py'"
  "integration-deploys|420|yes|make --no-print-directory integration FILES='tests/integration/test_standin_cluster.py tests/integration/test_parity_deploy.py tests/integration/test_startup_contract.py tests/integration/test_conductor_fixture.py'"
  "integration-security|300|yes|make --no-print-directory integration FILES='tests/integration/test_security.py tests/integration/test_verify_tls.py tests/integration/test_monitoring.py'"
  "molecule-pd_separation|240|yes|make --no-print-directory molecule SCENARIOS=pd_separation"
  "molecule-day2|300|yes|make --no-print-directory molecule SCENARIOS=day2"
  "molecule-pd_hybrid|200|yes|make --no-print-directory molecule SCENARIOS=pd_hybrid"
  "molecule-image_build|200|yes|make --no-print-directory molecule SCENARIOS=image_build"
  "fleet-faults|210|yes|make --no-print-directory fleet-faults"
  "unit|360|no|make --no-print-directory unit"
  "sanity|300|no|make --no-print-directory sanity"
  "lint|120|no|make --no-print-directory lint"
)

# A module no part names still runs: in a part of its own ("<suite>-other"), so a new test file is never left out.
for suite in integration conformance; do
  other=()
  for file in tests/$suite/test_*.py; do
    case $file in
      tests/integration/test_upgrade.py) continue ;;  # the stand-in's rolls: make rolls (on demand)
      tests/integration/test_fleet_faults.py | tests/conformance/test_upgrade.py) continue ;;  # own parts
    esac
    printf '%s\n' "${parts[@]}" | grep -qF "$file" || other+=("$file")
  done
  [ ${#other[@]} -eq 0 ] || parts+=("$suite-other|600|yes|make --no-print-directory $suite FILES='${other[*]}'")
done

# MOTOR_TEST_ONLY="unit lint ...": those parts only (names as above), for a quick run of a few.
if [ -n "${MOTOR_TEST_ONLY:-}" ]; then
  kept=()
  for part in "${parts[@]}"; do
    [[ " $MOTOR_TEST_ONLY " == *" ${part%%|*} "* ]] && kept+=("$part")
  done
  parts=("${kept[@]}")
fi

logs=tests/output/lanes
rm -rf "$logs"
mkdir -p "$logs"
workers=${MOTOR_TEST_LANES:-3}

# The queue: prebuild first, then the parts that need no image (they run beside the prebuild), then the rest longest
# first. A worker takes the next line under a lock.
queue=$logs/.queue
{
  printf '%s\n' "${parts[@]}" | grep -q '|yes|' && echo "prebuild|300|no|make --no-print-directory prebuild"
  printf '%s\n' "${parts[@]}" | awk -F'|' '$3 == "no"' | sort -t'|' -k2,2nr
  printf '%s\n' "${parts[@]}" | awk -F'|' '$3 == "yes"' | sort -t'|' -k2,2nr
} >"$queue"
next=$logs/.next
echo 1 >"$next"
prebuilt=$logs/.prebuild-pending
touch "$prebuilt"
status_file=$logs/.status
: >"$status_file"

take() {  # print the next queue line, or nothing when the queue is empty
  (
    flock 9
    n=$(cat "$next")
    line=$(sed -n "${n}p" "$queue")
    [ -z "$line" ] || echo $((n + 1)) >"$next"
    printf '%s' "$line"
  ) 9>"$logs/.lock"
}

run_part() {  # name command needs_prebuild
  local name=$1 cmd=$2 needs=$3 start rc
  if [ "$needs" = yes ]; then
    while [ -e "$prebuilt" ]; do sleep 2; done
    if [ -e "$logs/.prebuild-failed" ]; then
      echo "$name: not run, the one-time builds failed (prebuild.log)" >"$logs/$name.log"
      rc=1
    fi
  fi
  start=$SECONDS
  if [ -z "${rc:-}" ]; then
    bash -c "$cmd" >"$logs/$name.log" 2>&1
    rc=$?
  fi
  [ "$name" != prebuild ] || { [ "$rc" = 0 ] || touch "$logs/.prebuild-failed"; rm -f "$prebuilt"; }
  local result=passed
  [ "$rc" = 0 ] || result=FAILED
  (
    flock 9
    echo "$name|$result|$(( SECONDS - start ))|$(( SECONDS - tests_start ))" >>"$status_file"
    echo "===== $name: $result in $(( SECONDS - start )) s ($(( SECONDS - tests_start )) s since make test's parts started) ====="
    cat "$logs/$name.log"
    echo "===== end of $name ====="
  ) 9>"$logs/.print-lock"
}

worker() {
  local line name needs cmd
  while true; do
    line=$(take)
    [ -n "$line" ] || return 0
    IFS='|' read -r name _ needs cmd <<<"$line"
    run_part "$name" "$cmd" "$needs"
  done
}

tests_start=$SECONDS
echo "[test] $(( $(wc -l <"$queue") )) parts on $workers workers, longest first; each part's log in $logs/<part>.log"
pids=()
for _ in $(seq 1 "$workers"); do
  worker &
  pids+=("$!")
done
for pid in "${pids[@]}"; do wait "$pid"; done

echo "[test] all parts ended after $(( SECONDS - tests_start )) s:"
column -t -s'|' -N part,result,seconds,ended_at "$status_file" 2>/dev/null || cat "$status_file"
ended=$(wc -l <"$status_file" 2>/dev/null || echo 0)
if [ "$ended" -ne "$(wc -l <"$queue")" ]; then  # a worker that died must not pass for a part that passed
  echo "[test] only $ended of $(wc -l <"$queue") parts reported an end"
  exit 1
fi
! grep -q '|FAILED|' "$status_file"
