#!/usr/bin/env bash
# Start CI from what a new machine has: remove every container, volume, network and image the project made on this
# machine (simulated hosts, build containers, stand-in/builder/conductor images, their caches), so that every image
# build path runs in each CI run instead of reusing an output made from an earlier checkout. Only the debootstrap
# base image stays when it is keyed by its own inputs (scripts/ensure_base_image.sh rebuilds it otherwise).
# Everything the project makes is named local/* or labelled pymotor.sim; nothing else on the machine is touched.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[ci_clean] %s\n' "$*"; }
base_image="${MOTOR_BASE_IMAGE:-local/debian:bookworm}"

if ! docker info >/dev/null 2>&1; then
  log "no Docker engine answers: nothing to remove"
  exit 0
fi

project_images=$(docker image ls --format '{{.Repository}}:{{.Tag}}' | grep '^local/' | grep -vxF "$base_image" || true)
# Containers of the project: labelled simulated hosts, and anything running a project image (build containers).
containers=$(
  {
    docker ps -aq --filter label=pymotor.sim
    for image in $project_images; do docker ps -aq --filter "ancestor=$image"; done
  } | sort -u
)
sim_hosts=$(docker ps -q --filter label=pymotor.sim)
# A simulated host stops its nested containers through its own dockerd on SIGTERM (tests/sim/host entrypoint).
[ -z "$sim_hosts" ] || docker stop -t 20 $sim_hosts >/dev/null
if [ -n "$containers" ]; then
  log "removing $(wc -w <<<"$containers") containers"
  docker rm -f -v $containers >/dev/null
fi
volumes=$(docker volume ls -q --filter label=pymotor.sim)
[ -z "$volumes" ] || { log "removing $(wc -w <<<"$volumes") volumes"; docker volume rm -f $volumes >/dev/null; }
networks=$(docker network ls -q --filter label=pymotor.sim)
[ -z "$networks" ] || { log "removing $(wc -w <<<"$networks") networks"; docker network rm $networks >/dev/null; }
if [ -n "$project_images" ]; then
  log "removing $(wc -w <<<"$project_images") project images"
  docker image rm -f $project_images >/dev/null
fi
docker image prune -f >/dev/null
# Build outputs of an earlier checkout (a clean clone has none; a reused working tree must not keep them).
rm -rf .build tests/output
log "done: images left: $(docker image ls --format '{{.Repository}}:{{.Tag}}' | grep '^local/' | tr '\n' ' ')"
