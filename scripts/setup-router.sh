#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The real vllm-router for the tests: its wheels (and its dependencies') in their own wheelhouse, which the
# role vllm_router installs from on a podman test host (tests/real/test_router_role_real.py), and a controller
# venv with the router (tests/real/test_router_real.py). The version is the role's default
# (roles/vllm_router/defaults/main.yml). Reuses both when healthy; prints the venv path as the last line.
#
# Env: FLEET_CACHE (default /var/cache/lmcache-vllm-fleet), FLEET_ROUTER_WHEELHOUSE, VENV, PYTHON (3.11).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROUTER_VERSION=$(sed -n 's/^vllm_router_version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$here/../roles/vllm_router/defaults/main.yml")
[ -n "$ROUTER_VERSION" ] || { echo "setup-router: no vllm_router_version in the role's defaults" >&2; exit 1; }
export WHEELHOUSE="${FLEET_ROUTER_WHEELHOUSE:-${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}/router-wheelhouse}"
# shellcheck source=scripts/lib-venv.sh
. "$here/lib-venv.sh" setup-router
VENV="${VENV:-$FLEET_CACHE/vllm-router-$ROUTER_VERSION}"

if ! ls "$WHEELHOUSE"/vllm_router-"$ROUTER_VERSION"-*.whl >/dev/null 2>&1; then
    mkdir -p "$WHEELHOUSE"
    "$PYTHON" -m pip download --quiet --only-binary=:all: -d "$WHEELHOUSE" "vllm-router==$ROUTER_VERSION"
fi

healthy() {
    venv_installed vllm-router "vllm-router==$ROUTER_VERSION" || return 1
    "$VENV/bin/vllm-router" --help 2>/dev/null | grep -q -- '--policy'
}

if healthy; then
    echo "$VENV"
    exit 0
fi
rm -rf "$VENV"
venv_create
pip_offline "vllm-router==$ROUTER_VERSION"
healthy || venv_fail "'vllm-router --help' does not list --policy in $VENV"
venv_built ''
