# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU acceptance of one commit: every case of tests/gpu/acceptance.py in a row, one result file.

    python tests/gpu/suite.py --commit <sha> --venv /opt/gpukit/venv --out result.json --logs DIR \\
        [--cases 27b-gmu0.6,l2-27b,27b-gmu0.5,27b-gmu0.9,0.8b,l2-0.8b] [--redis-server PATH]

Each case renders its units with ``playbooks/plan.yml`` from the host variables of ``tests/gpu/`` with no
``vllm_server_max_num_seqs`` (only the venvs and the memory utilization are set over them), probes N with
the collection's module (one probe cache per host, as a deployed host keeps it: the module launches vLLM
when no cached entry matches N's inputs), starts exactly the rendered commands and checks serving, LMCache
hits and the score-level comparison (``scores.py``). The cases run one after the other on one GPU: two
vLLMs starting at once on one GPU fail each other's memory profiling. The result names the commit, the
tree's check against it (``tree_check``, from ``benchmarks/gpu_kit.sh``) and every case.

The ``l2-*`` cases are benchmarks of the L2 pool on a store on the same host (``l2case.py``): TTFT of a miss, an L1
hit and an L2 hit per chunk multiple and prompt length, the store's bytes per key, the L2 load throughput, the
break-even; each runs after the acceptance case of its model, on its probe cache and compile caches.
The ``p2p-*`` cases (``p2pcase.py``) measure LMCache's peer-to-peer L2 instead of a store: a prompt computed through
one LMCache server is loaded by a second one from the first one's L1 (NIXL; ``-tcp``: UCX over TCP).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE]

import acceptance  # noqa: E402
import l2case  # noqa: E402
import p2pcase  # noqa: E402

MODELS = os.path.join(REPO, "tests", "fixtures", "models")
CASES = {
    "27b-gmu0.6": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.6),
    "27b-gmu0.5": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.5),
    "27b-gmu0.9": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.9),
    "0.8b": ("qwen3.5-0.8b", "h200-host-vars.yml", None),
    "l2-27b": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.6),
    "l2-0.8b": ("qwen3.5-0.8b", "h200-host-vars.yml", None),
    "p2p-27b": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.6),
    "p2p-27b-tcp": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.6),
}
# The P2P cases' extra arguments (p2pcase.py): UCX's transports for the transfer channel, and an L1 that holds every
# prompt sent through server A (the 27B's warm-up, 8k and 16k prompts: 50 chunks of 784 tokens at 262,144 bytes per
# token, about 10.3 GB; with the host variables' 8 GB, A evicted two of the 8k prompt's ten chunks before B asked).
P2P_L1 = ["--set", "lmcache_server_l1_size_gb=16"]
# -tcp: UCX's TCP transport for the chunks, with cuda_copy beside it (NIXL's CUDA build refused to create its UCX
# backend with UCX_TLS=tcp alone on the H200, commit 8c5f2fe; on CPU, without CUDA, tcp alone works).
P2P_TCP = "tcp,cuda_copy"
P2P_ARGS = {"p2p-27b": P2P_L1, "p2p-27b-tcp": P2P_L1 + ["--ucx-tls", P2P_TCP]}
# Seconds of measurements an L2 case may spend after its vLLM is healthy (then the steps left are skipped). Each
# restart a step needs is budgeted at the first start's time + 30 s: the 0.8B's first start took 200 s cold on the
# H200 (c4c2f15, where 240 s left no time for its L2 hits), so three restarts (k=1 hits, k=4 misses and hits) need
# about 690 s.
L2_BUDGET = {"l2-27b": 420, "l2-0.8b": 720}
# The chunk multiples of each L2 case, in the order they run (each k restarts vLLM once more for its L2 hits, and
# each k after the first once before its misses): 4 next to 1 answers whether a chunk of kN holds one Mamba state
# or k. The 27B's k=2 (two states, 411,041,792 bytes per key on 5afcd81) never fitted the 420 s budget after 1 and 4.
L2_MULTIPLES = {"l2-27b": "1,4", "l2-0.8b": "1,4"}
# A run with less device time names fewer: GPU_KIT_L2_MULTIPLES="l2-0.8b=1;l2-27b=1,4" (the kit's driver keeps it).
L2_MULTIPLES_ENV = "GPU_KIT_L2_MULTIPLES"

# LMCache's wait for one store request in the L2 cases (lmcache_server_kv_request_timeout): above the 2.9 s a
# 27B key took on the H200, so that the throughput is measured rather than the timeout.
L2_REQUEST_TIMEOUT = 10
# The 27B first: its cases are the ones the Mamba clamp is about, and the later ones start on the first one's
# compile caches (the units' HOME); an L2 case right after the acceptance case of its model (the same vLLM
# argv: a warm start); each case's result is written as soon as it ends.
DEFAULT_CASES = "27b-gmu0.6,l2-27b,27b-gmu0.5,27b-gmu0.9,0.8b,l2-0.8b"


def l2_multiples(name, environ=None):
    """The chunk multiples of one L2 case: L2_MULTIPLES, or the case's entry of GPU_KIT_L2_MULTIPLES."""
    given = (os.environ if environ is None else environ).get(L2_MULTIPLES_ENV, "")
    chosen = dict(item.split("=", 1) for item in given.split(";") if "=" in item)
    multiples = chosen.get(name, L2_MULTIPLES[name])
    if not all(k.isdigit() and int(k) > 0 for k in multiples.split(",")):
        raise ValueError("%s: %s=%r is not a list of chunk multiples such as 1,4" % (L2_MULTIPLES_ENV, name, multiples))
    return multiples


def case_argv(name, venv, out, work, logs, probe_cache):
    """acceptance.py's arguments for one case."""
    model, host_vars, gmu = CASES[name]
    argv = ["--model-dir", os.path.join(MODELS, model), "--host-vars", os.path.join(HERE, host_vars),
            "--out", out, "--workdir", work, "--logs", logs, "--probe-cache", probe_cache,
            "--set", "vllm_server_venv=" + venv, "--set", "lmcache_server_venv=" + venv]
    if gmu is not None:
        argv += ["--set", "vllm_server_gpu_memory_utilization=%s" % gmu]
    return argv


def l2_argv(name, venv, out, work, logs, probe_cache, redis_server):
    """l2case.py's arguments for one L2 case."""
    argv = case_argv(name, venv, out, work, logs, probe_cache)
    return argv + ["--set", "lmcache_server_kv_request_timeout=%s" % L2_REQUEST_TIMEOUT,
                   "--redis-server", redis_server, "--budget", str(L2_BUDGET[name]),
                   "--multiples", l2_multiples(name)]


def l2_summary(name, res):
    """The line of one L2 case in the suite's table (its rows: l2case.py's summary)."""
    keep = ("k", "prompt_tokens", "miss_s", "l1_hit_s", "l2_hit_s", "l2_vs_miss", "l2_load_GBps_metric",
            "l2_GBps_end_to_end", "break_even_GBps", "bytes_per_key", "mamba_states_per_key")
    return {"case": name, "result": res.get("result"), "N": res.get("N"),
            "vllm_healthy_s": (res.get("timings_s") or {}).get("vllm_healthy"),
            "rows": [{k: row.get(k) for k in keep} for row in res.get("summary") or []],
            "failed_checks": sorted(k for k, v in (res.get("checks") or {}).items() if not v),
            "skipped_steps": res.get("skipped_steps"), "error": "; ".join(res.get("errors") or [])[:1000] or None}


def p2p_summary(name, res):
    """The line of one P2P case in the suite's table (its rows: p2pcase.py's summary)."""
    return {"case": name, "result": res.get("result"), "N": res.get("N"), "ucx_tls": res.get("ucx_tls"),
            "vllm_healthy_s": (res.get("timings_s") or {}).get("vllm_healthy"), "rows": res.get("summary"),
            "first_transfer": {k: (res.get("p2p_first_transfer") or {}).get(k)
                               for k in ("prompt_tokens", "ttft_s", "hit_tokens")},
            "failed_checks": sorted(k for k, v in (res.get("checks") or {}).items() if not v),
            "skipped_steps": res.get("skipped_steps"), "error": "; ".join(res.get("errors") or [])[:1000] or None}


def run_case(name, args, case_dir, probe_cache):
    """One case (acceptance or L2); its result."""
    out = os.path.join(case_dir, "result.json")
    work, logs = os.path.join(case_dir, "work"), os.path.join(case_dir, "logs")
    if name.startswith("l2-"):
        l2case.main(l2_argv(name, args.venv, out, work, logs, probe_cache, args.redis_server))
    elif name.startswith("p2p-"):
        p2pcase.main(case_argv(name, args.venv, out, work, logs, probe_cache) + P2P_ARGS[name])
    else:
        acceptance.main(case_argv(name, args.venv, out, work, logs, probe_cache))
    with open(out) as fh:
        return json.load(fh)


def summary(name, res):
    """The line of one case in the suite's table."""
    mamba = res.get("mamba") or {}
    verdict = (res.get("scores") or {}).get("verdict") or {}
    cmp_ = ((res.get("scores") or {}).get("compare_to_fresh") or {}).get("lmcache") or {}
    return {"case": name, "result": res.get("result"), "N": res.get("N"),
            "probe_source": (res.get("probe") or {}).get("source"),
            "gpu_memory_utilization": (res.get("inputs") or {}).get("vllm_server_gpu_memory_utilization"),
            "rendered_max_num_seqs": mamba.get("unit_max_num_seqs"),
            "plan_M": (mamba.get("plan") or {}).get("mamba_cache_blocks") if isinstance(mamba.get("plan"), dict) else None,
            "plan_M_source": (mamba.get("plan") or {}).get("source") if isinstance(mamba.get("plan"), dict) else None,
            "vllm_M": mamba.get("M"), "vllm_refused_M": (mamba.get("vllm_log") or {}).get("refused_mamba_cache_blocks"),
            "vllm_healthy_s": (res.get("timings_s") or {}).get("vllm_healthy"),
            "lmcache_hit_tokens": (res.get("metrics") or {}).get("lmcache hit tokens (served from LMCache)"),
            "logprob_max_abs_diff": cmp_.get("max_abs_diff"), "logprob_mean_abs_diff": cmp_.get("mean_abs_diff"),
            "equal_token_share": cmp_.get("equal_token_share"), "bound": verdict.get("bound"),
            "discriminating": verdict.get("discriminating"),
            "failed_checks": sorted(k for k, v in (res.get("checks") or {}).items() if not v),
            "error": res.get("error") or res.get("reason")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--commit", required=True, help="the commit the tree is (git rev-parse HEAD where it was made)")
    p.add_argument("--tree-check", help="JSON file of the tree's check against the commit")
    p.add_argument("--venv", required=True, help="the venv with vLLM, LMCache and ansible-core")
    p.add_argument("--out", required=True)
    p.add_argument("--logs", required=True, help="directory for every case's logs and result")
    p.add_argument("--cases", default=DEFAULT_CASES)
    p.add_argument("--redis-server", default="redis-server", help="the L2 cases' store (Debian's redis-server)")
    args = p.parse_args(argv)
    names = [c for c in args.cases.split(",") if c]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        p.error("unknown cases %s (known: %s)" % (unknown, ", ".join(CASES)))
    tree = {}
    if args.tree_check:
        with open(args.tree_check) as fh:
            tree = json.load(fh)
    res = {"commit": args.commit, "tree_check": tree, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "cases": {}, "summary": []}
    if shutil.which("nvidia-smi"):
        res["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=False).stdout.strip()
    probe_cache = os.path.join(args.logs, "probe-cache", "vllm_block_size.fact")
    for name in names:
        t0 = time.monotonic()
        case_dir = os.path.join(args.logs, name)
        os.makedirs(case_dir, exist_ok=True)
        print("[%s] case %s" % (time.strftime("%H:%M:%S"), name), flush=True)
        try:
            case = run_case(name, args, case_dir, probe_cache)
        except Exception as exc:  # noqa: BLE001 - a case that broke is a failed case; the next one runs
            case = {"result": "fail", "error": "%s: %s" % (type(exc).__name__, str(exc)[-2000:])}
        case["wall_s"] = round(time.monotonic() - t0, 1)
        res["cases"][name] = case
        res["summary"].append((l2_summary if name.startswith("l2-") else p2p_summary if name.startswith("p2p-")
                               else summary)(name, case))
        print(json.dumps(res["summary"][-1]), flush=True)
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tree_ok = not tree or tree.get("matches") is True
    results = [s["result"] for s in res["summary"]]
    res["result"] = "pass" if names and tree_ok and all(r == "pass" for r in results) else "fail"
    if results and all(r is None for r in results) and all("skipped" in c for c in res["cases"].values()):
        res["result"] = "skipped"
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print("suite: %s (%s)" % (res["result"], ", ".join("%s=%s" % (s["case"], s["result"]) for s in res["summary"])))
    return 0 if res["result"] in ("pass", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
