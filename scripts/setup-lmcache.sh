#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Create (or reuse when healthy) the controller venv with lmcache (the LMCache server).
# torch is installed first as the CPU build, so lmcache's unpinned "torch" does not pull a CUDA one.
# Installs only from the wheelhouse (filled first by download-wheels.sh).
# Prints the venv path as the last line.
#
# Env: FLEET_CACHE (default /var/cache/lmcache-vllm-fleet), WHEELHOUSE, VENV, PYTHON (3.11).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FLEET_CACHE="${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}"
WHEELHOUSE="${WHEELHOUSE:-$FLEET_CACHE/wheelhouse}"
LMCACHE_VERSION="${LMCACHE_VERSION:-0.5.6}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0+cpu}"
VENV="${VENV:-$FLEET_CACHE/lmcache-$LMCACHE_VERSION}"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { echo "setup-lmcache: $*" >&2; }

pip_offline() {
    "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "$@"
}

healthy() {
    [ -x "$VENV/bin/lmcache" ] || return 1
    "$VENV/bin/python" - "$LMCACHE_VERSION" "$TORCH_VERSION" <<'PY' || return 1
import sys
from importlib.metadata import version
assert version("lmcache") == sys.argv[1], version("lmcache")
assert version("torch") == sys.argv[2], version("torch")
PY
    # lmcache drops every server flag when its imports fail: check one is listed.
    (cd / && "$VENV/bin/lmcache" server --help 2>/dev/null) | grep -q -- '--chunk-size'
}

"$here/download-wheels.sh" "$WHEELHOUSE" >&2

if [ -d "$VENV" ]; then
    if healthy; then
        log "reusing healthy $VENV"
        echo "$VENV"
        exit 0
    fi
    log "$VENV is broken; rebuilding"
    rm -rf "$VENV"
fi

start=$SECONDS
log "creating $VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
pip_offline "torch==$TORCH_VERSION"
pip_offline "torch==$TORCH_VERSION" "lmcache==$LMCACHE_VERSION"
if ! healthy; then
    log "'lmcache server --help' does not list --chunk-size in $VENV"
    exit 1
fi
log "built in $((SECONDS - start)) s"
echo "$VENV"
