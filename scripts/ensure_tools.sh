#!/usr/bin/env bash
# Debian packages the tests run besides the venv: promtool (package prometheus) checks the Prometheus files that
# playbooks/monitoring.yml writes (tests/unit/plugins/plugin_utils/test_monitoring.py). Installed when missing and
# we are root (CI is); otherwise those tests skip with the reason, except under CI=true where they fail.
set -euo pipefail

log() { printf '[ensure_tools] %s\n' "$*"; }

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "promtool missing and we are not root: apt-get install prometheus, or the promtool tests skip"
  exit 0
fi
log "installing Debian's prometheus (promtool)"
apt-get update -qq
# the package's service is not started: policy-rc.d or no systemd on CI; nothing here runs it
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null
