#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Build the execution environment of execution-environment.yml with ansible-builder and podman: the collection
# tarball of this checkout, then `ansible-builder build`. With the definition's own base image
# (localhost/lmcache-vllm-fleet-ee-base:latest) that image is built first from Debian packages
# (scripts/setup-ee-base.sh); any other base is used as it is.
#
# Usage: scripts/build-ee.sh [TAG]        (default TAG: localhost/lmcache-vllm-fleet-ee:<collection version>)
# Env:   EE_BASE_IMAGE   another base image (e.g. your organisation's execution environment base)
#        EE_PYCMD        its Python when it is not /opt/ee/bin/python3 (e.g. /usr/bin/python3)
#        EE_PKGMGR       its package manager when it is not Debian's apt-get (e.g. /usr/bin/microdnf)
#        EE_WORKDIR      the build directory (default .cache/ee of this checkout)
#        EE_PODMAN_ULIMITS  podman's --ulimit options for the build (default nofile 20000, nproc 32768)
#
# Podman's layer cache makes a second build quick: the tarball is replaced only when the collection's content
# (its MANIFEST.json) changed, so an unchanged checkout reuses every layer.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv
default_base=localhost/lmcache-vllm-fleet-ee-base:latest
version=$("$venv/bin/python" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["version"])' "$repo/galaxy.yml")
tag=${1:-localhost/lmcache-vllm-fleet-ee:$version}
base=${EE_BASE_IMAGE:-$default_base}
work=${EE_WORKDIR:-$repo/.cache/ee}
tarball=lmcache_vllm-fleet-$version.tar.gz
t0=$SECONDS

if [ "$base" = "$default_base" ]; then
    bash "$repo/scripts/setup-ee-base.sh"
fi

mkdir -p "$work/new"
rm -f "$work/new/"*.tar.gz
"$venv/bin/ansible-galaxy" collection build "$repo" --output-path "$work/new" >/dev/null
manifest() { tar -xzOf "$1" MANIFEST.json 2>/dev/null | sha256sum; }
if [ ! -f "$work/$tarball" ] || [ "$(manifest "$work/new/$tarball")" != "$(manifest "$work/$tarball")" ]; then
    mv -f "$work/new/$tarball" "$work/$tarball"
fi
cp "$repo/execution-environment.yml" "$work/execution-environment.yml"

# The limits of the build's containers: podman's defaults are higher than a runtime without CAP_SYS_RESOURCE may
# grant (the same limits as scripts/setup-testhosts.sh).
ulimits=${EE_PODMAN_ULIMITS:---ulimit nofile=20000:20000 --ulimit nproc=32768:32768}
args=(--build-arg "EE_BASE_IMAGE=$base")
if [ -n "${EE_PYCMD:-}" ]; then
    args+=(--build-arg "PYCMD=$EE_PYCMD")
fi
if [ -n "${EE_PKGMGR:-}" ]; then
    args+=(--build-arg "PKGMGR=$EE_PKGMGR")
fi
"$venv/bin/ansible-builder" build --container-runtime podman -f "$work/execution-environment.yml" \
    -c "$work/context" -t "$tag" "${args[@]}" -v 2 \
    --extra-build-cli-args "$ulimits --label org.lmcache-vllm-fleet.recipe=ee-$version"
echo "build-ee: $tag built in $((SECONDS - t0)) s"
