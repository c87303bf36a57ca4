#!/usr/bin/env bash
# Build the local Debian base image with debootstrap + docker import (no registry is reachable).
# Skipped when the image exists and was made from the same inputs (suite, mirror, this script: the label
# io.pymotor.inputs), so CI may keep it while it removes every other project image (scripts/ci_clean.sh).
# Mirror: $MOTOR_DEBIAN_MIRROR, else the machine's apt source.
set -euo pipefail

image="${MOTOR_BASE_IMAGE:-local/debian:bookworm}"
suite="${MOTOR_DEBIAN_SUITE:-bookworm}"

log() { printf '[ensure_base_image] %s\n' "$*"; }

mirror="${MOTOR_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(grep -hoE '^URIs: *http[^ ]+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | sed 's/^URIs: *//')
  [ -n "$mirror" ] || mirror=$(grep -hoE '^deb +http[^ ]+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}')
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
fi
inputs=$( { printf '%s\n%s\n' "$suite" "$mirror"; cat "$0"; } | sha256sum | cut -c1-16)

present=$(docker image inspect --format '{{ index .Config.Labels "io.pymotor.inputs" }}' "$image" 2>/dev/null || true)
if [ "$present" = "$inputs" ]; then
  log "$image already present (inputs $inputs)"
  exit 0
fi
[ -z "$present" ] || log "$image was made from other inputs ($present): rebuilding"

if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

rootfs=$(mktemp -d /tmp/pymotor-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
log "debootstrap $suite from $mirror"
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >/tmp/pymotor-debootstrap.log 2>&1 || {
  tail -n 20 /tmp/pymotor-debootstrap.log >&2
  exit 1
}
# Point apt inside the image at the same mirror and keep images small.
echo "deb $mirror $suite main" >"$rootfs/etc/apt/sources.list"
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90pymotor"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import --change "LABEL io.pymotor.inputs=$inputs" - "$image" >/dev/null
log "imported $image (inputs $inputs)"
