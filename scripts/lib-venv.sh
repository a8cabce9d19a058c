# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# What setup-lmcache.sh and setup-vllm-cpu.sh share: the wheelhouse, offline pip, and the
# reuse-when-healthy / rebuild flow of one controller venv. Source it with the script's name:
#   . "$here/lib-venv.sh" setup-NAME
# then set VENV, define the script's health check (CHECK) and call, in this order:
#   venv_reuse_or_remove CHECK...   fill the wheelhouse; reuse $VENV (print it, exit 0) when CHECK succeeds,
#                                   else remove it
#   venv_create                     a new, empty $VENV (then install into it with pip_offline)
#   venv_built NOTE                 print how long it took, then NOTE ('' for none), and the venv path as the last line
# or venv_fail MESSAGE when the new venv is not healthy. For CHECK:
#   venv_installed COMMAND DIST[==VERSION]...   does $VENV have bin/COMMAND and these distributions (at these
#                                   versions)?
#
# Env: FLEET_CACHE (default /var/cache/lmcache-vllm-fleet), WHEELHOUSE, PYTHON (3.11).
# shellcheck shell=bash

venv_script="$1"
venv_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FLEET_CACHE="${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}"
WHEELHOUSE="${WHEELHOUSE:-$FLEET_CACHE/wheelhouse}"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { echo "$venv_script: $*" >&2; }

pip_offline() {
    "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "$@"
}

venv_installed() {
    [ -x "$VENV/bin/$1" ] || return 1
    shift
    "$VENV/bin/python" - "$@" <<'PY'
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, _, wanted = spec.partition("==")
    installed = version(name)
    assert installed == wanted or not wanted, installed
PY
}

venv_reuse_or_remove() {
    "$venv_lib_dir/download-wheels.sh" "$WHEELHOUSE" >&2
    if [ -d "$VENV" ]; then
        if "$@"; then
            log "reusing healthy $VENV"
            echo "$VENV"
            exit 0
        fi
        log "$VENV is broken; rebuilding"
        rm -rf "$VENV"
    fi
}

venv_create() {
    venv_start=$SECONDS
    log "creating $VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
}

venv_fail() {
    log "$1"
    exit 1
}

venv_built() {
    log "built in $((SECONDS - venv_start)) s$1"
    echo "$VENV"
}
