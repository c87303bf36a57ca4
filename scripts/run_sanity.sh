#!/usr/bin/env bash
# ansible-test must run from a real ansible_collections/<ns>/<name>/ directory (a symlink fails), and
# it bootstraps pip with a script from a host that is unreachable here and at many Ascend sites: copy
# the tracked tree, seed the bootstrap cache with a get-pip that uses Python's bundled pip wheel.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv="$repo/.venv"
python_version="${SANITY_PYTHON:-3.11}"
dest="$repo/.build/sanity/ansible_collections/pymotor/ascend"

# The pip version ansible-test bootstraps is pinned in its own source.
pip_version=$(grep -hoE "pip='[0-9.]+'" "$venv"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -n1 | grep -oE '[0-9.]+')
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [ ! -f "$cache" ]; then
  mkdir -p "$(dirname "$cache")"
  cp "$repo/scripts/get_pip_offline.py" "$cache"
fi

rm -rf "$dest"
mkdir -p "$dest"
# What git tracks or would track (new files included), like a clean clone, minus the developer
# tooling that galaxy.yml's build_ignore also keeps out of the released collection.
(cd "$repo" && git ls-files -co --exclude-standard -z -- . \
  ':!bench' ':!scripts' ':!tests/sim' ':!tests/fixtures' ':!tests/integration' ':!.ci' ':!Makefile') |
  (cd "$repo" && xargs -0 -r cp --parents -t "$dest")
# No other collection is copied in: the modules and their doc fragments use nothing outside this collection
# (the Docker Engine API client is module_utils/motor_docker.py), so a missing import fails here.
rm -rf "$repo/.build/sanity/ansible_collections/community"
cd "$dest"
git init -q . && git add -A >/dev/null 2>&1 || true
exec "$venv/bin/ansible-test" sanity --venv --python "$python_version" "$@"
