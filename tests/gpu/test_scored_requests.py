# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The acceptance's request sequence (fresh, fresh again, vLLM's prefix cache, LMCache after a reset, a wrong
prefix) against a TEST DOUBLE of vLLM's OpenAI server and LMCache's metrics: an HTTP server on localhost that
keeps a cache per (cache_salt, prompt) as vLLM and LMCache key theirs, and counts as their metrics do. No GPU
runs here; the GPU run of the same code is tests/gpu/suite.py."""

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acceptance  # noqa: E402

N = 16


class Double:
    """State of the double: vLLM's GPU prefix cache and LMCache's store, keyed like the real ones."""

    def __init__(self, lmcache_skew=0.0):
        self.gpu, self.store = set(), set()
        self.counts = {"prefix_hits": 0, "external_hits": 0, "lmc_hits": 0, "lmc_requested": 0, "chunks": 0}
        self.lmcache_skew = lmcache_skew

    def complete(self, body):
        key = (body.get("cache_salt"), body["prompt"][:N * (len(body["prompt"]) // N)])
        cached = len(key[1])
        source = "fresh"
        if key in self.gpu:
            self.counts["prefix_hits"] += cached
            source = "gpu"
        elif key in self.store:
            self.counts["external_hits"] += cached
            self.counts["lmc_hits"] += cached
            source = "lmcache"
        self.counts["lmc_requested"] += cached
        if source == "fresh":
            self.store.add(key)
            self.counts["chunks"] += cached // N
        self.gpu.add(key)
        seed = sum(map(ord, body["prompt"][:N])) % 7  # the first block moves every score
        shift = self.lmcache_skew if source == "lmcache" else 0.0
        toks, lps, tops = [], [], []
        for i in range(body["max_tokens"]):
            tok = "t%d" % ((i + seed) % 5)
            base = -1.0 - 0.01 * seed - 0.1 * i + shift
            toks.append(tok)
            lps.append(base)
            tops.append({tok: base, "other": base - 0.5 - 0.001 * seed})
        logprobs = {"tokens": toks, "token_logprobs": lps, "top_logprobs": tops}
        return {"choices": [{"text": "".join(toks), "logprobs": logprobs}],
                "usage": {"prompt_tokens": len(body["prompt"])}}

    def vllm_metrics(self):
        return ("vllm:prefix_cache_hits_total %d\nvllm:external_prefix_cache_hits_total %d\n"
                "vllm:external_prefix_cache_queries_total %d\n"
                % (self.counts["prefix_hits"], self.counts["external_hits"], self.counts["lmc_requested"]))

    def lmcache_metrics(self):
        return ("lmcache_mp_lookup_hit_tokens_total %d\nlmcache_mp_lookup_requested_tokens_total %d\n"
                "lmcache_mp_l1_write_chunks_total %d\n"
                % (self.counts["lmc_hits"], self.counts["lmc_requested"], self.counts["chunks"]))


def serve(double):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, code, text, ctype="text/plain"):
            data = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/metrics":
                self.reply(200, double.vllm_metrics())
            elif self.path == "/lmc/metrics":
                self.reply(200, double.lmcache_metrics())
            else:
                self.reply(404, "")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/reset_prefix_cache":
                double.gpu.clear()
                self.reply(200, "")
            elif self.path == "/v1/completions":
                self.reply(200, json.dumps(double.complete(body)), "application/json")
            else:
                self.reply(404, "")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_sequence(monkeypatch, skew):
    monkeypatch.setattr(acceptance.time, "sleep", lambda s: None)
    monkeypatch.setattr(acceptance, "wait_store", lambda url, before, **kw: before)
    double = Double(lmcache_skew=skew)
    server = serve(double)
    base = "http://127.0.0.1:%d" % server.server_address[1]
    args = argparse.Namespace(prompt_blocks=4, seed=3, max_tokens=6, top_logprobs=2, bound_k=4.0, bound_floor=1e-5)
    res = {"checks": {}}
    try:
        acceptance.scored_requests(res, base, "m", base + "/lmc", N, args)
    finally:
        server.shutdown()
    return res


def test_a_faithful_cache_passes_every_check(monkeypatch):
    res = run_sequence(monkeypatch, skew=0.0)
    assert all(res["checks"].values()), res["checks"]
    verdict = res["scores"]["verdict"]
    assert verdict["cached_max_abs_diff"] == 0.0 and verdict["bound"] == 1e-5 and verdict["discriminating"]
    cmp_ = res["scores"]["compare_to_fresh"]
    assert cmp_["lmcache"]["equal_token_share"] == 1.0
    assert res["requests"]["lmcache"]["delta"]["vllm_external_hits"] == 4 * N
    assert res["requests"]["vllm_prefix_cache"]["delta"]["vllm_prefix_cache_hits"] == 4 * N
    assert res["requests"]["fresh_again"]["cache_salt"] != res["requests"]["fresh"]["cache_salt"]
    assert res["metrics"]["prompt tokens"] == 4 * N + N // 3


def test_scores_beyond_the_noise_fail_the_bound(monkeypatch):
    res = run_sequence(monkeypatch, skew=1e-3)
    assert res["checks"]["lmcache_hit_tokens_grew"] and res["checks"]["vllm_external_hits_grew"]
    assert not res["checks"]["lmcache_logprobs_within_bound"]
    assert res["scores"]["verdict"]["cached_max_abs_diff"] > res["scores"]["verdict"]["bound"]
