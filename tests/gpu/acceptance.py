# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU acceptance harness: the collection's own units serve a hybrid model with LMCache hits.

    python tests/gpu/acceptance.py --model-dir tests/fixtures/models/qwen3.5-0.8b \\
        --host-vars tests/gpu/h200-host-vars.yml --out /tmp/acceptance.json

On a host with a CUDA device, vLLM and LMCache installed (the venvs the host variables name):

1. probes N with the collection's module ``block_size_probe`` (through ``ansible-playbook``);
2. renders the units of one GPU host with ``playbooks/plan.yml`` (the host variables given, the model
   directory, dummy weights, ``vllm_server_expected_block_size`` = the probed N);
3. reads ``ExecStart=``, ``Environment=`` and ``EnvironmentFile=`` of the rendered
   ``lmcache-server.service`` and ``vllm.service`` with systemd's quoting rules and starts exactly that
   command and environment (no systemd needed; run as the current user, PATH as systemd sets it);
4. waits for LMCache's ``/healthcheck`` and vLLM's ``/health``;
5. sends a prompt of several N tokens, clears vLLM's own prefix cache (``POST /reset_prefix_cache``,
   needs ``VLLM_SERVER_DEV_MODE=1`` in vLLM's environment) and sends it again;
6. stops both (SIGTERM to the process group, as the units' ``KillSignal``) and checks that no process is
   left and GPU memory is released.

It passes when ``lmcache_mp_lookup_hit_tokens_total`` and ``vllm:external_prefix_cache_hits_total`` grew
on the second request, the second answer at temperature 0 equals the first, nothing is left running and
GPU memory is back. Without a CUDA device it writes ``{"skipped": ...}`` and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import gpulib as g  # noqa: E402
import scores  # noqa: E402
from fleet_collection import ansible_env, ansible_playbook_argv, collections_tree  # noqa: E402
from fleet_probe_play import ProbePlay  # noqa: E402
from systemd_unit import service_command  # noqa: E402

SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST = "gpu-acceptance"


def load_vars(path):
    if not path:
        return {}
    with open(path) as fh:
        text = fh.read()
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # ansible-core depends on PyYAML
        return yaml.safe_load(text) or {}


def apply_overrides(host_vars, pairs):
    """KEY=VALUE pairs (VALUE read as YAML) over the host variables; returns a new dict."""
    import yaml  # ansible-core depends on PyYAML
    out = dict(host_vars)
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError("--set wants KEY=VALUE, got %r" % pair)
        out[key] = yaml.safe_load(value)
    return out


def probe(work, args, timeout=1200):
    """The module through ansible-playbook on localhost; (result, wall seconds, log tail)."""
    res, wall, output = ProbePlay(work, args).run(timeout)
    return res or {"failed": True, "msg": "no result"}, wall, output[-3000:]


def probe_args(model_dir, host_vars, n_timeout=900, shrink="auto", log_path=None, cache_path=None, force=True):
    """Module arguments the vllm_server role would pass, from the host variables."""
    venv = host_vars.get("vllm_server_venv", "/opt/vllm/venv")
    args = {
        "model": model_dir,
        "vllm_executable": os.path.join(venv, "bin", "vllm"),
        "tensor_parallel_size": int(host_vars.get("vllm_server_tensor_parallel_size", 1)),
        "kv_cache_dtype": host_vars.get("vllm_server_kv_cache_dtype", "auto"),
        "extra_args": list(host_vars.get("vllm_server_extra_args", [])),
        "env": {k: str(v) for k, v in (host_vars.get("vllm_server_env") or {}).items()},
        "timeout": n_timeout, "force": force, "shrink": shrink,
        "language_model_only": bool(host_vars.get("vllm_server_language_model_only", True)),
    }
    if cache_path:
        args["cache_path"] = cache_path
    if log_path:
        args["log_path"] = log_path
    return args


def render(work, model_dir, host_vars, n):
    """Run plan.yml for one GPU host; returns the host's rendered tree (or raises with the log)."""
    hv = dict(host_vars)
    hv.setdefault("vllm_server_model", model_dir)
    hv.setdefault("vllm_server_model_config", os.path.join(model_dir, "config.json"))
    hv.setdefault("vllm_server_load_format", "dummy")
    hv["vllm_server_expected_block_size"] = n
    inv = {"all": {"children": {"vllm_hosts": {"hosts": {HOST: hv}}}}}
    inv_dir = os.path.join(work, "inventory")
    os.makedirs(inv_dir, exist_ok=True)
    with open(os.path.join(inv_dir, "hosts.json"), "w") as fh:
        json.dump(inv, fh, indent=1)
    plan_dir = os.path.join(work, "plan")
    cmd = ansible_playbook_argv() + ["-i", os.path.join(inv_dir, "hosts.json"),
                                     os.path.join(REPO, "playbooks", "plan.yml"), "-e", "fleet_plan_dir=" + plan_dir]
    env = ansible_env(collections_tree(os.path.join(work, "collections")))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    with open(os.path.join(work, "plan.log"), "w") as fh:
        fh.write(proc.stdout + proc.stderr)
    root = os.path.join(plan_dir, HOST)
    if proc.returncode != 0 or not os.path.isdir(root):
        raise RuntimeError("plan.yml failed (rc=%s):\n%s" % (proc.returncode, (proc.stdout + proc.stderr)[-4000:]))
    return root


def unit_command(root, unit):
    with open(os.path.join(root, "etc", "systemd", "system", unit + ".service")) as fh:
        text = fh.read()
    cmd = service_command(text, root=root)
    env = {"PATH": SYSTEMD_PATH, "LANG": os.environ.get("LANG", "C.UTF-8")}
    env.update(cmd["env"])
    cmd["run_env"] = env
    return cmd


def unit_hashes(root):
    """sha256 of every file plan.yml wrote for the host (units, environment files, plan.json)."""
    out = {}
    for top, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(top, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return dict(sorted(out.items()))


def flag(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


LOG_FACTS = {
    "weights_gib": r"Model loading took ([0-9.]+) GiB",
    "kv_cache_memory_gib": r"Available KV cache memory: ([0-9.]+) GiB",
    "kv_cache_tokens": r"GPU KV cache size: ([0-9,]+) tokens",
    "block_size": r"Setting attention block size to (\d+) tokens",
    "refused_mamba_cache_blocks": r"exceeds available Mamba cache blocks \((\d+)\)",
}


def log_facts(path):
    """What vLLM's log says about memory, N and M (the last value of each)."""
    import re
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return {}
    out = {}
    for key, pattern in LOG_FACTS.items():
        found = re.findall(pattern, text)
        if found:
            out[key] = found[-1].replace(",", "")
    return out


def cache_config_info(base):
    """The labels of vLLM's vllm:cache_config_info metric (block_size, num_gpu_blocks, ...)."""
    import re
    status, text = g.http("GET", base + "/metrics", timeout=10)
    if status != 200:
        return {}
    for line in (text if isinstance(text, str) else text.decode("utf-8", "replace")).splitlines():
        if line.startswith("vllm:cache_config_info{"):
            return dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
    return {}


def _mamba_clamp():
    """The collection's own pure module (no Ansible import), loaded from this checkout."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "mamba_clamp", os.path.join(REPO, "plugins", "module_utils", "cli", "mamba_clamp.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refused_start(vll, logs, timeout, baseline_mib=0):
    """Start vLLM with vLLM's default --max-num-seqs (the unit's flag left out); when vLLM refuses with
    "max_num_seqs (X) exceeds available Mamba cache blocks (M)", parse M with the collection's parser and
    return the unit's argv with --max-num-seqs min(X, M), as the deploy's start path re-plans it."""
    argv = list(vll["argv"])
    if "--max-num-seqs" in argv:
        i = argv.index("--max-num-seqs")
        del argv[i:i + 2]
    log = os.path.join(logs, "vllm-refused.log")
    t0 = time.monotonic()
    proc = g.start(argv, vll["run_env"], log, cwd=vll["working_directory"])
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(2)
    left = g.stop(proc, timeout=60)
    g.wait_gpu_released(baseline_mib, timeout=90)
    with open(log, "rb") as fh:
        refusal = _mamba_clamp().parse_refusal(fh.read().decode("utf-8", "replace"))
    out = {"seconds": round(time.monotonic() - t0, 1), "exit": proc.returncode, "refusal": refusal, "leftovers": left}
    if refusal:
        value = min(refusal["max_num_seqs"], refusal["mamba_cache_blocks"])
        out["restart_max_num_seqs"] = value
        vll = dict(vll, argv=list(vll["argv"]))
        if "--max-num-seqs" in vll["argv"]:
            vll["argv"][vll["argv"].index("--max-num-seqs") + 1] = str(value)
        else:
            vll["argv"] += ["--max-num-seqs", str(value)]
    return vll, out


def wait_store(lmc_metrics_url, before, settle=3.0, timeout=30.0):
    """Wait until LMCache's stored-chunk counter stops growing (stores are asynchronous)."""
    deadline = time.monotonic() + timeout
    last = before
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        cur = g.metric(g.scrape(lmc_metrics_url), "lmcache_mp_l1_write_chunks_total")
        if cur != last:
            last, stable_since = cur, time.monotonic()
        elif cur > before and time.monotonic() - stable_since >= settle:
            break
        time.sleep(0.5)
    return last


def salted(base, model_name, prompt, salt, args):
    """One greedy completion with top-k logprobs under its own cache_salt (vLLM's prefix cache and
    LMCache key their entries with it, so a new salt is a fresh computation)."""
    status, data, seconds = g.completion(base, model_name, prompt, max_tokens=args.max_tokens,
                                         logprobs=args.top_logprobs, cache_salt=salt)
    if status != 200:
        raise RuntimeError("request %s failed: %s %s" % (salt, status, str(data)[:500]))
    return data, seconds


def counters(lmc_http, base):
    lm, vm = g.scrape(lmc_http + "/metrics"), g.scrape(base + "/metrics")
    return {"lmcache_hit_tokens": g.metric(lm, "lmcache_mp_lookup_hit_tokens_total"),
            "lmcache_requested_tokens": g.metric(lm, "lmcache_mp_lookup_requested_tokens_total"),
            "lmcache_stored_chunks": g.metric(lm, "lmcache_mp_l1_write_chunks_total"),
            "vllm_external_hits": g.metric(vm, "vllm:external_prefix_cache_hits_total"),
            "vllm_external_queries": g.metric(vm, "vllm:external_prefix_cache_queries_total"),
            "vllm_prefix_cache_hits": g.metric(vm, "vllm:prefix_cache_hits_total")}


def scored_requests(res, base, model_name, lmc_http, n, args):
    """The prompt P fresh (salt a), fresh again (salt b), from vLLM's own prefix cache (salt a), from
    LMCache after POST /reset_prefix_cache (salt a), and a prompt whose first block differs (salt c, the
    control). Fills res["requests"], res["scores"] and the checks."""
    prompt = g.prompt_text(args.prompt_blocks * n + n // 3, seed=args.seed)
    control = g.prompt_text(n, seed=args.seed + 1000) + prompt[n:]
    res["prompt_chars"] = len(prompt)
    tag = "acc%d-" % args.seed
    steps = [("fresh", prompt, tag + "a"), ("fresh_again", prompt, tag + "b"),
             ("vllm_prefix_cache", prompt, tag + "a"), ("reset", None, None),
             ("lmcache", prompt, tag + "a"), ("wrong_prefix", control, tag + "c")]
    out, reqs = {}, res.setdefault("requests", {})
    for name, text, salt in steps:
        if name == "reset":
            res["reset_prefix_cache"] = g.http("POST", base + "/reset_prefix_cache", timeout=60)[0]
            continue
        before = counters(lmc_http, base)
        data, seconds = salted(base, model_name, text, salt, args)
        if name in ("fresh", "fresh_again"):
            wait_store(lmc_http + "/metrics", before["lmcache_stored_chunks"])
        time.sleep(1.0)
        after = counters(lmc_http, base)
        out[name] = scores.choice_scores(data)
        reqs[name] = {"cache_salt": salt, "seconds": round(seconds, 3), "usage": data.get("usage"),
                      "text": (data.get("choices") or [{}])[0].get("text"),
                      "delta": {k: after[k] - before[k] for k in after}}
    ref = out["fresh"]
    cmp_ = {name: scores.compare(ref, out[name]) for name in ("fresh_again", "vllm_prefix_cache", "lmcache",
                                                              "wrong_prefix")}
    verdict = scores.verdict(cmp_["lmcache"], [cmp_["fresh_again"], cmp_["vllm_prefix_cache"]],
                             cmp_["wrong_prefix"], k=args.bound_k, floor=args.bound_floor)
    res["scores"] = {"compare_to_fresh": cmp_, "verdict": verdict, "spread_fresh": scores.spread(ref),
                     "top_logprobs": args.top_logprobs, "max_tokens": args.max_tokens}
    d = {name: reqs[name]["delta"] for name in reqs}
    res["checks"]["reset_prefix_cache_200"] = res.get("reset_prefix_cache") == 200
    res["checks"]["fresh_runs_without_hits"] = all(
        d[x]["vllm_external_hits"] == 0 and d[x]["vllm_prefix_cache_hits"] == 0 for x in ("fresh", "fresh_again"))
    res["checks"]["lmcache_stored_chunks"] = d["fresh"]["lmcache_stored_chunks"] > 0
    res["checks"]["vllm_prefix_cache_hit"] = d["vllm_prefix_cache"]["vllm_prefix_cache_hits"] > 0
    res["checks"]["lmcache_hit_tokens_grew"] = d["lmcache"]["lmcache_hit_tokens"] > 0
    res["checks"]["vllm_external_hits_grew"] = d["lmcache"]["vllm_external_hits"] > 0
    res["checks"]["no_vllm_prefix_hits_after_reset"] = d["lmcache"]["vllm_prefix_cache_hits"] == 0
    res["checks"]["lmcache_logprobs_within_bound"] = verdict["within_bound"]
    res["metrics"] = {"lmcache hit tokens (served from LMCache)": d["lmcache"]["lmcache_hit_tokens"],
                      "vllm external hits (served from LMCache)": d["lmcache"]["vllm_external_hits"],
                      "lmcache stored chunks (fresh)": d["fresh"]["lmcache_stored_chunks"],
                      "prompt tokens": (reqs["fresh"]["usage"] or {}).get("prompt_tokens")}


def ancestors(pid):
    """pid and every parent above it (the harness and whatever started it are not leftovers)."""
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return out


def run(args):
    res = {"model_dir": args.model_dir, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "checks": {}, "timings_s": {}}
    if not g.cuda_device_present():
        res["skipped"] = "no CUDA device (nvidia-smi lists no GPU)"
        return res
    host_vars = apply_overrides(load_vars(args.host_vars), args.set)
    work = args.workdir or tempfile.mkdtemp(prefix="fleet-gpu-acceptance-")
    os.makedirs(work, exist_ok=True)
    logs = args.logs or os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    res["workdir"], res["logs"] = work, logs
    res["nvidia_smi"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version,compute_cap", "--format=csv,noheader"],
        capture_output=True, text=True, check=False).stdout.strip()
    baseline = (g.gpu_memory_used_mib() or [0])[0]
    res["gpu_memory_baseline_mib"] = baseline

    # 1. N from the collection's module on this host.
    if args.n:
        n = args.n
        res["probe"] = {"skipped": "N given on the command line", "N": n}
    else:
        cache = args.probe_cache or os.path.join(work, "facts.d", "vllm_block_size.fact")
        pr, wall, out = probe(work, probe_args(os.path.abspath(args.model_dir), host_vars, shrink=args.probe_shrink,
                                               log_path=os.path.join(logs, "probe-vllm.log"),
                                               cache_path=cache, force=not args.probe_cache))
        res["probe"] = {k: pr.get(k) for k in ("vllm_block_size", "source", "outcome", "reason", "vllm_version",
                                               "platform", "probe_mode", "shrink_reason", "elapsed_s",
                                               "probe_elapsed_s", "log_line", "failed", "msg")}
        res["timings_s"]["probe"] = round(wall, 1)
        if pr.get("failed") or not pr.get("vllm_block_size"):
            res["probe"]["output_tail"] = out
            res["result"] = "fail"
            res["reason"] = "the probe did not return N"
            return res
        n = int(pr["vllm_block_size"])
    res["N"] = n

    # 2. The units a GPU host gets.
    try:
        root = render(work, os.path.abspath(args.model_dir), host_vars, n)
    except RuntimeError as exc:
        res["result"], res["reason"] = "fail", str(exc)[-3000:]
        return res
    lmc, vll = unit_command(root, "lmcache-server"), unit_command(root, "vllm")
    res["unit_sha256"] = unit_hashes(root)
    res["units"] = {"lmcache-server": {k: lmc[k] for k in ("argv", "env", "env_files", "user", "working_directory")},
                    "vllm": {k: vll[k] for k in ("argv", "env", "env_files", "user", "working_directory")}}
    for k in ("HF_TOKEN", "VLLM_API_KEY"):
        for u in res["units"].values():
            if k in u["env"]:
                u["env"][k] = "<redacted>"
    try:
        with open(os.path.join(root, "plan.json")) as fh:
            planned = json.load(fh)
    except (OSError, ValueError):
        planned = {}
    derived = planned.get("derived") or {}
    names = ("vllm_server_gpu_memory_utilization", "vllm_server_max_num_seqs", "vllm_server_max_model_len",
             "vllm_server_gpu_architecture", "vllm_server_version", "vllm_server_lmcache_version")
    res["inputs"] = {k: host_vars.get(k) for k in names}
    res["inputs"]["overrides"] = list(args.set)
    res["mamba"] = {"plan": derived.get("mamba"), "unit_max_num_seqs": flag(vll["argv"], "--max-num-seqs"),
                    "plan_warnings": [w for w in planned.get("warnings") or [] if "Mamba" in w]}
    chunk = int(flag(lmc["argv"], "--chunk-size"))
    mnbt = int(flag(vll["argv"], "--max-num-batched-tokens"))
    res["checks"]["chunk_size_multiple_of_N"] = chunk % n == 0
    res["checks"]["mnbt_in_[N,2N)"] = n <= mnbt < 2 * n
    lmc_http = "http://%s:%s" % (flag(lmc["argv"], "--http-host", "127.0.0.1"), flag(lmc["argv"], "--http-port", "8080"))
    vhost = flag(vll["argv"], "--host", "127.0.0.1")
    base = "http://%s:%s" % ("127.0.0.1" if vhost in ("0.0.0.0", "::") else vhost, flag(vll["argv"], "--port", "8000"))
    model_name = flag(vll["argv"], "--served-model-name") or vll["argv"][2]
    for cmd in (lmc, vll):
        wd = cmd["working_directory"]
        if wd:
            os.makedirs(wd, exist_ok=True)
        if cmd["env"].get("HOME"):
            os.makedirs(cmd["env"]["HOME"], exist_ok=True)

    lmc_proc = vll_proc = None
    sampler = g.GpuSampler(0.5)
    sampler.start()
    try:
        # 3-4. Start exactly the rendered commands.
        t0 = time.monotonic()
        lmc_proc = g.start(lmc["argv"], lmc["run_env"], os.path.join(logs, "lmcache-server.log"),
                           cwd=lmc["working_directory"])
        ok = g.wait_http(lmc_http + "/healthcheck", args.lmcache_timeout, [lmc_proc])
        res["timings_s"]["lmcache_healthy"] = round(time.monotonic() - t0, 1)
        res["checks"]["lmcache_healthy"] = ok
        if not ok:
            raise RuntimeError("LMCache server not healthy")
        if args.refusal_first:
            vll, res["refusal_first"] = refused_start(vll, logs, args.health_timeout, baseline)
            res["checks"]["refusal_parsed"] = bool(res["refusal_first"].get("refusal"))
            res["mamba"]["unit_max_num_seqs"] = flag(vll["argv"], "--max-num-seqs")
            if not res["checks"]["refusal_parsed"]:
                raise RuntimeError("vLLM did not refuse the default max_num_seqs")
        t1 = time.monotonic()
        vll_proc = g.start(vll["argv"], vll["run_env"], os.path.join(logs, "vllm.log"), cwd=vll["working_directory"])
        ok = g.wait_http(base + "/health", args.health_timeout, [vll_proc, lmc_proc])
        res["timings_s"]["vllm_healthy"] = round(time.monotonic() - t1, 1)
        res["checks"]["vllm_healthy"] = ok
        if not ok:
            raise RuntimeError("vLLM not healthy (rc=%s)" % vll_proc.poll())

        info = cache_config_info(base)
        res["mamba"]["cache_config_info"] = info
        if info.get("num_gpu_blocks") not in (None, "", "None"):
            res["mamba"]["M"] = int(info["num_gpu_blocks"])
            if res["mamba"]["unit_max_num_seqs"]:
                res["checks"]["max_num_seqs_within_M"] = int(res["mamba"]["unit_max_num_seqs"]) <= res["mamba"]["M"]

        # 5. Fresh, fresh again, vLLM's own cache, LMCache after a reset, a wrong prefix: scored.
        scored_requests(res, base, model_name, lmc_http, n, args)
    except Exception as exc:  # noqa: BLE001 - every failure ends in the result file
        res["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        # 6. Stop vLLM, then LMCache (the units' order), and look for leftovers.
        t2 = time.monotonic()
        left = g.stop(vll_proc, timeout=60) if vll_proc else []
        left += g.stop(lmc_proc, timeout=60) if lmc_proc else []
        res["timings_s"]["stop"] = round(time.monotonic() - t2, 1)
        res["leftover_pids"] = left
        stray = []
        venvs = {os.path.dirname(os.path.dirname(lmc["argv"][0])), os.path.dirname(os.path.dirname(vll["argv"][0]))}
        mine = ancestors(os.getpid())
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in mine:
                try:
                    with open("/proc/%s/cmdline" % entry, "rb") as fh:
                        cl = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
                except OSError:
                    continue
                if any(v + "/bin/" in cl for v in venvs) and "block_size_probe" not in cl:
                    stray.append([int(entry), cl[:200]])
        res["stray_processes"] = stray
        released = g.wait_gpu_released(baseline, timeout=90)
        sampler.stop()
        res["gpu_memory_peak_mib"] = sampler.peak
        res["gpu_memory_after_mib"] = released
        res["checks"]["nothing_left_running"] = not left and not stray
        res["checks"]["gpu_memory_released"] = released is not None and released <= baseline + 1024
        if "mamba" in res:
            res["mamba"]["vllm_log"] = log_facts(os.path.join(logs, "vllm.log"))
        for name in ("lmcache-server.log", "vllm.log"):
            res.setdefault("log_tails", {})[name] = g.tail(os.path.join(logs, name), 30)
    res["result"] = "pass" if res["checks"] and all(res["checks"].values()) and "error" not in res else "fail"
    return res


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--model-dir", required=True, help="model directory (config.json + tokenizer, no weights needed)")
    p.add_argument("--out", required=True, help="results JSON path")
    p.add_argument("--host-vars", help="YAML or JSON file of the GPU host's inventory variables")
    p.add_argument("--workdir", help="work directory (inventory, plan, probe cache); default a new temporary one")
    p.add_argument("--logs", help="directory for the LMCache, vLLM and probe logs (default <workdir>/logs)")
    p.add_argument("--n", type=int, help="skip the probe and use this N")
    p.add_argument("--probe-shrink", default="auto", choices=["auto", "never"])
    p.add_argument("--prompt-blocks", type=int, default=6, help="prompt length in multiples of N")
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--top-logprobs", type=int, default=5, help="top-k logprobs compared at each generated position")
    p.add_argument("--bound-k", type=float, default=4.0, help="bound = max(k * measured noise, floor)")
    p.add_argument("--bound-floor", type=float, default=1e-5)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="host variable over --host-vars (VALUE read as YAML); repeatable")
    p.add_argument("--probe-cache", help="the probe's cache file, shared between runs on this host (then the probe "
                                         "runs with force=false: the module answers from its cache when no input of "
                                         "N changed, as on a deployed host)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lmcache-timeout", type=float, default=300)
    p.add_argument("--health-timeout", type=float, default=1200)
    p.add_argument("--refusal-first", action="store_true",
                   help="start vLLM first with its default --max-num-seqs, parse its Mamba cache refusal and start "
                        "the unit again with --max-num-seqs min(default, M) (the deploy's re-plan path)")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    res = run(args)
    if g.write_result(args.out, res):
        return 0
    print("result: %s  N=%s  checks: %s" % (res.get("result"), res.get("N"),
                                            ", ".join("%s=%s" % kv for kv in res["checks"].items())))
    if res.get("error"):
        print("error: " + res["error"])
    return 0 if res.get("result") == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
