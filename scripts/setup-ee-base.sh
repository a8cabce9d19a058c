#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Build the execution environment base image  localhost/lmcache-vllm-fleet-ee-base:latest  (the base that
# execution-environment.yml names) from Debian packages alone: mmdebstrap bookworm minbase with python3 (3.11), a
# venv of it at /opt/ee (pip, ensurepip) and the machine's extra CA certificates, imported into rootful podman. No
# container registry is needed; ansible-builder then adds ansible-core, ansible-runner and the collection on top
# (scripts/build-ee.sh).
#
# Host fix-up (every run): ansible-navigator refuses to run an execution environment with podman unless the
# directory /dev/mqueue exists (POSIX message queues); a fresh VM or container may lack it.
#
# The image carries a label with the hash of its recipe and is rebuilt only when the recipe changes, so a second
# run takes a second.
#
# Usage: scripts/setup-ee-base.sh          (as root)
# Env:   EE_BASE_IMAGE (default localhost/lmcache-vllm-fleet-ee-base:latest), FORCE_REBUILD=1.
set -euo pipefail

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
EE_BASE_IMAGE="${EE_BASE_IMAGE:-localhost/lmcache-vllm-fleet-ee-base:latest}"
LABEL="org.lmcache-vllm-fleet.recipe"

if [ "$(id -u)" != 0 ]; then
    echo "setup-ee-base: must run as root (rootful podman, mmdebstrap --mode=root)" >&2
    exit 1
fi

missing=()
for p in podman mmdebstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -d /dev/mqueue ]; then
    mkdir -m 1777 /dev/mqueue
fi

# >>> ee-base recipe
# Debian's python3 refuses `ensurepip` and system-wide pip installs, which ansible-builder runs: the image's Python
# is a venv of Debian's python3 at /opt/ee (first on PATH), where ensurepip and pip work as ansible-builder expects.
# pip there reads the system CA store (PIP_CERT), as Debian's own pip does.
build_ee_base_image() {
    local mirror
    mirror=$(apt-cache policy | awk '$3 == "bookworm/main" {print $2; exit}')
    if [ -z "$mirror" ]; then
        echo "setup-ee-base: no bookworm/main apt source configured on this machine (apt-cache policy); configure one first" >&2
        return 1
    fi
    # The hooks are single-quoted on purpose: mmdebstrap expands "$1" (the new root).
    # shellcheck disable=SC2016
    mmdebstrap --quiet --mode=root --variant=minbase \
        --include=python3,python3-venv,ca-certificates \
        --customize-hook='cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" 2>/dev/null || true; chroot "$1" update-ca-certificates >/dev/null 2>&1' \
        --customize-hook='chroot "$1" python3 -m venv /opt/ee' \
        --customize-hook='rm -f "$1/etc/hostname"; : > "$1/etc/machine-id"' \
        --customize-hook='chroot "$1" apt-get clean; rm -rf "$1"/var/lib/apt/lists/*' \
        bookworm - "$mirror" |
        podman import --quiet --change 'CMD ["/bin/bash"]' \
            --change 'ENV PATH=/opt/ee/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
            --change "LABEL $LABEL=$1" - "$EE_BASE_IMAGE" >/dev/null
}
# <<< ee-base recipe

recipe="$(sed -n '/^# >>> ee-base recipe/,/^# <<< ee-base recipe/p' "$self" | sha256sum | cut -c1-16)"
have="$(podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$EE_BASE_IMAGE" 2>/dev/null || true)"
if [ "${FORCE_REBUILD:-0}" = 1 ] || [ "$have" != "$recipe" ]; then
    t0=$SECONDS
    old_id="$(podman image inspect --format '{{.Id}}' "$EE_BASE_IMAGE" 2>/dev/null || true)"
    echo "setup-ee-base: building $EE_BASE_IMAGE (recipe $recipe)"
    build_ee_base_image "$recipe"
    # The superseded image goes once nothing uses it (an image built on it keeps it).
    [ -z "$old_id" ] || podman rmi "$old_id" >/dev/null 2>&1 || true
    echo "setup-ee-base: built in $((SECONDS - t0)) s"
else
    echo "setup-ee-base: $EE_BASE_IMAGE is up to date (recipe $recipe)"
fi
