# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM + LMCache on a CUDA host with --max-num-batched-tokens N, 2N-1, 2N and 4N under a cold load.

    python benchmarks/gpu_mnbt_benchmark.py --venv /opt/v056 --n 544 \\
        --out benchmarks/results/gpu-mnbt-<stamp>.json

For each value: a fresh LMCache server (``--chunk-size N --separate-object-groups``) and a fresh vLLM
with the LMCacheMPConnector (``--enable-prefix-caching --mamba-cache-mode align``, dummy weights), a
warm-up of 8 requests (other prompts), then the measured load: ``--requests`` concurrent streaming
completions of ``--prompt-tokens`` distinct random tokens each (byte-level fixture tokenizer: one
character = one token), ``--output-tokens`` generated with ``ignore_eos``. Nothing of the measured prompts
is cached anywhere (cold). Measured: time to first token per request, prefill throughput (prompt tokens
over the time until the last first token), total throughput, ``vllm:num_requests_running`` sampled
every 0.1 s, and LMCache's stored chunks (``lmcache_mp_l1_write_chunks_total``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))

import gpulib as g  # noqa: E402


def stream_request(base, model, prompt, max_tokens, t_start, out, idx):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": True, "stream": True}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    first = None
    chunks = 0
    err = None
    try:
        with urllib.request.urlopen(req, timeout=900) as resp:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                if first is None:
                    first = time.monotonic()
                chunks += 1
    except Exception as exc:  # noqa: BLE001
        err = str(exc)
    end = time.monotonic()
    out[idx] = {"ttft_s": (first - t_start) if first else None, "e2e_s": end - t_start, "chunks": chunks,
                "error": err}


def running_and_waiting(url):
    """A read() for gpulib.PeriodicSampler: vLLM's running and waiting requests, from its /metrics."""
    def read():
        m = g.scrape(url)
        if not m:
            return None
        return g.metric(m, "vllm:num_requests_running"), g.metric(m, "vllm:num_requests_waiting")
    return read


def load(base, model, prompts, max_tokens):
    out = [None] * len(prompts)
    t0 = time.monotonic()
    threads = [threading.Thread(target=stream_request, args=(base, model, p, max_tokens, t0, out, i))
               for i, p in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(1000)
    return out, time.monotonic() - t0


def one_value(label, mnbt, args, logs, idx):
    n = args.n
    zport, hport, vport = 5700 + idx, 8300 + idx, 8400 + idx
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL")}
    env.update({"PYTHONHASHSEED": "0", "LMCACHE_TRACK_USAGE": "false", "DO_NOT_TRACK": "1",
                "VLLM_NO_USAGE_STATS": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0", "HF_HUB_OFFLINE": "1"})
    r = {"label": label, "max_num_batched_tokens": mnbt}
    srv_argv = [os.path.join(args.venv, "bin", "lmcache"), "server", "--host", "127.0.0.1", "--port", str(zport),
                "--http-host", "127.0.0.1", "--http-port", str(hport), "--chunk-size", str(n),
                "--separate-object-groups", "--l1-size-gb", str(args.l1_gb), "--eviction-policy", "LRU"]
    srv = g.start(srv_argv, env, os.path.join(logs, "mnbt-%s.lmcache.log" % label))
    vl = None
    try:
        if not g.wait_http("http://127.0.0.1:%d/healthcheck" % hport, 120, [srv]):
            r["error"] = "LMCache server not healthy"
            return r
        kv = {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
              "kv_connector_module_path": "lmcache.integration.vllm.lmcache_mp_connector",
              "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": zport}}
        v_argv = [os.path.join(args.venv, "bin", "vllm"), "serve", args.model_dir, "--host", "127.0.0.1",
                  "--port", str(vport), "--served-model-name", "m", "--load-format", "dummy",
                  "--enable-prefix-caching", "--mamba-cache-mode", "align", "--max-num-batched-tokens", str(mnbt),
                  "--max-model-len", str(args.prompt_tokens + args.output_tokens + 256),
                  "--gpu-memory-utilization", str(args.gpu_util), "--language-model-only",
                  "--additional-config", '{"gdn_prefill_backend": "triton"}', "--kv-transfer-config", json.dumps(kv)]
        if args.enforce_eager:
            v_argv.append("--enforce-eager")
        r["vllm_argv"] = v_argv
        t0 = time.monotonic()
        vl = g.start(v_argv, env, os.path.join(logs, "mnbt-%s.vllm.log" % label))
        if not g.wait_http("http://127.0.0.1:%d/health" % vport, args.health_timeout, [vl, srv]):
            r["error"] = "vLLM not healthy (rc=%s)" % vl.poll()
            r["vllm_log_tail"] = g.tail(vl.log_path, 30)
            return r
        r["startup_s"] = round(time.monotonic() - t0, 1)
        base = "http://127.0.0.1:%d" % vport
        warm = [g.prompt_text(args.prompt_tokens, seed=100000 + 1000 * idx + i) for i in range(8)]
        load(base, "m", warm, args.output_tokens)
        time.sleep(2)
        prompts = [g.prompt_text(args.prompt_tokens, seed=1000 * idx + i) for i in range(args.requests)]
        lm0, vm0 = g.scrape("http://127.0.0.1:%d/metrics" % hport), g.scrape(base + "/metrics")
        sampler = g.PeriodicSampler(running_and_waiting(base + "/metrics"), 0.1)
        sampler.start()
        out, wall = load(base, "m", prompts, args.output_tokens)
        sampler.stop()
        time.sleep(3)
        lm1, vm1 = g.scrape("http://127.0.0.1:%d/metrics" % hport), g.scrape(base + "/metrics")
        ttfts = sorted(o["ttft_s"] for o in out if o and o["ttft_s"] is not None)
        errors = [o["error"] for o in out if o and o["error"]]
        prompt_tokens = g.metric(vm1, "vllm:prompt_tokens_total") - g.metric(vm0, "vllm:prompt_tokens_total")
        gen_tokens = g.metric(vm1, "vllm:generation_tokens_total") - g.metric(vm0, "vllm:generation_tokens_total")
        running = [s[1] for s in sampler.samples]
        busy = [x for x in running if x > 0]
        r.update({
            "requests": args.requests, "ok": len(ttfts), "errors": errors[:3],
            "prompt_tokens": prompt_tokens, "generation_tokens": gen_tokens, "wall_s": round(wall, 3),
            "ttft_s": {"p50": round(statistics.median(ttfts), 3) if ttfts else None,
                       "mean": round(statistics.mean(ttfts), 3) if ttfts else None,
                       "max": round(max(ttfts), 3) if ttfts else None,
                       "min": round(min(ttfts), 3) if ttfts else None},
            "prefill_throughput_tok_s": round(prompt_tokens / max(ttfts), 1) if ttfts else None,
            "total_throughput_tok_s": round((prompt_tokens + gen_tokens) / wall, 1),
            "running": {"max": max(running) if running else None,
                        "mean_while_busy": round(statistics.mean(busy), 2) if busy else None,
                        "samples": len(running)},
            "running_samples": sampler.samples,
            "lmcache_stored_chunks": g.metric(lm1, "lmcache_mp_l1_write_chunks_total")
            - g.metric(lm0, "lmcache_mp_l1_write_chunks_total"),
            "external_hits": g.metric(vm1, "vllm:external_prefix_cache_hits_total")
            - g.metric(vm0, "vllm:external_prefix_cache_hits_total"),
            "vllm_prefix_hits": g.metric(vm1, "vllm:prefix_cache_hits_total") - g.metric(vm0, "vllm:prefix_cache_hits_total"),
        })
        return r
    except Exception as exc:  # noqa: BLE001
        r["error"] = "%s: %s" % (type(exc).__name__, exc)
        return r
    finally:
        r["leftover"] = (g.stop(vl) if vl else []) + g.stop(srv)
        if vl is not None:
            r["vllm_log_errors"] = [ln for ln in g.tail(vl.log_path, 400) if "Error" in ln or "error" in ln][-5:]


def plot(json_path, png_path):
    """Four panels from a results JSON: prefill throughput, TTFT, running batch over time, stored chunks."""
    import matplotlib  # pylint: disable=import-error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-error
    with open(json_path) as fh:
        rep = json.load(fh)
    runs = [r for r in rep["runs"] if r.get("prefill_throughput_tok_s")]
    labels = ["%s\n(%d)" % (r["label"], r["max_num_batched_tokens"]) for r in runs]
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    ax[0][0].bar(labels, [r["prefill_throughput_tok_s"] for r in runs], color="#3b75af")
    ax[0][0].set_title("prefill throughput (prompt tokens / s)")
    for i, r in enumerate(runs):
        ax[0][0].text(i, r["prefill_throughput_tok_s"], "%.0f" % r["prefill_throughput_tok_s"], ha="center", va="bottom")
    ax[0][1].bar(labels, [r["ttft_s"]["p50"] for r in runs], color="#ef8636", label="p50")
    ax[0][1].plot(labels, [r["ttft_s"]["max"] for r in runs], "kv", label="max")
    ax[0][1].set_title("time to first token (s)")
    ax[0][1].legend()
    for r in runs:
        xs = [s[0] for s in r["running_samples"]]
        ys = [s[1] for s in r["running_samples"]]
        ax[1][0].plot(xs, ys, label="%s (%d)" % (r["label"], r["max_num_batched_tokens"]))
    ax[1][0].set_title("vllm:num_requests_running during the load")
    ax[1][0].set_xlabel("s since the load started")
    ax[1][0].legend()
    ax[1][1].bar(labels, [r["lmcache_stored_chunks"] for r in runs], color="#519e3e")
    ax[1][1].set_title("LMCache stored chunks (lmcache_mp_l1_write_chunks_total)")
    fig.suptitle("N=%d, %d cold requests x %d prompt tokens, %d output tokens%s" % (
        rep["N"], rep["requests"], rep["prompt_tokens"], rep["output_tokens"],
        ", --enforce-eager" if rep.get("enforce_eager") else ""))
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    return png_path


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--plot":
        plot(sys.argv[2], sys.argv[3])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--venv", required=True)
    p.add_argument("--n", type=int, required=True, help="N that vLLM printed for this model on this host")
    p.add_argument("--model-dir", default=os.path.join(REPO, "tests", "fixtures", "models", "qwen3.5-0.8b"))
    p.add_argument("--values", default="N,2N-1,2N,4N")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--prompt-tokens", type=int, default=4096)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--gpu-util", type=float, default=0.4)
    p.add_argument("--l1-gb", type=float, default=16)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--health-timeout", type=float, default=600)
    p.add_argument("--out", required=True)
    p.add_argument("--logs", default=None)
    args = p.parse_args()
    logs = args.logs or os.path.join(os.path.dirname(os.path.abspath(args.out)), "logs")
    os.makedirs(logs, exist_ok=True)
    n = args.n
    table = {"N": n, "2N-1": 2 * n - 1, "2N": 2 * n, "4N": 4 * n}
    report = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "N": n, "model_dir": args.model_dir,
              "requests": args.requests, "prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens,
              "enforce_eager": args.enforce_eager, "gpu_util": args.gpu_util, "runs": []}
    for idx, label in enumerate(args.values.split(",")):
        r = one_value(label, table[label], args, logs, idx)
        report["runs"].append(r)
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)
        print("%-5s mnbt=%-5s start %-6s wall %-7s TTFT p50 %-7s max %-7s prefill %-9s tok/s running max %s mean %s "
              "chunks %s %s" % (label, r["max_num_batched_tokens"], r.get("startup_s"), r.get("wall_s"),
                                (r.get("ttft_s") or {}).get("p50"), (r.get("ttft_s") or {}).get("max"),
                                r.get("prefill_throughput_tok_s"), (r.get("running") or {}).get("max"),
                                (r.get("running") or {}).get("mean_while_busy"), r.get("lmcache_stored_chunks"),
                                r.get("error") or ""), flush=True)


if __name__ == "__main__":
    main()
