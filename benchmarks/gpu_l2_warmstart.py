# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""LMCache's L2 on a real store, and vLLM's first start cold, warm and seeded, on one CUDA host.

    # on the control node: render the units of both models and the store (plan.yml, kv_pool, kv_store_config)
    python benchmarks/gpu_l2_warmstart.py render --kit KIT --checkout <checkout> \\
        --venv /opt/torch/.venv
    # on the GPU host (vLLM 0.24.0 + LMCache 0.5.3 + valkey-glide-sync in --venv, redis-server in KIT/redis)
    python benchmarks/gpu_l2_warmstart.py run --kit KIT --results DIR

``render`` runs ``playbooks/plan.yml`` for Qwen3.5-0.8B (``tests/gpu/h200-host-vars.yml``, N=544) and
Qwen3.6-27B (``tests/gpu/h200-27b-host-vars.yml``, N=784), reads the rendered units' commands, and adds
the pool's ``--l2-adapter`` JSON (``kv_pool.prefix_inputs``/``key_prefix``/``adapter``) and the store's
configuration and ACL file (``kv_store_config.config_lines``/``acl_lines``).

``run``:

* **L2 (0.8B).** Starts the store (ACL user and password, default user off) and the rendered pair
  (LMCache with the pool's adapter, vLLM) on empty caches. Five prompts of 16N + N/3 tokens are sent
  once (misses), then again after ``/reset_prefix_cache`` (LMCache L1 hits). Both are stopped; a fresh
  LMCache server (empty L1, same pool and prefix) and vLLM start on the first start's caches (the warm
  restart) and get the same prompts (L2 hits), then fresh prompts (misses after the restart). TTFT is the
  time to the first streamed token.
* **Start-up (0.8B, 27B).** vLLM's time to ``/health``: cold (empty ``HOME`` and ``VLLM_CACHE_ROOT``),
  warm restart (same directories), seeded (a new ``HOME`` at another path that holds only what
  ``compile_cache.home_relative_dirs`` lists, packed and unpacked as the deploy's tarball) and seeded at
  the same path (the cold ``HOME`` removed, the tarball unpacked in its place: another host with the
  unit's ``HOME``). Each start gets its own ``TMPDIR`` (the unit's ``PrivateTmp=true``).

Results: ``DIR/result.json`` and the logs under ``DIR``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

from gpu_l2_kit import MODEL_ROOT, MODELS, REPO, log, render  # noqa: E402  pylint: disable=wrong-import-position


# ---------------------------------------------------------------- run (GPU host)


def stream_ttft(port, model, prompt, max_tokens=16, timeout=600):
    """One streamed completion at temperature 0: (TTFT s, total s, text, tokens, status)."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "seed": 0,
                       "logprobs": 1, "stream": True, "ignore_eos": True}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    ttft, text, tokens = None, "", []
    if resp.status != 200:
        data = resp.read().decode("utf-8", "replace")
        conn.close()
        return None, time.monotonic() - t0, data[:500], [], resp.status
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            choice = (json.loads(data).get("choices") or [{}])[0]
        except ValueError:
            continue
        if choice.get("text"):
            if ttft is None:
                ttft = time.monotonic() - t0
            text += choice["text"]
            tokens += (choice.get("logprobs") or {}).get("tokens") or []
    total = time.monotonic() - t0
    conn.close()
    return ttft, total, text, tokens, 200


class Host:
    """The GPU host's processes: the store, LMCache and vLLM pairs, with their logs under ``results``."""

    def __init__(self, kit, results):
        import gpulib
        self.g = gpulib
        self.kit_dir = kit
        with open(os.path.join(kit, "kit.json")) as fh:
            self.kit = json.load(fh)
        self.results = results
        self.logs = os.path.join(results, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.store_proc = None
        self.baseline = (self.g.gpu_memory_used_mib() or [0])[0]

    # -- the store
    def start_store(self):
        st = self.kit["store"]
        os.makedirs(st["dir"], exist_ok=True)
        lines = [("supervised no" if line == "supervised systemd" else line) for line in st["config_lines"]]
        conf = os.path.join(st["dir"], "kv-store.conf")
        with open(conf, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        with open(os.path.join(st["dir"], "users.acl"), "w") as fh:
            fh.write("\n".join(st["acl_lines"]) + "\n")
        os.chmod(os.path.join(st["dir"], "users.acl"), 0o600)
        rdir = os.path.join(self.kit_dir, "redis")
        env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": os.path.join(rdir, "lib")}
        self.store_proc = self.g.start([os.path.join(rdir, "redis-server"), conf], env,
                                       os.path.join(self.logs, "kv-store.log"), cwd=st["dir"])
        import redis
        deadline = time.monotonic() + 30
        out = {"config": lines, "acl": ["user default off", "user %s on #<sha256> ..." % st["user"]]}
        while time.monotonic() < deadline:
            try:
                client = redis.Redis(host="127.0.0.1", port=st["port"], username=st["user"], password=st["password"])
                out["auth_ping"] = bool(client.ping())
                break
            except Exception as exc:  # noqa: BLE001
                out["auth_error"] = str(exc)
                time.sleep(0.3)
        try:
            redis.Redis(host="127.0.0.1", port=st["port"]).get("x")
            out["default_user_refused"] = False
        except Exception as exc:  # noqa: BLE001
            out["default_user_refused"] = True
            out["default_user_error"] = str(exc)[:200]
        return out

    def store_client(self):
        import redis
        st = self.kit["store"]
        return redis.Redis(host="127.0.0.1", port=st["port"], username=st["user"], password=st["password"])

    def store_keys(self, prefix):
        client = self.store_client()
        count = len(list(client.scan_iter(match=prefix + "@*", count=1000)))
        info = client.info("memory")
        return {"keys": count, "dbsize": client.dbsize(), "used_memory_mib": round(info["used_memory"] / 1048576, 1)}

    # -- LMCache + vLLM
    def start_lmcache(self, model, tag, l2):
        m = self.kit["models"][model]
        argv = list(m["lmcache"]["argv"])
        if l2:
            argv += ["--l2-adapter", json.dumps(m["l2"]["adapter"])]
        home = "/srv/fleet/%s/lmcache" % tag
        os.makedirs(home, exist_ok=True)
        env = {"PATH": self.g_path(), "LANG": "C.UTF-8"}
        env.update(m["lmcache"]["env"], HOME=home)
        t0 = time.monotonic()
        proc = self.g.start(argv, env, os.path.join(self.logs, "%s-lmcache.log" % tag), cwd=home)
        port = argv[argv.index("--http-port") + 1]
        ok = self.g.wait_http("http://127.0.0.1:%s/healthcheck" % port, 300, [proc])
        return proc, ok, round(time.monotonic() - t0, 1), "http://127.0.0.1:%s" % port

    @staticmethod
    def g_path():
        return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    def start_vllm(self, model, tag, home, timeout=1200):
        m = self.kit["models"][model]
        argv = list(m["vllm"]["argv"])
        env = {"PATH": self.g_path(), "LANG": "C.UTF-8"}
        env.update(m["vllm"]["env"])
        env.update(HOME=home, VLLM_CACHE_ROOT=os.path.join(home, "cache"), HF_HOME=os.path.join(home, "huggingface"))
        if m.get("private_tmp"):
            tmp = "/srv/fleet/%s/tmp" % tag
            os.makedirs(tmp, exist_ok=True)
            env["TMPDIR"] = tmp
        os.makedirs(home, exist_ok=True)
        port = int(argv[argv.index("--port") + 1])
        t0 = time.monotonic()
        proc = self.g.start(argv, env, os.path.join(self.logs, "%s-vllm.log" % tag), cwd=home)
        ok = self.g.wait_http("http://127.0.0.1:%d/health" % port, timeout, [proc], interval=0.5)
        return proc, ok, round(time.monotonic() - t0, 1), port, env

    def stop(self, *procs):
        left = []
        for proc in procs:
            if proc is not None:
                left += self.g.stop(proc, timeout=60)
        released = self.g.wait_gpu_released(self.baseline, timeout=90)
        return {"leftovers": left, "gpu_after_mib": released}


def du_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def home_listing(home):
    """Size in MiB of every directory two levels below HOME (what a warm restart has)."""
    out = {}
    for first in sorted(os.listdir(home)) if os.path.isdir(home) else []:
        p1 = os.path.join(home, first)
        if not os.path.isdir(p1):
            continue
        for second in sorted(os.listdir(p1)):
            p2 = os.path.join(p1, second)
            if os.path.isdir(p2):
                out["%s/%s" % (first, second)] = round(du_bytes(p2) / 1048576, 1)
    return out


def seed(source_home, target_home, tarball):
    """The deploy's copy: the dirs of compile_cache.home_relative_dirs into a tarball, unpacked in a new HOME."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache as cc
    rel = cc.home_relative_dirs(source_home, os.path.join(source_home, "cache"))
    present = [r for r in rel if os.path.isdir(os.path.join(source_home, r))]
    sizes = {r: round(du_bytes(os.path.join(source_home, r)) / 1048576, 1) for r in present}
    t0 = time.monotonic()
    with tarfile.open(tarball, "w:gz", compresslevel=1) as tf:
        for r in present:
            tf.add(os.path.join(source_home, r), arcname=r)
    pack = time.monotonic() - t0
    os.makedirs(target_home, exist_ok=True)
    t1 = time.monotonic()
    with tarfile.open(tarball, "r:gz") as tf:
        tf.extractall(target_home)  # noqa: S202 - our own tarball
    unpack = time.monotonic() - t1
    return {"dirs": rel, "present": present, "sizes_mib": sizes, "total_mib": round(sum(sizes.values()), 1),
            "tarball_mib": round(os.path.getsize(tarball) / 1048576, 1), "pack_s": round(pack, 2),
            "unpack_s": round(unpack, 2)}


def cache_key_of(host, model, env):
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache as cc
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False).stdout.strip().split("\n")[0].split(", ")
    except OSError:
        gpu = ["", ""]
    m = host.kit["models"][model]
    key = cc.cache_key("0.24.0", gpu[0], gpu[-1], m["model_path"], m["vllm"]["argv"], env)
    return key


def median(values):
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return round(vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2, 4)


def changed(before, after):
    return {k: after[k] - before.get(k, 0.0) for k in sorted(after) if after[k] != before.get(k, 0.0)
            and not k.endswith(("_created", "_bucket"))}


def measure(host, res_list, label, port, model_name, prompt, lm_url, vm_url, reset=False):
    g = host.g
    if reset:
        g.http("POST", "http://127.0.0.1:%d/reset_prefix_cache" % port, timeout=60)
    lm0, vm0 = g.scrape(lm_url), g.scrape(vm_url)
    ttft, total, text, tokens, status = stream_ttft(port, model_name, prompt)
    time.sleep(0.5)
    lm1, vm1 = g.scrape(lm_url), g.scrape(vm_url)
    dl, dv = changed(lm0, lm1), changed(vm0, vm1)
    row = {"label": label, "status": status, "ttft_s": None if ttft is None else round(ttft, 4),
           "total_s": round(total, 4), "text": text, "tokens": tokens,
           "lmcache_hit_tokens": g.metric(lm1, "lmcache_mp_lookup_hit_tokens_total")
           - g.metric(lm0, "lmcache_mp_lookup_hit_tokens_total"),
           "vllm_external_hits": g.metric(vm1, "vllm:external_prefix_cache_hits_total")
           - g.metric(vm0, "vllm:external_prefix_cache_hits_total"),
           "vllm_prefix_cache_hits": g.metric(vm1, "vllm:prefix_cache_hits_total")
           - g.metric(vm0, "vllm:prefix_cache_hits_total"),
           "lmcache_metrics_delta": {k: v for k, v in dl.items() if k.startswith("lmcache")}}
    res_list.append(row)
    log(label, "ttft", row["ttft_s"], "lmc hit", row["lmcache_hit_tokens"], "ext", row["vllm_external_hits"])
    return row


def wait_stable(read, settle=3.0, timeout=60.0):
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        cur = read()
        if cur != last:
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= settle:
            break
    return last


def save(res, results):
    with open(os.path.join(results, "result.json"), "w") as fh:
        json.dump(res, fh, indent=1)


def l2_phase(host, res, args):
    """Cold pair with the L2 adapter (misses, L1 hits), then a fresh pair on the same caches (L2 hits)."""
    model = "qwen3.5-0.8b"
    m = host.kit["models"][model]
    n = m["N"]
    prefix = m["l2"]["key_prefix"]
    name = m["vllm"]["argv"][m["vllm"]["argv"].index("--served-model-name") + 1]
    prompts = [host.g.prompt_text(args.prompt_blocks * n + n // 3, seed=100 + i) for i in range(args.prompts)]
    fresh = [host.g.prompt_text(args.prompt_blocks * n + n // 3, seed=200 + i) for i in range(args.prompts + 3)]
    home = "/srv/fleet/08-a/home"
    l2 = res["l2"] = {"model": model, "N": n, "prompt_tokens": len(prompts[0]), "prompts": len(prompts),
                      "key_prefix": prefix, "adapter": m["l2"]["adapter_shown"], "prefix_inputs": m["l2"]["inputs"],
                      "rows": []}
    rows = l2["rows"]
    # Pair 1: cold.
    lmc, ok, lt, lm_url = host.start_lmcache(model, "08-cold", l2=True)
    l2["lmcache1_healthy_s"], l2["lmcache1_ok"] = lt, ok
    if not ok:
        host.stop(lmc)
        raise RuntimeError("LMCache with the L2 adapter did not become healthy")
    vll, ok, vt, port, env = host.start_vllm(model, "08-cold", home)
    res["warmstart"][model] = {"cold": {"health_s": vt, "ok": ok}}
    save(res, host.results)
    log("0.8B cold /health", vt, ok)
    if not ok:
        host.stop(vll, lmc)
        raise RuntimeError("0.8B cold start failed")
    vm_url = "http://127.0.0.1:%d/metrics" % port
    lm_m = lm_url + "/metrics"
    for dummy in range(2):
        measure(host, rows, "warmup-1", port, name, fresh.pop(), lm_m, vm_url)
    for p in prompts:
        measure(host, rows, "miss", port, name, p, lm_m, vm_url)
    l2["store_after_misses"] = wait_stable(lambda: host.store_keys(prefix)["keys"], settle=4.0, timeout=90)
    l2["store_info_after_misses"] = host.store_keys(prefix)
    for p in prompts:
        measure(host, rows, "l1_hit", port, name, p, lm_m, vm_url, reset=True)
    l2["lmcache1_metrics"] = {k: v for k, v in host.g.scrape(lm_m).items() if k.startswith("lmcache")}
    l2["stop1"] = host.stop(vll, lmc)
    save(res, host.results)
    # Pair 2: a fresh LMCache server (empty L1, same pool), vLLM on the same caches (the warm restart).
    lmc, ok, lt, lm_url = host.start_lmcache(model, "08-warm", l2=True)
    l2["lmcache2_healthy_s"], l2["lmcache2_ok"] = lt, ok
    vll, ok, vt, port, env = host.start_vllm(model, "08-warm", home)
    res["warmstart"][model]["warm"] = {"health_s": vt, "ok": ok}
    log("0.8B warm /health", vt, ok)
    save(res, host.results)
    if not ok:
        host.stop(vll, lmc)
        raise RuntimeError("0.8B warm start failed")
    lm_m = lm_url + "/metrics"
    measure(host, rows, "warmup-2", port, name, fresh.pop(), lm_m, vm_url)
    for p in prompts:
        measure(host, rows, "l2_hit", port, name, p, lm_m, vm_url)
    for p in prompts:
        measure(host, rows, "l1_hit_after_l2", port, name, p, lm_m, vm_url, reset=True)
    for dummy in range(3):
        measure(host, rows, "miss_after_restart", port, name, fresh.pop(), lm_m, vm_url)
    l2["lmcache2_metrics"] = {k: v for k, v in host.g.scrape(lm_m).items() if k.startswith("lmcache")}
    l2["store_info_end"] = host.store_keys(prefix)
    l2["stop2"] = host.stop(vll, lmc)
    res["warmstart"][model]["key"] = cache_key_of(host, model, env)
    summarize_l2(l2)
    save(res, host.results)
    return home


def summarize_l2(l2):
    rows = l2["rows"]
    by = {}
    for r in rows:
        by.setdefault(r["label"], []).append(r)
    misses = dict(enumerate(by.get("miss", [])))
    summary = {}
    for label, rs in by.items():
        summary[label] = {"n": len(rs), "ttft_median_s": median([r["ttft_s"] for r in rs]),
                          "ttft_all_s": [r["ttft_s"] for r in rs],
                          "lmcache_hit_tokens": [r["lmcache_hit_tokens"] for r in rs],
                          "vllm_external_hits": [r["vllm_external_hits"] for r in rs]}
    for label in ("l1_hit", "l2_hit", "l1_hit_after_l2"):
        rs = by.get(label, [])
        summary[label]["same_answer_as_miss"] = [r["text"] == misses[i]["text"] and r["tokens"] == misses[i]["tokens"]
                                                 for i, r in enumerate(rs) if i in misses]
    miss = summary.get("miss", {}).get("ttft_median_s")
    for label in ("l1_hit", "l2_hit", "miss_after_restart", "l1_hit_after_l2"):
        val = summary.get(label, {}).get("ttft_median_s")
        if miss and val:
            summary[label]["ttft_vs_miss"] = round(val / miss, 3)
    l1, l2v = summary.get("l1_hit", {}).get("ttft_median_s"), summary.get("l2_hit", {}).get("ttft_median_s")
    if l1 and l2v:
        summary["l2_hit"]["ttft_vs_l1_hit"] = round(l2v / l1, 3)
    l2["summary"] = summary


def start_once(host, model, tag, home, l2, check_prompt=True):
    lmc, ok_l, lt, lm_url = host.start_lmcache(model, tag, l2=l2)
    out = {"lmcache_healthy_s": lt}
    vll, ok, vt, port, env = host.start_vllm(model, tag, home)
    out.update(health_s=vt, ok=ok)
    log(model, tag, "/health", vt, ok)
    if ok and check_prompt:
        m = host.kit["models"][model]
        name = m["vllm"]["argv"][m["vllm"]["argv"].index("--served-model-name") + 1]
        ttft, total, text, _tokens, status = stream_ttft(port, name, host.g.prompt_text(2 * m["N"], seed=7))
        out["check_request"] = {"status": status, "ttft_s": ttft and round(ttft, 3), "total_s": round(total, 3)}
    out["stop"] = host.stop(vll, lmc)
    return out, env


def warmstart_phase(host, res, model, cold_home=None, tag=None, l2=False):
    """Cold (unless the L2 phase did it), warm restart, seeded start; sizes and copy time."""
    ws = res["warmstart"].setdefault(model, {})
    tag = tag or ("08" if model == "qwen3.5-0.8b" else "27")
    if cold_home is None:
        cold_home = "/srv/fleet/%s-a/home" % tag
        ws["cold"], env = start_once(host, model, "%s-cold" % tag, cold_home, l2)
        save(res, host.results)
        ws["warm"], env = start_once(host, model, "%s-warm" % tag, cold_home, l2)
        ws["key"] = cache_key_of(host, model, env)
        save(res, host.results)
    ws["home_after_warm_mib"] = home_listing(cold_home)
    seeded_home = "/srv/fleet/%s-s/home" % tag
    ws["seed"] = seed(cold_home, seeded_home, "/srv/fleet/%s-cache.tar.gz" % tag)
    log(model, "seed", ws["seed"])
    ws["seeded"], env = start_once(host, model, "%s-seeded" % tag, seeded_home, l2)
    ws["seeded_key"] = cache_key_of(host, model, env)
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache as cc
    ws["seed_decision"] = cc.seed_decision("first", ws["key"], "second", ws["seeded_key"])
    ws["home_after_seeded_mib"] = home_listing(seeded_home)
    # The same tarball unpacked at the same path (another host with the unit's HOME): the cold HOME is removed.
    shutil.rmtree(cold_home)
    os.makedirs(cold_home)
    t0 = time.monotonic()
    with tarfile.open("/srv/fleet/%s-cache.tar.gz" % tag, "r:gz") as tf:
        tf.extractall(cold_home)  # noqa: S202 - our own tarball
    unpack = round(time.monotonic() - t0, 2)
    ws["seeded_same_path"], env = start_once(host, model, "%s-same" % tag, cold_home, l2)
    ws["seeded_same_path"].update(unpack_s=unpack, home_after=home_listing(cold_home))
    for phase in ("cold", "seeded", "seeded_same_path"):
        if ws.get(phase, {}).get("health_s") and ws.get("warm", {}).get("health_s"):
            ws["%s_vs_warm" % phase] = round(ws[phase]["health_s"] / ws["warm"]["health_s"], 3)
    save(res, host.results)


def run(args):
    results = os.path.abspath(args.results)
    os.makedirs(results, exist_ok=True)
    from fleet_collection import expose_collection
    expose_collection()
    host = Host(os.path.abspath(args.kit), results)
    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "warmstart": {}, "errors": [],
           "nvidia_smi": host.g.cuda_device_present() and subprocess.run(
               ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
               capture_output=True, text=True, check=False).stdout.strip()}
    os.makedirs(MODEL_ROOT, exist_ok=True)
    for name in MODELS:
        link = os.path.join(MODEL_ROOT, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(REPO, "tests", "fixtures", "models", name), link)
    phases = args.phases.split(",")
    try:
        if "l2" in phases:
            res["store"] = host.start_store()
            log("store", res["store"])
            home = l2_phase(host, res, args)
            if "ws08" in phases:
                warmstart_phase(host, res, "qwen3.5-0.8b", cold_home=home, l2=True)
    except Exception as exc:  # noqa: BLE001 - every failure ends in the result file
        res["errors"].append("0.8B L2: %s: %s" % (type(exc).__name__, exc))
        log("ERROR", res["errors"][-1])
    save(res, results)
    try:
        if "ws08" in phases and "seeded" not in res["warmstart"].get("qwen3.5-0.8b", {}):
            res["warmstart"]["qwen3.5-0.8b"] = {"note": "without the L2 phase (it failed or was not asked for)"}
            warmstart_phase(host, res, "qwen3.5-0.8b", tag="08b")
    except Exception as exc:  # noqa: BLE001
        res["errors"].append("0.8B: %s: %s" % (type(exc).__name__, exc))
        log("ERROR", res["errors"][-1])
    save(res, results)
    try:
        if "ws27" in phases:
            warmstart_phase(host, res, "qwen3.6-27b")
    except Exception as exc:  # noqa: BLE001
        res["errors"].append("27B: %s: %s" % (type(exc).__name__, exc))
        log("ERROR", res["errors"][-1])
    if host.store_proc is not None:
        host.g.stop(host.store_proc, timeout=10)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save(res, results)
    log("done", json.dumps({"errors": res["errors"], "l2": (res.get("l2") or {}).get("summary"),
                            "warmstart": {m: {k: v for k, v in w.items() if k.endswith("_vs_warm")}
                                          for m, w in res["warmstart"].items()}}))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("render", help="render the units and the store on the control node")
    r.add_argument("--kit", required=True)
    r.add_argument("--checkout", default=REPO, help="checkout whose plugins hold kv_pool.py and kv_store_config.py")
    r.add_argument("--venv", default="/opt/torch/.venv")
    r.add_argument("--work", default="/tmp/fleet-gpu-l2-render")
    x = sub.add_parser("run", help="run on the GPU host")
    x.add_argument("--kit", required=True)
    x.add_argument("--results", required=True)
    x.add_argument("--phases", default="l2,ws08,ws27")
    x.add_argument("--prompts", type=int, default=5)
    x.add_argument("--prompt-blocks", type=int, default=16)
    args = p.parse_args(argv)
    return render(args) if args.cmd == "render" else run(args)


if __name__ == "__main__":
    sys.exit(main())
