# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU acceptance of one commit: every case of tests/gpu/acceptance.py in a row, one result file.

    python tests/gpu/suite.py --commit <sha> --venv /opt/gpukit/venv --out result.json --logs DIR \\
        [--cases 27b-gmu0.6,27b-gmu0.5,27b-gmu0.9,0.8b]

Each case renders its units with ``playbooks/plan.yml`` from the host variables of ``tests/gpu/`` with no
``vllm_server_max_num_seqs`` (only the venvs and the memory utilization are set over them), probes N with
the collection's module (one probe cache per host, as a deployed host keeps it: the module launches vLLM
when no cached entry matches N's inputs), starts exactly the rendered commands and checks serving, LMCache
hits and the score-level comparison (``scores.py``). The cases run one after the other on one GPU: two
vLLMs starting at once on one GPU fail each other's memory profiling. The result names the commit, the
tree's check against it (``tree_check``, from ``benchmarks/gpu_kit.sh``) and every case.
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

MODELS = os.path.join(REPO, "tests", "fixtures", "models")
CASES = {
    "27b-gmu0.6": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.6),
    "27b-gmu0.5": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.5),
    "27b-gmu0.9": ("qwen3.6-27b", "h200-27b-host-vars.yml", 0.9),
    "0.8b": ("qwen3.5-0.8b", "h200-host-vars.yml", None),
}
# The 27B first: its cases are the ones the Mamba clamp is about, and the later two start on the first one's
# compile caches (the units' HOME); each case's result is written as soon as it ends.
DEFAULT_CASES = "27b-gmu0.6,27b-gmu0.5,27b-gmu0.9,0.8b"


def case_argv(name, venv, out, work, logs, probe_cache):
    """acceptance.py's arguments for one case."""
    model, host_vars, gmu = CASES[name]
    argv = ["--model-dir", os.path.join(MODELS, model), "--host-vars", os.path.join(HERE, host_vars),
            "--out", out, "--workdir", work, "--logs", logs, "--probe-cache", probe_cache,
            "--set", "vllm_server_venv=" + venv, "--set", "lmcache_server_venv=" + venv]
    if gmu is not None:
        argv += ["--set", "vllm_server_gpu_memory_utilization=%s" % gmu]
    return argv


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
        out = os.path.join(case_dir, "result.json")
        print("[%s] case %s" % (time.strftime("%H:%M:%S"), name), flush=True)
        acceptance.main(case_argv(name, args.venv, out, os.path.join(case_dir, "work"), os.path.join(case_dir, "logs"),
                                  probe_cache))
        with open(out) as fh:
            case = json.load(fh)
        case["wall_s"] = round(time.monotonic() - t0, 1)
        res["cases"][name] = case
        res["summary"].append(summary(name, case))
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
