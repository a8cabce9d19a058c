#!/usr/bin/env bash
# Build the project's tool venv (.venv) and the collection path the tests use.
#   .venv/                      ansible-core, ansible-lint, molecule, pytest (requirements/tools.txt)
#   .cache/collections/         ansible_collections/lmcache_vllm/fleet -> this checkout,
#                               plus containers.podman and ansible.posix taken from the
#                               `ansible` bundle wheel (no Galaxy needed).
# Idempotent: a second run only checks what is there. Installs no system package (the tests' Debian
# packages: scripts/setup-test-packages.sh, run by make test and make unit).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv
colls=$repo/.cache/collections
bundle_version=12.3.0
stamp=$venv/.tools-stamp
want=$(sha256sum "$repo/requirements/tools.txt" | cut -c1-16)

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup-tools: building $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip==25.3
  "$venv/bin/pip" install -q -r "$repo/requirements/tools.txt"
  echo "$want" > "$stamp"
fi

mkdir -p "$colls/ansible_collections/lmcache_vllm"
ln -sfn "$repo" "$colls/ansible_collections/lmcache_vllm/fleet"

if [ ! -f "$colls/ansible_collections/containers/podman/MANIFEST.json" ] ||
   [ ! -f "$colls/ansible_collections/ansible/posix/MANIFEST.json" ]; then
  echo "setup-tools: extracting containers.podman and ansible.posix from ansible==$bundle_version"
  tmp=$(mktemp -d)
  "$venv/bin/pip" download -q --no-deps -d "$tmp" "ansible==$bundle_version"
  "$venv/bin/python" - "$tmp"/ansible-*.whl "$colls" <<'PY'
import sys
import zipfile

wheel, dest = sys.argv[1:3]
wanted = ("ansible_collections/containers/podman/", "ansible_collections/ansible/posix/")
with zipfile.ZipFile(wheel) as archive:
    archive.extractall(dest, members=[n for n in archive.namelist() if n.startswith(wanted)])
PY
  rm -rf "$tmp"
fi
echo "setup-tools: ok ($("$venv/bin/python" -c "import ansible.release as r; print('ansible-core', r.__version__)"))"

