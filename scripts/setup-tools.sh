#!/usr/bin/env bash
# Build the project's tool venv (.venv) and the collection path the tests use.
#   .venv/                      ansible-core, ansible-lint, molecule, pytest (requirements/tools.txt)
#   .cache/collections/         ansible_collections/lmcache_vllm/fleet -> this checkout,
#                               plus containers.podman and ansible.posix taken from the
#                               `ansible` bundle wheel (no Galaxy needed).
# Idempotent: a second run only checks what is there.
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
# The unit tests of the KV store (role kv_store) run the real redis-server (Debian's) against the
# configuration and ACL file the collection renders, and the real prometheus-redis-exporter (Debian's, the
# store's Prometheus target) against that server; without them they are skipped (CI: they fail).
# The exporter package enables its own unit: a policy-rc.d keeps it from starting while apt runs.
kv_packages=""
command -v redis-server >/dev/null 2>&1 || kv_packages="redis-server"
[ -x /usr/bin/prometheus-redis-exporter ] || kv_packages="$kv_packages prometheus-redis-exporter"
if [ -n "$kv_packages" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "setup-tools: installing ${kv_packages# } (Debian) for the KV store's unit tests"
  policy=/usr/sbin/policy-rc.d
  policy_ours=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# setup-tools.sh: no service starts while it installs\nexit 101\n' > "$policy"
    chmod 0755 "$policy"
    policy_ours=1
    trap 'rm -f "$policy"' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086 # a list of package names
  apt-get install -y -qq --no-install-recommends $kv_packages >/dev/null
  if [ "$policy_ours" = 1 ]; then rm -f "$policy"; fi
fi

echo "setup-tools: ok ($("$venv/bin/python" -c "import ansible.release as r; print('ansible-core', r.__version__)"))"

