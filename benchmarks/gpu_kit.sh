#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The GPU acceptance kit: vLLM 0.24.0, LMCache 0.5.3 and ansible-core (everything the GPU host's image
# lacks beside its torch 2.11), packed in parts that each travel with one command, and the commit under
# test. See docs/gpu.md ("The GPU acceptance of a commit") for the sequence of commands.
#
#   bash benchmarks/gpu_kit.sh build            # on the control node, in the checkout to test
#   bash .gpu-parts/gpu_kit.sh recv             # on the GPU host: keep the parts carried with this command
#   bash .gpu-parts/gpu_kit.sh start [CASES]    # on the GPU host: unpack, start the detached driver
#   bash .gpu-parts/gpu_kit.sh poll [SECONDS]   # on the GPU host: wait, show the driver's log, copy results
#
# build: the closure of the three pins is resolved with uv's resolver, minus torch, triton and what the
# image already has (GPU_KIT_PREINSTALLED, one name a line), downloaded as manylinux x86_64 cp312 wheels,
# installed with pip --target, trimmed of what Hopper does not load (FA2, DeepGEMM, the SM100 FMHA, the Rust
# front end, static libraries), packed as tar.xz (cached in GPU_KIT_CACHE, default ~/.cache/fleet-gpu-kit)
# and split into parts of 55 MiB under .gpu-parts/ (ignored). The commit under test travels as
# `git archive HEAD` with the list of its blobs, checked on the GPU host before anything runs.
# The L2 cases' part (l2.part-*, cached as l2-glide<version>.tar.xz): Debian bookworm's redis-server (from the
# .deb files of L2_DEBS, with the libraries an Ubuntu 24.04 image may lack, beside it in lib/) and the store
# client LMCache's valkey adapter imports (valkey-glide-sync, the version kv_pool.py names), unpacked to
# $KIT_ROOT/l2 and put on the venv's path.
# The P2P cases' parts (p2p.part-*, cached as p2p-nixl<version>.tar.xz): NIXL's Python bindings for CUDA 13
# (nixl-cu13, with the UCX it bundles), LMCache's P2P transfer channel, unpacked to $KIT_ROOT/p2p.
set -euo pipefail

KIT_ROOT=${GPU_KIT_ROOT:-/opt/gpukit}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GPU_KIT_PREINSTALLED=${GPU_KIT_PREINSTALLED:-$HERE/gpu_kit_preinstalled.txt}
PART_SIZE=55M
VLLM_PIN=vllm==0.24.0
LMCACHE_PIN=lmcache==0.5.3
ANSIBLE_PIN=ansible-core==2.19.14
# redis-server is a link to redis-check-rdb (redis-tools); jemalloc, lzf and libatomic are what an Ubuntu 24.04
# image may lack of its libraries (ldd: the others come with its base system and python3).
L2_DEBS="redis-server redis-tools libjemalloc2 liblzf1 libatomic1"
L2_LIBS="libjemalloc.so.2 liblzf.so.1 libatomic.so.1"
NIXL_PIN=nixl-cu13==1.5.1
# Provided by the image (torch 2.11.0+cu130) or not loaded on Hopper: kept out of the resolution.
EXCLUDED="torch torchaudio torchvision triton numpy cupy-cuda13x flashinfer-python flashinfer-cubin
flashinfer-jit-cache nvidia-cutlass-dsl nvidia-cutlass-dsl-libs-base nvidia-cutlass-dsl-libs-cu13 nvidia-cuda-nvcc
nvidia-cuda-crt nvidia-cuda-cccl nvidia-cuda-tileiras nvidia-nvvm tilelang z3-solver humming-kernels quack-kernels
cuda-tile cuda-python nvidia-cudnn-frontend tokenspeed-mla fastsafetensors"
PLATFORMS="manylinux_2_31_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64
manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64
linux_x86_64 any"

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

closure_check() {  # $1: wheels dir, $2: preinstalled names; fails when a wheel needs what neither has
    python3 - "$1" "$2" "$EXCLUDED" <<'EOF'
import glob, os, sys, zipfile
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name as canon
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython", "extra": ""}
pre = {canon(l.strip()) for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
excluded = {canon(n) for n in sys.argv[3].split()}
kit, needs = {}, []
for whl in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(whl) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    fields = dict(l.split(": ", 1) for l in meta.splitlines() if l.startswith(("Name: ", "Version: ")))
    kit[canon(fields["Name"])] = fields["Version"]
    needs += [(fields["Name"], l.split(": ", 1)[1]) for l in meta.splitlines() if l.startswith("Requires-Dist: ")]
bad = []
for owner, text in needs:
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate(env):
        continue
    name = canon(req.name)
    if name in kit:
        if not req.specifier.contains(kit[name], prereleases=True):
            bad.append("%s needs %s, the kit has %s" % (owner, text, kit[name]))
    elif name not in pre and name not in excluded:
        bad.append("%s needs %s: neither in the kit nor on the GPU image" % (owner, text))
print("closure: %d wheels, %d requirements checked" % (len(kit), len(needs)))
for line in bad:
    print("closure: " + line)
sys.exit(1 if bad else 0)
EOF
}

build_site_archive() {  # $1: cache dir; writes $1/site.tar.xz
    local cache=$1 w
    w=$(mktemp -d)
    log "resolving $VLLM_PIN $LMCACHE_PIN $ANSIBLE_PIN"
    python3 -m venv "$w/uv" && "$w/uv/bin/pip" install -q uv
    printf '%s\n' "$VLLM_PIN" "$LMCACHE_PIN" "$ANSIBLE_PIN" > "$w/req.in"
    for n in $EXCLUDED; do echo "$n; sys_platform == 'never'"; done > "$w/overrides.txt"
    "$w/uv/bin/uv" pip compile "$w/req.in" --override "$w/overrides.txt" --python-version 3.12 \
        --python-platform x86_64-manylinux_2_28 --no-header --no-annotate -o "$w/lock.txt"
    python3 - "$w/lock.txt" "$GPU_KIT_PREINSTALLED" \
        > "$w/need.txt" <<'EOF'
import re, sys
pre = {l.strip().lower().replace('_', '-') for l in open(sys.argv[2]) if l.strip() and not l.startswith('#')}
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith('#') and re.split(r'[=<>; ]', line)[0].lower().replace('_', '-') not in pre:
        print(line)
EOF
    local plat=""
    for p in $PLATFORMS; do plat="$plat --platform $p"; done
    # shellcheck disable=SC2086
    "$w/uv/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat \
        -d "$w/wheels" -r "$w/need.txt"
    closure_check "$w/wheels" "$GPU_KIT_PREINSTALLED"
    # shellcheck disable=SC2086
    "$w/uv/bin/pip" install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
        --implementation cp $plat --target "$w/site" "$w"/wheels/*.whl
    rm -f "$w/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"
    rm -rf "$w/site/vllm/third_party/deep_gemm" "$w/site/vllm/third_party/fmha_sm100" "$w/site/vllm/vllm-rs" \
        "$w/site/bin"
    find "$w/site" -name '*.a' -size +1M -delete
    cp "$w/lock.txt" "$w/need.txt" "$cache/"
    log "packing $(du -sm "$w/site" | cut -f1) MiB"
    tar -C "$w" -cf - site | xz -T0 -6 > "$cache/site.tar.xz.tmp"
    mv "$cache/site.tar.xz.tmp" "$cache/site.tar.xz"
    rm -rf "$w"
}

glide_version() {  # $1: checkout; the store client's version from kv_pool.py (its one place)
    sed -n "s/^CLIENT_VERSION = '\\([0-9.]*\\)'.*/\\1/p" "$1/plugins/module_utils/kv/kv_pool.py"
}

build_l2_archive() {  # $1: archive to write, $2: glide-sync version
    local out=$1 version=$2 w deb lib plat=""
    w=$(mktemp -d)
    log "L2 part: apt-get download $L2_DEBS; valkey-glide-sync==$version"
    # shellcheck disable=SC2086
    (cd "$w" && apt-get download $L2_DEBS 2>&1 | grep -v '^W: Download is performed unsandboxed')
    mkdir -p "$w/l2/redis/lib" "$w/root"
    for deb in "$w"/*.deb; do
        dpkg-deb -x "$deb" "$w/root"
        printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
            "$(sha256sum "$deb" | cut -d' ' -f1)" >> "$w/l2/redis/DEBS"
    done
    cp -L "$w/root/usr/bin/redis-server" "$w/l2/redis/redis-server"
    for lib in $L2_LIBS; do cp -L "$w/root/usr/lib/x86_64-linux-gnu/$lib" "$w/l2/redis/lib/"; done
    LD_LIBRARY_PATH="$w/l2/redis/lib" "$w/l2/redis/redis-server" --version
    for p in $PLATFORMS; do plat="$plat --platform $p"; done
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat \
        -d "$w/wheels" "valkey-glide-sync==$version"
    # shellcheck disable=SC2086
    python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 --implementation cp \
        $plat --target "$w/l2/site" "$w"/wheels/*.whl
    tar -C "$w" -cf - l2 | xz -T0 -6 > "$out.tmp"
    mv "$out.tmp" "$out"
    rm -rf "$w"
}

build_p2p_archive() {  # $1: archive to write
    local out=$1 w plat=""
    w=$(mktemp -d)
    log "P2P part: $NIXL_PIN"
    for p in $PLATFORMS; do plat="$plat --platform $p"; done
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat \
        -d "$w/wheels" "$NIXL_PIN"
    # shellcheck disable=SC2086
    python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 --implementation cp \
        $plat --target "$w/p2p/site" "$w"/wheels/*.whl
    tar -C "$w" -cf - p2p | xz -T0 -6 > "$out.tmp"
    mv "$out.tmp" "$out"
    rm -rf "$w"
}

cmd_build() {
    local top cache parts commit l2
    top=$(git rev-parse --show-toplevel)
    cache=${GPU_KIT_CACHE:-$HOME/.cache/fleet-gpu-kit}
    parts="$top/.gpu-parts"
    mkdir -p "$cache"
    [ -s "$cache/site.tar.xz" ] || build_site_archive "$cache"
    l2="$cache/l2-glide$(glide_version "$top").tar.xz"
    [ -s "$l2" ] || build_l2_archive "$l2" "$(glide_version "$top")"
    p2p="$cache/p2p-${NIXL_PIN//==/-}.tar.xz"
    [ -s "$p2p" ] || build_p2p_archive "$p2p"
    rm -rf "$parts" && mkdir -p "$parts"
    split -b "$PART_SIZE" -d -a 2 "$cache/site.tar.xz" "$parts/kit.part-"
    split -b "$PART_SIZE" -d -a 2 "$l2" "$parts/l2.part-"
    split -b "$PART_SIZE" -d -a 2 "$p2p" "$parts/p2p.part-"
    (cd "$parts" && sha256sum kit.part-* l2.part-* p2p.part-* > kit.sha256)
    commit=$(git -C "$top" rev-parse HEAD)
    git -C "$top" archive --format=tar.gz -o "$parts/tree.tar.gz" "$commit"
    git -C "$top" ls-tree -r "$commit" > "$parts/tree.ls"
    echo "$commit" > "$parts/commit"
    cp "$top/benchmarks/gpu_kit.sh" "$top/benchmarks/gpu_kit_driver.sh" "$parts/"
    if ! git -C "$top" diff --quiet HEAD; then
        log "note: the working tree has uncommitted changes; the kit tests $commit without them"
    fi
    local n i last l2carry=""
    n=$(find "$parts" -maxdepth 1 -name 'kit.part-*' | wc -l)
    last=$(printf '%02d' $((n - 1)))
    for f in "$parts"/l2.part-*; do l2carry="$l2carry, \".gpu-parts/$(basename "$f")\""; done
    log "commit $commit; $n parts in $parts:"
    ls -l "$parts"
    echo
    echo "run these on the GPU host, each right after the other (the host stays warm 30 s):"
    for ((i = 0; i < n - 1; i++)); do
        printf '  run  command: bash .gpu-parts/gpu_kit.sh recv   carry: [".gpu-parts/gpu_kit.sh", ".gpu-parts/kit.part-%02d"]\n' "$i"
    done
    for f in "$parts"/p2p.part-*; do
        printf '  run  command: bash .gpu-parts/gpu_kit.sh recv   carry: [".gpu-parts/gpu_kit.sh", ".gpu-parts/%s"]   (P2P cases)\n' "$(basename "$f")"
    done
    printf '  run  command: bash .gpu-parts/gpu_kit.sh start  carry: [".gpu-parts/gpu_kit.sh", ".gpu-parts/gpu_kit_driver.sh", ".gpu-parts/kit.part-%s"%s, ".gpu-parts/kit.sha256", ".gpu-parts/tree.tar.gz", ".gpu-parts/tree.ls", ".gpu-parts/commit"]\n' "$last" "$l2carry"
    echo '  run  command: bash .gpu-parts/gpu_kit.sh poll 540   carry: [".gpu-parts/gpu_kit.sh"]   (again until it prints DONE)'
    echo '(start and the first poll may share one command: "... start CASES && bash .gpu-parts/gpu_kit.sh poll 480";'
    echo ' a host left idle more than 30 s between two commands is given back, and the run with it)'
}

cmd_recv() {
    local here
    here=$(cd "$(dirname "$0")" && pwd)
    mkdir -p "$KIT_ROOT/parts"
    echo "$(date -u +%FT%TZ) $(hostname) $(cat /proc/sys/kernel/random/boot_id)" >> "$KIT_ROOT/calls"
    log "calls that reached this host (a fresh host has one line):"
    cat "$KIT_ROOT/calls"
    for f in "$here"/kit.part-* "$here"/l2.part-* "$here"/p2p.part-* "$here"/kit.sha256 "$here"/tree.tar.gz "$here"/tree.ls "$here"/commit \
             "$here"/gpu_kit_driver.sh; do
        [ -e "$f" ] && cp "$f" "$KIT_ROOT/parts/"
    done
    log "parts here: $(find "$KIT_ROOT/parts" -maxdepth 1 -type f -printf '%f\n' | sort | tr '\n' ' ')"
    df -h "$KIT_ROOT" | tail -1
}

make_venv() {  # the kit's site first, then the image's own site-packages (its torch), with their .pth files
    local venv=$KIT_ROOT/venv sp
    python3 -m venv --without-pip "$venv"
    sp=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    {
        echo "$KIT_ROOT/site"
        [ -d "$KIT_ROOT/l2/site" ] && echo "$KIT_ROOT/l2/site"
        [ -d "$KIT_ROOT/p2p/site" ] && echo "$KIT_ROOT/p2p/site"
        python3 -c 'import site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    print("import site; site.addsitedir(%r)" % d)'
    } > "$sp/gpukit.pth"
    local name mod
    for pair in vllm:vllm.entrypoints.cli.main lmcache:lmcache.cli.main ansible-playbook:ansible.cli.playbook; do
        name=${pair%%:*}
        mod=${pair#*:}
        printf '#!%s/bin/python\nimport sys\nfrom %s import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
            "$venv" "$mod" > "$venv/bin/$name"
        chmod 755 "$venv/bin/$name"
    done
}

cmd_start() {
    local cases=${1:-}
    cmd_recv
    cd "$KIT_ROOT/parts"
    # The P2P cases' part is needed only by them: without it here, the other cases run.
    if ls p2p.part-* > /dev/null 2>&1; then
        cp kit.sha256 kit.needed.sha256
    elif [[ ",$cases," == *,p2p-* ]]; then
        echo "MISSING P2P PART: the cases $cases include P2P cases; send p2p.part-* (recv) first"
        exit 1
    else
        grep -v ' p2p\.part-' kit.sha256 > kit.needed.sha256
    fi
    if ! sha256sum -c --quiet kit.needed.sha256; then
        echo "MISSING OR BROKEN PARTS: this host lost the earlier calls' parts (a fresh host?); send every part again"
        exit 1
    fi
    log "unpacking"
    rm -rf "$KIT_ROOT/site" "$KIT_ROOT/l2" "$KIT_ROOT/p2p" "$KIT_ROOT/tree" "$KIT_ROOT/venv" "$KIT_ROOT/results"
    awk '$2 ~ /^kit\.part-/ {print $2}' kit.sha256 | xargs cat | xz -d -T0 | tar -C "$KIT_ROOT" -xf -
    if grep -q ' l2\.part-' kit.sha256; then
        awk '$2 ~ /^l2\.part-/ {print $2}' kit.sha256 | xargs cat | xz -d -T0 | tar -C "$KIT_ROOT" -xf -
    fi
    if grep -q ' p2p\.part-' kit.needed.sha256; then
        awk '$2 ~ /^p2p\.part-/ {print $2}' kit.needed.sha256 | xargs cat | xz -d -T0 | tar -C "$KIT_ROOT" -xf -
    fi
    mkdir -p "$KIT_ROOT/tree" "$KIT_ROOT/results"
    tar -C "$KIT_ROOT/tree" -xzf tree.tar.gz
    make_venv
    check_l2
    check_p2p
    log "unpacked: $(du -sm "$KIT_ROOT/site" | cut -f1) MiB; importing what the units and the plan load"
    # What vLLM's API server, LMCache's connector and server and ansible-playbook import at start: a kit that
    # misses a module fails here, in seconds, instead of in the first case's probe.
    if ! "$KIT_ROOT/venv/bin/python" -c 'import torch, vllm, lmcache, xgrammar, ansible
import vllm.entrypoints.openai.api_server, lmcache.integration.vllm.lmcache_mp_connector, lmcache.cli.main
import ansible.cli.playbook
print("vllm", vllm.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())'; then
        echo "KIT IMPORT FAILED: the driver was not started"
        exit 1
    fi
    cd "$KIT_ROOT"
    GPU_KIT_ROOT=$KIT_ROOT GPU_KIT_CASES=$cases setsid nohup bash "$KIT_ROOT/parts/gpu_kit_driver.sh" \
        > "$KIT_ROOT/driver.log" 2>&1 < /dev/null &
    log "driver started (pid $!), log $KIT_ROOT/driver.log"
    sleep 5
    tail -5 "$KIT_ROOT/driver.log"
}

check_l2() {  # the L2 cases' part: a failure here fails only those cases (the acceptance cases still run)
    local redis=$KIT_ROOT/l2/redis
    if LD_LIBRARY_PATH="$redis/lib" ldd "$redis/redis-server" | grep 'not found' \
        || ! LD_LIBRARY_PATH="$redis/lib" "$redis/redis-server" --version \
        || ! "$KIT_ROOT/venv/bin/python" -c 'import glide_sync, lmcache.v1.distributed.l2_adapters.valkey_l2_adapter
print("glide_sync and LMCache valkey adapter import")' 2>&1 | tail -1; then
        echo "L2 PART BROKEN: the l2 cases will fail"
    fi
}

check_p2p() {  # the P2P cases' part: a failure here fails only those cases
    [ -d "$KIT_ROOT/p2p/site" ] || return 0
    if ! "$KIT_ROOT/venv/bin/python" -c 'from lmcache.v1.distributed.transfer_channel.impl import nixl_impl
agent, config = nixl_impl._load_nixl()
print("NIXL loads:", agent.__module__)' 2>&1 | tail -2; then
        echo "P2P PART BROKEN: the p2p cases will fail"
    fi
}

cmd_poll() {
    local wait=${1:-540} t0
    t0=$(date +%s)
    while [ ! -e "$KIT_ROOT/results/DONE" ] && [ $(($(date +%s) - t0)) -lt "$wait" ]; do
        sleep 5
    done
    tail -40 "$KIT_ROOT/driver.log"
    for f in $(find "$KIT_ROOT"/work/*/logs -maxdepth 1 -name '*.log' -printf '%T@ %p\n' 2>/dev/null \
               | sort -rn | head -2 | cut -d' ' -f2-); do
        echo "--- $f"
        tail -4 "$f" | cut -c1-300
    done
    if [ -n "${OUT:-}" ]; then  # the result so far (written after every case), the logs once done
        cp "$KIT_ROOT"/results/*.json "$OUT/" 2>/dev/null || true
        cp "$KIT_ROOT"/results/*logs*.tar.xz "$OUT/" 2>/dev/null || true
        ls -l "$OUT"
    fi
    if [ -e "$KIT_ROOT/results/DONE" ]; then
        echo "DONE: $(cat "$KIT_ROOT/results/DONE")"
    else
        echo "RUNNING (poll again at once)"
    fi
}

case ${1:-} in
    build) cmd_build ;;
    recv) cmd_recv ;;
    start) shift; cmd_start "${1:-}" ;;
    poll) shift; cmd_poll "${1:-540}" ;;
    *) echo "usage: $0 build|recv|start [CASES]|poll [SECONDS]" >&2; exit 2 ;;
esac
