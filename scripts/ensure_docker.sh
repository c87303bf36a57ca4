#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine: install Debian's docker.io when dockerd is
# missing, start dockerd in the background when nothing is listening (CI machines run no systemd).
set -euo pipefail

log() { printf '[ensure_docker] %s\n' "$*"; }

if docker info >/dev/null 2>&1; then
  log "Docker engine already running"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "[ensure_docker] no Docker engine answers and we are not root: start one, or run as root" >&2
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  log "installing Debian's docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

log "starting dockerd in the background (log: /var/log/pymotor-dockerd.log)"
# setsid: dockerd must outlive the make process that started it. Every descriptor above 2 is closed first: run as
# `flock /tmp/pymotor-docker.lock make docker`, dockerd would otherwise inherit flock's descriptor and hold the
# shared Docker lock for as long as it runs (every later `flock` waits forever).
(
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
  exec setsid nohup dockerd >/var/log/pymotor-dockerd.log 2>&1 </dev/null
) &

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "Docker engine is up ($(docker info --format '{{.ServerVersion}} / {{.Driver}}'))"
    exit 0
  fi
  sleep 1
done
echo "[ensure_docker] dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 /var/log/pymotor-dockerd.log >&2 || true
exit 1
