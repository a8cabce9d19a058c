# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Learning N on a CUDA host: the plain launch against the probe module, full and shrunken.

    python benchmarks/gpu_probe_benchmark.py --venv /opt/v053 --host-vars tests/gpu/h200-host-vars.yml \\
        --out benchmarks/results/gpu-probe-<stamp>.json

For each model directory (default: the Qwen3.5-0.8B and Qwen3.6-27B fixtures) three launches run at the
same time: the plain recipe (``vllm serve DIR --load-format dummy --enforce-eager --mamba-cache-mode align
--enable-prefix-caching --max-model-len 4096``, read the line, kill), the module with ``shrink: auto`` and
with ``shrink: never`` (through ``ansible-playbook``). GPU memory of each launch is the sum over its
process tree of what ``nvidia-smi --query-compute-apps`` reports, sampled every 0.2 s until the launch
ends; N is what each printed. Running the three at once shares the 16 CPU cores, so their wall times
are comparable with each other, not with a lone launch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests", "gpu"), os.path.join(REPO, "tests")]

import gpulib as g  # noqa: E402
import acceptance as acc  # noqa: E402
from fleet_probe_play import ProbePlay  # noqa: E402

LINE = re.compile(r"Setting attention block size to (\d+) tokens")


class TreeMemory(threading.Thread):
    """Peak GPU memory (MiB) of the process trees under the registered root pids."""

    def __init__(self):
        super().__init__(daemon=True)
        self.roots = {}
        self.peak = {}
        self.stop_ev = threading.Event()
        self.total_peak = 0

    def add(self, name, pid):
        self.roots[name] = pid
        self.peak.setdefault(name, 0)

    def run(self):
        while not self.stop_ev.is_set():
            apps = dict(g.gpu_apps())
            total = (g.gpu_memory_used_mib() or [0])[0]
            self.total_peak = max(self.total_peak, total)
            for name, root in list(self.roots.items()):
                pids = set([root] + g.children(root))
                used = sum(mib for pid, mib in apps.items() if pid in pids)
                self.peak[name] = max(self.peak[name], used)
            self.stop_ev.wait(0.2)


def plain(name, venv, model_dir, util, extra_args, env, logs, mem, results, timeout=600):
    argv = [os.path.join(venv, "bin", "vllm"), "serve", model_dir, "--load-format", "dummy", "--enforce-eager",
            "--mamba-cache-mode", "align", "--enable-prefix-caching", "--max-model-len", "4096",
            "--gpu-memory-utilization", str(util), "--port", "0"] + list(extra_args)
    # --port 0 is refused by some versions; use a fixed free port instead.
    argv[argv.index("--port") + 1] = str(18000 + len(results))
    full_env = dict(os.environ)
    full_env.update(env)
    log = os.path.join(logs, name + ".log")
    t0 = time.monotonic()
    proc = g.start(argv, full_env, log)
    mem.add(name, proc.pid)
    n = None
    t_line = None
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        with open(log, errors="replace") as fh:
            m = LINE.search(fh.read())
        if m:
            n, t_line = int(m.group(1)), time.monotonic() - t0
            break
        time.sleep(0.2)
    left = g.stop(proc, timeout=30)
    results[name] = {"case": "plain launch", "N": n, "line_s": round(t_line, 1) if t_line else None,
                     "wall_s": round(time.monotonic() - t0, 1), "leftover": left, "argv": argv,
                     "log_tail": [] if n else g.tail(log, 20)}


def probe(name, model_dir, host_vars, shrink, logs, mem, results, work):
    args = acc.probe_args(model_dir, host_vars, shrink=shrink, log_path=os.path.join(logs, name + ".log"),
                          cache_path=os.path.join(work, name + ".fact"))
    play = ProbePlay(os.path.join(work, name), args)
    t0 = time.monotonic()
    proc = play.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    mem.add(name, proc.pid)
    text = proc.communicate(timeout=1200)[0]
    wall = time.monotonic() - t0
    res = play.result() or {"failed": True, "output": text[-3000:]}
    results[name] = {"case": "probe, " + ("shrunken" if shrink == "auto" else "full"), "N": res.get("vllm_block_size"),
                     "wall_s": round(wall, 1), "module_s": res.get("elapsed_s"), "line_s": res.get("probe_elapsed_s"),
                     "probe_mode": res.get("probe_mode"), "shrink_reason": res.get("shrink_reason"),
                     "source": res.get("source"), "failed": res.get("failed", False),
                     "msg": res.get("msg"), "log_line": res.get("log_line")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--venv", required=True)
    p.add_argument("--host-vars", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--logs", default=None)
    p.add_argument("--models", default="qwen3.5-0.8b:0.3,qwen3.6-27b:0.6",
                   help="fixture directory:gpu-memory-utilization of the plain launch, comma separated")
    args = p.parse_args()
    host_vars = acc.load_vars(args.host_vars)
    host_vars["vllm_server_venv"] = args.venv
    work = tempfile.mkdtemp(prefix="gpu-probe-bench-")
    logs = args.logs or os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    env = {k: str(v) for k, v in (host_vars.get("vllm_server_env") or {}).items()}
    extra = list(host_vars.get("vllm_server_extra_args", []))
    if host_vars.get("vllm_server_language_model_only", True):
        extra.append("--language-model-only")
    report = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "venv": args.venv,
              "baseline_mib": (g.gpu_memory_used_mib() or [0])[0], "models": {}}
    for spec in args.models.split(","):
        model, util = spec.split(":")
        model_dir = os.path.join(REPO, "tests", "fixtures", "models", model)
        mem = TreeMemory()
        mem.start()
        results = {}
        threads = [
            threading.Thread(target=plain, args=(model + "-plain", args.venv, model_dir, float(util), extra, env, logs,
                                                 mem, results)),
            threading.Thread(target=probe, args=(model + "-probe-shrunk", model_dir, host_vars, "auto", logs, mem,
                                                 results, work)),
            threading.Thread(target=probe, args=(model + "-probe-full", model_dir, host_vars, "never", logs, mem,
                                                 results, work)),
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(1300)
        mem.stop_ev.set()
        mem.join(10)
        for name, r in results.items():
            r["gpu_peak_mib"] = mem.peak.get(name)
        report["models"][model] = {"cases": results, "group_wall_s": round(time.monotonic() - t0, 1),
                                   "gpu_total_peak_mib": mem.total_peak}
        report["models"][model]["gpu_after_mib"] = g.wait_gpu_released(report["baseline_mib"], timeout=60)
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    for model, m in report["models"].items():
        for name, r in m["cases"].items():
            print("%-28s N=%-5s line %-6s wall %-6s GPU peak %s MiB %s" % (
                name, r.get("N"), r.get("line_s"), r.get("wall_s"), r.get("gpu_peak_mib"),
                "FAILED " + str(r.get("msg"))[:200] if r.get("failed") else ""))


if __name__ == "__main__":
    main()
