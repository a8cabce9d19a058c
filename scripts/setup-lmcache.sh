#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Create (or reuse when healthy) the controller venv with lmcache (the LMCache server).
# torch is installed first as the CPU build, so lmcache's unpinned "torch" does not pull a CUDA one.
# Installs only from the wheelhouse (filled first by download-wheels.sh).
# Prints the venv path as the last line.
#
# Env: FLEET_CACHE (default /var/cache/lmcache-vllm-fleet), WHEELHOUSE, VENV, PYTHON (3.11).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib-venv.sh
. "$here/lib-venv.sh" setup-lmcache
LMCACHE_VERSION="${LMCACHE_VERSION:-0.5.6}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0+cpu}"
VENV="${VENV:-$FLEET_CACHE/lmcache-$LMCACHE_VERSION}"

healthy() {
    venv_installed lmcache "lmcache==$LMCACHE_VERSION" "torch==$TORCH_VERSION" || return 1
    # lmcache drops every server flag when its imports fail: check one is listed.
    (cd / && "$VENV/bin/lmcache" server --help 2>/dev/null) | grep -q -- '--chunk-size'
}

venv_reuse_or_remove healthy
venv_create
pip_offline "torch==$TORCH_VERSION"
pip_offline "torch==$TORCH_VERSION" "lmcache==$LMCACHE_VERSION"
healthy || venv_fail "'lmcache server --help' does not list --chunk-size in $VENV"
venv_built ''
