#!/usr/bin/env bash
# Debian packages the tests run besides the venv: promtool (package prometheus) checks the Prometheus files that
# playbooks/monitoring.yml writes (tests/unit/plugins/plugin_utils/test_monitoring.py); chromium renders the
# benchmark's HTML report headless (tests/unit/plugins/plugin_utils/test_bench_browser.py). Installed when missing
# and we are root (CI is); otherwise those tests skip with the reason, except under CI=true where they fail.
set -euo pipefail

log() { printf '[ensure_tools] %s\n' "$*"; }

# command -> Debian package
declare -A wanted=([promtool]=prometheus [chromium]=chromium)
missing=()
for cmd in "${!wanted[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${wanted[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  log "missing and we are not root: apt-get install ${missing[*]}, or the tests that need them skip"
  exit 0
fi
log "installing Debian's ${missing[*]}"
apt-get update -qq
# prometheus' service is not started: policy-rc.d or no systemd on CI; nothing here runs it
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for cmd in "${!wanted[@]}"; do
  command -v "$cmd" >/dev/null
done
