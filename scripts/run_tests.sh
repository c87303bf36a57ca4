#!/usr/bin/env bash
# `make test` after the venv: every test part, on MOTOR_TEST_LANES workers (default 3) that take the parts from
# one queue, longest first (the expected seconds below are the measured ones of tests/README.md), so that no worker
# idles while another still has a long queue (CI has 90 minutes on 2 cores). The suite is bound by CPU: clean-clone
# runs kept the machine 92-93% busy (6,005 CPU s in 3,243 s; with master/standby's upgrade and healer tests, 6,762 CPU s
# in 3,662 s), about a third of it in the simulated hosts' containers and a third in the kernel, so a cut must lower
# CPU seconds. The machine's set-up (`make images tools`: base image, Debian tools) runs first, beside the workers,
# which start with lint and sanity while it downloads; then the one-time builds run once, as two parts: `make
# prebuild-sim` (simulated host image, stand-in image) and `make prebuild-conformance` (conformance image, real
# conductor; each cached by content). A part names the builds it needs and a worker takes the first part in the queue
# whose builds are done, so unit, lint and sanity, then the simulated-host parts, run while the conformance images
# still build, and no two parts build the same image at once. Each part's output is kept in
# tests/output/lanes/<part>.log and printed whole when the part ends, with its status and time; a failed part does not
# stop the others; the exit code is non-zero when any part failed. MOTOR_TEST_LANES=1 runs them one by one.
set -uo pipefail
cd "$(dirname "$0")/.."

# part | expected seconds (tests/README.md, measured) | builds it needs (setup, sim, conformance, or -) | command
# Integration and conformance run as one part per module (or group of short modules): each module brings up its
# own simulated cluster, so nothing is shared across parts that a split would pay twice.
parts=(
  "conformance-rolls|1344|sim,conformance|make --no-print-directory conformance-rolls"
  "conformance-deploy-separation|398|sim,conformance|make --no-print-directory conformance FILES='tests/conformance/test_deploy.py -k pd_separation'"
  "conformance-deploy-hybrid|382|sim,conformance|make --no-print-directory conformance FILES='tests/conformance/test_deploy.py -k pd_hybrid'"
  "conformance-benchmark|506|sim,conformance|make --no-print-directory conformance FILES=tests/conformance/test_benchmark.py"
  "conformance-multipod|442|sim,conformance|make --no-print-directory conformance FILES=tests/conformance/test_multipod.py"
  "conformance-standby|593|sim,conformance|make --no-print-directory conformance FILES=tests/conformance/test_standby.py"
  "conformance-smoke|55|sim,conformance|make --no-print-directory conformance FILES='tests/conformance/test_smoke.py tests/conformance/test_conductor_build.py'"
  "integration-faults|261|sim|make --no-print-directory integration FILES='tests/integration/test_faults.py'"
  "integration-bad-input|89|sim|make --no-print-directory integration FILES='tests/integration/test_bad_input_deploy.py'"
  "integration-ops|427|sim|make --no-print-directory integration FILES='tests/integration/test_day2.py tests/integration/test_host_failure.py tests/integration/test_heal.py'"
  "integration-hosts|154|sim|make --no-print-directory integration FILES='tests/integration/test_host_healer.py tests/integration/test_host_addresses.py tests/integration/test_npu_prechecks.py tests/integration/test_sim_hosts.py'"
  "integration-deploys|130|sim|make --no-print-directory integration FILES='tests/integration/test_standin_cluster.py tests/integration/test_parity_deploy.py tests/integration/test_startup_contract.py tests/integration/test_conductor_fixture.py'"
  "integration-security|123|sim|make --no-print-directory integration FILES='tests/integration/test_security.py tests/integration/test_monitoring.py'"
  "integration-tls|212|sim|make --no-print-directory integration FILES='tests/integration/test_verify_tls.py'"
  "integration-etcd|311|sim|make --no-print-directory integration FILES='tests/integration/test_etcd.py'"
  "molecule-pd_separation|293|sim|make --no-print-directory molecule SCENARIOS=pd_separation"
  "molecule-day2|274|sim|make --no-print-directory molecule SCENARIOS=day2"
  "molecule-pd_hybrid|124|sim|make --no-print-directory molecule SCENARIOS=pd_hybrid"
  "molecule-image_build|221|sim|make --no-print-directory molecule SCENARIOS=image_build"
  "fleet-faults|147|sim|make --no-print-directory fleet-faults"
  "unit|146|setup|make --no-print-directory unit"
  "sanity|118|-|make --no-print-directory sanity"
  "lint|51|-|make --no-print-directory lint"
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
  needs=sim
  [ "$suite" = integration ] || needs=sim,conformance
  [ ${#other[@]} -eq 0 ] || parts+=("$suite-other|600|$needs|make --no-print-directory $suite FILES='${other[*]}'")
done

# MOTOR_TEST_DEMO=1 (.ci/run): `make demo` as one more part, asserting its KV-cache hits and torn down after, so the
# demo a new user runs first shares the workers with the tests instead of running after all of them.
if [ "${MOTOR_TEST_DEMO:-0}" = 1 ]; then
  parts+=("demo|235|sim|MOTOR_DEMO_ASSERT=1 MOTOR_DEMO_TEARDOWN=1 make --no-print-directory demo")
fi

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

# The queue: the builds first, then every part longest first. A worker takes, under a lock, the first part not yet
# taken whose builds are done; it waits while every part left still waits for a build.
queue=$logs/.queue
# The machine's set-up (the debootstrap base image, Debian's promtool and chromium: on a new machine mostly downloads,
# minutes) runs beside the workers, not on one, when a part needs it: lint and sanity, which need neither, start at
# once; every other part waits for it (the prebuilds, unit: needs "setup").
setup=0
if printf '%s\n' "${parts[@]}" | awk -F'|' '$3 != "-"' | grep -q .; then
  setup=1
  touch "$logs/.pending-setup"
fi
{
  for build in sim conformance; do
    printf '%s\n' "${parts[@]}" | awk -F'|' -v b="$build" '$3 ~ b' | grep -q . &&
      echo "prebuild-$build|300|setup|make --no-print-directory prebuild-$build" && touch "$logs/.pending-$build"
  done
  printf '%s\n' "${parts[@]}" | sort -t'|' -k2,2nr
} >"$queue"
taken=$logs/.taken
: >"$taken"
status_file=$logs/.status
: >"$status_file"

take() {  # print the next part a worker may run; nothing when none is left
  local line
  while true; do
    line=$(
      exec 9>"$logs/.lock"
      flock 9
      n=0 left=0
      # the builds still pending, read once: a build that ends during the scan must not let a later part in the
      # queue (unit) go before an earlier one that waited for the same build (a prebuild)
      pending=" $(cd "$logs" && for f in .pending-*; do [ -e "$f" ] && printf '%s ' "${f#.pending-}"; done) "
      while IFS= read -r candidate; do
        n=$((n + 1))
        grep -qx "$n" "$taken" && continue
        left=1
        IFS='|' read -r _ _ needs _ <<<"$candidate"
        ready=1
        for need in ${needs//,/ }; do
          [ "$need" = - ] || [[ "$pending" != *" $need "* ]] || ready=0
        done
        if [ "$ready" = 1 ]; then
          echo "$n" >>"$taken"
          printf '%s' "$candidate"
          exit 0
        fi
      done <"$queue"
      [ "$left" = 0 ] || printf wait
    )
    [ "$line" = wait ] || { printf '%s' "$line"; return 0; }
    sleep 2
  done
}

run_part() {  # name command needs
  local name=$1 cmd=$2 needs=$3 start rc="" need
  for need in ${needs//,/ }; do
    if [ -e "$logs/.failed-$need" ]; then
      echo "$name: not run, the one-time build prebuild-$need failed (prebuild-$need.log)" >"$logs/$name.log"
      rc=1
    fi
  done
  start=$SECONDS
  local cpu=-
  if [ -z "$rc" ]; then
    # the part's CPU seconds (user + system of its own processes: pytest, ansible, builds; not the containers'
    # processes, which the Docker daemons run): on 2 cores the suite is bound by CPU, so this is what a cut must lower
    cpu=$( (bash -c "$cmd" >"$logs/$name.log" 2>&1; echo "rc $?"; times) | awk '
      /^rc / {rc = $2} NR == 3 {split($1, u, /[ms]/); split($2, s, /[ms]/); cpu = u[1] * 60 + u[2] + s[1] * 60 + s[2]}
      END {printf "%d %d", rc, cpu}')
    rc=${cpu%% *}
    cpu=${cpu##* }
  fi
  case $name in
    prebuild-*)
      [ "$rc" = 0 ] || touch "$logs/.failed-${name#prebuild-}"
      rm -f "$logs/.pending-${name#prebuild-}"
      ;;
  esac
  local result=passed
  [ "$rc" = 0 ] || result=FAILED
  (
    flock 9
    echo "$name|$result|$(( SECONDS - start ))|$(( SECONDS - tests_start ))|$cpu" >>"$status_file"
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
echo "[test] $(wc -l <"$queue") parts on $workers workers, longest first; each part's log in $logs/<part>.log"
pids=()
if [ "$setup" = 1 ]; then
  run_part prebuild-setup "make --no-print-directory images tools" - &
  pids+=("$!")
  # a machine set up already takes a few seconds: the workers then start with the prebuilds, as before
  for _ in $(seq 40); do [ -e "$logs/.pending-setup" ] || break; sleep 0.5; done
fi
for _ in $(seq 1 "$workers"); do
  worker &
  pids+=("$!")
done
for pid in "${pids[@]}"; do wait "$pid"; done

echo "[test] all parts ended after $(( SECONDS - tests_start )) s:"
column -t -s'|' -N part,result,seconds,ended_at,cpu_s "$status_file" 2>/dev/null || cat "$status_file"
# CI keeps only the tail of the output: the failing tests of each failed part again, after the table
for failed in $(awk -F'|' '$2 == "FAILED" {print $1}' "$status_file"); do
  echo "[test] $failed failed; its failing tests ($logs/$failed.log has all):"
  grep -E '^(FAILED|ERROR) ' "$logs/$failed.log" | cut -c1-400 | head -8 | grep . || tail -n 5 "$logs/$failed.log"
done
ended=$(wc -l <"$status_file" 2>/dev/null || echo 0)
expected=$(( $(wc -l <"$queue") + setup ))
if [ "$ended" -ne "$expected" ]; then  # a worker that died must not pass for a part that passed
  echo "[test] only $ended of $expected parts reported an end"
  exit 1
fi
! grep -q '|FAILED|' "$status_file"
