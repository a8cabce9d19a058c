#!/usr/bin/env bash
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The detached driver of the GPU acceptance (started by `gpu_kit.sh start` on the GPU host): checks the
# unpacked tree against the commit's blob list, runs tests/gpu/suite.py from that tree with the kit's
# venv, packs the logs and writes results/DONE. Everything lives under GPU_KIT_ROOT (default /opt/gpukit).
set -uo pipefail

KIT_ROOT=${GPU_KIT_ROOT:-/opt/gpukit}
CASES=${GPU_KIT_CASES:-}
PY=$KIT_ROOT/venv/bin/python
RESULTS=$KIT_ROOT/results
COMMIT=$(cat "$KIT_ROOT/parts/commit")
STAMP=$(date -u +%Y%m%dT%H%M)
NAME=gpu-acceptance-${COMMIT:0:12}-$STAMP
export PYTHONUNBUFFERED=1

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

cd "$KIT_ROOT/tree" || exit 1
log "commit $COMMIT, tree $KIT_ROOT/tree"
"$PY" - "$KIT_ROOT/parts/tree.ls" "$COMMIT" > "$RESULTS/tree-check.json" <<'EOF'
import hashlib, json, os, sys
bad, n = [], 0
for line in open(sys.argv[1]):
    meta, path = line.rstrip("\n").split("\t", 1)
    mode, kind, sha = meta.split()
    if kind != "blob":
        continue
    n += 1
    data = os.readlink(path).encode() if mode == "120000" else open(path, "rb").read()
    if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != sha:
        bad.append(path)
print(json.dumps({"commit": sys.argv[2], "blobs": n, "mismatched": bad[:50], "matches": not bad and n > 0}))
EOF
log "tree check: $(head -c 300 "$RESULTS/tree-check.json")"
"$PY" -c 'import vllm, lmcache, ansible, torch; print("vllm", vllm.__version__, "lmcache", lmcache.__version__, "torch", torch.__version__)'
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader

ARGS=(--commit "$COMMIT" --tree-check "$RESULTS/tree-check.json" --venv "$KIT_ROOT/venv"
      --out "$RESULTS/$NAME.json" --logs "$KIT_ROOT/work" --redis-server "$KIT_ROOT/l2/redis/redis-server")
[ -n "$CASES" ] && ARGS+=(--cases "$CASES")
log "suite ${CASES:-(all cases)}"
"$PY" tests/gpu/suite.py "${ARGS[@]}"
RC=$?
log "suite exit $RC"

# The logs of every case (vLLM, LMCache, probe, rendered plan), without the throw-away collection trees.
tar -C "$KIT_ROOT/work" --exclude='*/collections' --exclude='*/ansible-tmp' -cf - . | xz -T0 -6 \
    > "$RESULTS/$NAME-logs.tar.xz"
ls -l "$RESULTS"
echo "rc=$RC $NAME" > "$RESULTS/DONE"
