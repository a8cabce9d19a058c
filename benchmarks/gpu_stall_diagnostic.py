# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start-up diagnostic on a CUDA host: several LMCache server + vLLM (LMCacheMPConnector) pairs at once,
each with its own ports, a short connector ``mq_timeout``, DEBUG logs and a py-spy dump of every process
of a pair that is not healthy after 140 s; a healthy pair gets a long prompt twice around
``POST /reset_prefix_cache``.

    OUT=/tmp/diag V056=/opt/v056 V053=/opt/v053 python benchmarks/gpu_stall_diagnostic.py

V056 / V053: venvs holding vLLM 0.24.0 with lmcache 0.5.6 / 0.5.3 (each with ``bin/vllm``, ``bin/lmcache``
and ``bin/py-spy``). Results in $OUT/diag.json, logs in $OUT/diag/.
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "gpu"))
import gpulib as g  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/out")
LOGS = os.path.join(OUT, "diag")
os.makedirs(LOGS, exist_ok=True)
MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures", "models", "qwen3.5-0.8b")
V056 = os.environ.get("V056", "/opt/v056")
V053 = os.environ.get("V053", "/opt/v053")
N = 544
T_HEALTH = float(os.environ.get("DIAG_HEALTH_TIMEOUT", "230"))

CANDS = [
    # name, venv, server extra, connector extra, env extra
    ("A056_lmcdriven", V056, [], {}, {}),
    ("B053_auto", V053, ["--supported-transfer-mode", "auto"], {}, {}),
    ("C056_engine", V056, ["--supported-transfer-mode", "engine_driven"],
     {"lmcache.mp.mp_transfer_mode": "engine_driven"}, {}),
    ("D053_lmcdriven", V053, ["--supported-transfer-mode", "lmcache_driven"],
     {"lmcache.mp.mp_transfer_mode": "lmcache_driven"}, {}),
]
if os.environ.get("DIAG_ONLY"):
    CANDS = [c for c in CANDS if c[0] in os.environ["DIAG_ONLY"].split(",")]

results = {}


def base_env():
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TERM")}
    env.update({"PYTHONHASHSEED": "0", "LMCACHE_LOG_LEVEL": "DEBUG", "LMCACHE_TRACK_USAGE": "false",
                "DO_NOT_TRACK": "1", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1",
                "HF_HUB_OFFLINE": "1"})
    return env


def run(idx, name, venv, srv_extra, conn_extra, env_extra):
    r = results[name] = {"name": name, "venv": venv}
    zport, hport, vport = 5600 + idx, 8100 + idx, 8200 + idx
    env = base_env()
    env.update(env_extra)
    srv_argv = [f"{venv}/bin/lmcache", "server", "--host", "127.0.0.1", "--port", str(zport),
                "--http-host", "127.0.0.1", "--http-port", str(hport), "--chunk-size", str(N),
                "--separate-object-groups", "--l1-size-gb", "4", "--eviction-policy", "LRU"] + srv_extra
    r["server_argv"] = srv_argv
    t0 = time.monotonic()
    srv = g.start(srv_argv, env, f"{LOGS}/{name}.server.log")
    ok = g.wait_http(f"http://127.0.0.1:{hport}/healthcheck", 120, [srv])
    r["server_healthy_s"] = round(time.monotonic() - t0, 1) if ok else None
    if not ok:
        r["result"] = "server not healthy"
        r["leftover"] = g.stop(srv)
        return
    kv = {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
          "kv_connector_module_path": "lmcache.integration.vllm.lmcache_mp_connector",
          "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": zport,
                                        "lmcache.mp.mq_timeout": 60, **conn_extra}}
    venv_env = dict(env)
    venv_env.update({"VLLM_SERVER_DEV_MODE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0"})
    v_argv = [f"{venv}/bin/vllm", "serve", MODEL, "--host", "127.0.0.1", "--port", str(vport),
              "--served-model-name", "m", "--load-format", "dummy", "--enforce-eager",
              "--enable-prefix-caching", "--mamba-cache-mode", "align", "--max-num-batched-tokens",
              str(2 * N - 1), "--max-model-len", "8192", "--gpu-memory-utilization", "0.12",
              "--additional-config", '{"gdn_prefill_backend": "triton"}',
              "--kv-transfer-config", json.dumps(kv)]
    r["vllm_argv"] = v_argv
    t1 = time.monotonic()
    vl = g.start(v_argv, venv_env, f"{LOGS}/{name}.vllm.log")
    dumped = False
    ok = False
    while time.monotonic() - t1 < T_HEALTH:
        if g.http("GET", f"http://127.0.0.1:{vport}/health", timeout=5)[0] == 200:
            ok = True
            break
        if vl.poll() is not None or srv.poll() is not None:
            break
        if not dumped and time.monotonic() - t1 > 140:
            dumped = True
            g.pyspy_dump([srv.pid] + g.children(srv.pid) + [vl.pid] + g.children(vl.pid),
                         f"{LOGS}/{name}.pyspy.txt", pyspy=f"{venv}/bin/py-spy")
        time.sleep(1)
    r["vllm_healthy_s"] = round(time.monotonic() - t1, 1) if ok else None
    r["vllm_rc"] = vl.poll()
    r["server_rc"] = srv.poll()
    if ok:
        base = f"http://127.0.0.1:{vport}"
        prompt = g.prompt_text(5 * N + 100, seed=idx)
        m0v, m0l = g.scrape(base + "/metrics"), g.scrape(f"http://127.0.0.1:{hport}/metrics")
        s1, d1, t_1 = g.completion(base, "m", prompt)
        time.sleep(3)
        rs = g.http("POST", base + "/reset_prefix_cache", timeout=30)
        s2, d2, t_2 = g.completion(base, "m", prompt)
        time.sleep(2)
        m1v, m1l = g.scrape(base + "/metrics"), g.scrape(f"http://127.0.0.1:{hport}/metrics")
        r.update({
            "req1": [s1, round(t_1, 3)], "req2": [s2, round(t_2, 3)], "reset": rs[0],
            "same_text": (d1.get("choices") or [{}])[0].get("text") == (d2.get("choices") or [{}])[0].get("text"),
            "ext_hits": g.metric(m1v, "vllm:external_prefix_cache_hits_total") - g.metric(m0v, "vllm:external_prefix_cache_hits_total"),
            "lmc_hit_tokens": g.metric(m1l, "lmcache_mp_lookup_hit_tokens_total") - g.metric(m0l, "lmcache_mp_lookup_hit_tokens_total"),
            "lmc_write_chunks": g.metric(m1l, "lmcache_mp_l1_write_chunks_total") - g.metric(m0l, "lmcache_mp_l1_write_chunks_total"),
            "lmc_metric_names": sorted(k for k in m1l if k.startswith("lmcache"))[:80],
            "vllm_ext_metric_names": sorted(k for k in m1v if "external" in k or "prefix" in k),
        })
        r["result"] = "served"
    else:
        r["result"] = "vllm not healthy"
        if not dumped:
            g.pyspy_dump([srv.pid] + g.children(srv.pid) + [vl.pid] + g.children(vl.pid),
                         f"{LOGS}/{name}.pyspy.txt", pyspy=f"{venv}/bin/py-spy")
    r["vllm_log_tail"] = g.tail(vl.log_path, 25)
    r["leftover"] = g.stop(vl) + g.stop(srv)
    r["server_log_tail"] = g.tail(srv.log_path, 25)


threads = []
for i, c in enumerate(CANDS):
    t = threading.Thread(target=run, args=(i,) + c, daemon=True)
    t.start()
    threads.append(t)
    time.sleep(2)
for t in threads:
    t.join(T_HEALTH + 200)
with open(os.path.join(OUT, "diag.json"), "w") as fh:
    json.dump(results, fh, indent=1)
for name, r in results.items():
    print(name, r.get("result"), "srv", r.get("server_healthy_s"), "vllm", r.get("vllm_healthy_s"),
          "ext_hits", r.get("ext_hits"), "lmc_hits", r.get("lmc_hit_tokens"), "chunks", r.get("lmc_write_chunks"),
          "same", r.get("same_text"))
