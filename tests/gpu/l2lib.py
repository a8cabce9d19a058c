# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure parts of the L2 benchmark case (``l2case.py``): the store's RESP protocol, the pooled inventory,
streamed answers, the bytes of a pool's keys and what they say about the Mamba state, and the case's summary.
Standard library only (the collection's Python is passed in where it is used)."""

from __future__ import annotations

import json
import math
import random
import re
import socket

HOST_PREFIX = "l2-k"
POOL_PREFIX = "l2k"


# ---------------------------------------------------------------- RESP (the store's protocol)

class RespError(RuntimeError):
    """An error reply of the store."""


def resp_encode(args):
    """One command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def resp_read(fh):
    """One reply from a binary file object: str, int, bytes, None or a list; an error reply raises RespError."""
    line = fh.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("the store closed the connection")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise RespError(body.decode("utf-8", "replace"))
    if kind == b":":
        return int(body)
    if kind == b"$":
        size = int(body)
        if size < 0:
            return None
        data = fh.read(size + 2)
        return data[:-2]
    if kind == b"*":
        size = int(body)
        return None if size < 0 else [resp_read(fh) for dummy in range(size)]
    raise ConnectionError("unexpected reply %r" % line[:80])


class Resp:
    """A minimal client of one store node, authenticated as the pool's ACL user."""

    def __init__(self, host, port, username=None, password=None, timeout=30.0):
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.fh = self.sock.makefile("rb")
        if password is not None:
            self.call(*(("AUTH", username, password) if username else ("AUTH", password)))

    def call(self, *args):
        self.sock.sendall(resp_encode(args))
        return resp_read(self.fh)

    def scan(self, match, count=1000):
        """Every key name matching ``match`` (SCAN)."""
        cursor, keys = b"0", []
        while True:
            cursor, batch = self.call("SCAN", cursor, "MATCH", match, "COUNT", count)
            keys += batch
            if cursor in (b"0", "0"):
                return keys

    def close(self):
        try:
            self.fh.close()
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------- the pooled inventory

def pool_name(k):
    return "%s%d" % (POOL_PREFIX, k)


def host_name(k):
    return "%s%d" % (HOST_PREFIX, k)


def inventory(host_vars, multiples, store):
    """plan.yml's inventory: one serving host per chunk multiple k (``lmcache_server_chunk_multiple``), each in a pool
    of its own served by a store on the same host (loopback); ``store``: the kv_store_* variables they share."""
    hosts, stores = {}, {}
    for k in multiples:
        name = host_name(k)
        hosts[name] = dict(host_vars, lmcache_server_kv_pool=pool_name(k), lmcache_server_chunk_multiple=k)
        stores[name] = dict(hosts[name], kv_store_pools=[pool_name(k)], **store)
    return {"all": {"children": {"vllm_hosts": {"hosts": hosts}, "kv_stores": {"hosts": stores}}}}


def runnable_config(lines):
    """The store's configuration for a start without systemd (no readiness notification)."""
    return [("supervised no" if line.strip() == "supervised systemd" else line) for line in lines]


# ---------------------------------------------------------------- prompts and streamed answers

def prompt_ids(n_tokens, seed, vocab_size):
    """A deterministic prompt of exactly n_tokens token ids, away from the special tokens at both ends."""
    low = max(1, min(1000, vocab_size // 8))
    high = max(low + 1, min(vocab_size - 1, 150000))
    rnd = random.Random(seed)
    return [rnd.randrange(low, high) for dummy in range(int(n_tokens))]


def sse_data(line):
    """The JSON of one server-sent ``data:`` line, "DONE" for the end, None for anything else."""
    text = line.decode("utf-8", "replace").strip() if isinstance(line, bytes) else str(line).strip()
    if not text.startswith("data:"):
        return None
    data = text[5:].strip()
    if data == "[DONE]":
        return "DONE"
    try:
        return json.loads(data)
    except ValueError:
        return None


def merge_chunks(chunks):
    """The streamed chunks of one completion as one answer ({"choices": [{text, logprobs}], "usage"}), the form
    scores.choice_scores reads."""
    text, tokens, token_lp, tops, usage = "", [], [], [], None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            text += choice.get("text") or ""
            lp = choice.get("logprobs") or {}
            tokens += lp.get("tokens") or []
            token_lp += lp.get("token_logprobs") or []
            tops += lp.get("top_logprobs") or []
    logprobs = {"tokens": tokens, "token_logprobs": token_lp, "top_logprobs": tops}
    return {"choices": [{"text": text, "logprobs": logprobs}], "usage": usage}


# ---------------------------------------------------------------- the pool's keys

def key_summary(strlens, usages, chunk_size=None):
    """Bytes of a pool's keys: ``strlens`` (STRLEN of every key), ``usages`` (MEMORY USAGE of the same keys, None
    where not read); ``chunk_size``: the tokens of one full key (bytes per token from the largest key when given)."""
    sizes = [int(s) for s in strlens if s is not None]
    used = [int(u) for u in usages if u is not None]
    out = {"keys": len(sizes), "value_bytes_total": sum(sizes), "value_bytes_max": max(sizes, default=None),
           "value_bytes_min": min(sizes, default=None), "value_bytes_distinct": sorted(set(sizes)),
           "memory_usage_max": max(used, default=None), "memory_usage_total": sum(used) if used else None}
    if chunk_size and sizes:
        out["bytes_per_token"] = round(max(sizes) / float(chunk_size), 1)
    return out


def layer_counts(config):
    """(attention layers, linear-attention / Mamba layers) of a model's config.json (its text_config), or None."""
    cfg = config.get("text_config") or config
    types = cfg.get("layer_types")
    if not types:
        layers, interval = cfg.get("num_hidden_layers"), cfg.get("full_attention_interval")
        if not layers or not interval:
            return None
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    attention = sum(1 for t in types if t == "full_attention")
    return attention, len(types) - attention


def mamba_states(value_k, value_1, k, layers):
    """How many Mamba (GDN) states one key of a chunk of k x N holds, from the bytes of one key at k and at 1.

    vLLM gives every layer the same page per N tokens, so a key of k x N holds ``A x k`` attention pages and
    ``G x s`` state pages (``layers`` = (A, G)): ``s = (value_k / value_1 x (A + G) - A x k) / G``. Returns
    ``{'ratio', 'states', 'answer'}`` or None when a value or the layer counts are missing."""
    if not value_k or not value_1 or not layers or not layers[1]:
        return None
    attention, linear = layers
    ratio = float(value_k) / float(value_1)
    states = (ratio * (attention + linear) - attention * k) / linear
    if abs(states - k) < 0.25:
        answer = "k states (one per N tokens)"
    elif abs(states - 1) < 0.25:
        answer = "one state"
    else:
        answer = "neither (%.2f states)" % states
    return {"ratio_to_k1": round(ratio, 4), "states": round(states, 3), "answer": answer}


# ---------------------------------------------------------------- the case's summary

def prompts_written(lengths):
    """The prompt lengths one k of l2case.py writes to the store, in its order: the warm-up (the longest length), a
    prompt of each length, then the contention step's two prompts of the first length (the registration check's
    prompt of one chunk and a third is left to store_keys' margin)."""
    lengths = [int(length) for length in lengths]
    return [max(lengths)] + lengths + [lengths[0]] * 2


def store_keys(lengths, n, multiples, minimum=24, margin=1.5):
    """kv_store_maxmemory_keys (values of the largest k) that hold, at the smallest k, every prompt one k writes
    (prompts_written), with half again as margin, at least ``minimum``. A value of k holds k times a value of 1
    (both models store k Mamba states per key). A store that evicts a prompt's first chunk loses the whole prefix:
    LMCache looks the chunks up in order (seen on 793a4ce: 24 values of k=1 held 22 of the 0.8B's chunks, and no L2
    hit loaded anything)."""
    kmin, kmax = min(multiples), max(multiples)
    chunks = sum(-(-length // (kmin * n)) for length in prompts_written(lengths))
    return max(minimum, math.ceil(chunks * margin * kmin / kmax))


def evicted_keys(info_stats):
    """evicted_keys of the store's INFO stats (bytes or text); None when it is not there."""
    text = info_stats.decode("utf-8", "replace") if isinstance(info_stats, bytes) else str(info_stats)
    m = re.search(r"^evicted_keys:(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def ratio(value, base):
    return round(value / base, 3) if value and base else None


def summary_rows(per_k, bytes_per_token_plan, break_even):
    """One row per chunk multiple and prompt length: TTFT of a miss, an L1 hit and an L2 hit, the L2 load
    throughput (LMCache's histogram mean and bytes per second end to end), the prefill rate of the miss and the
    break-even store throughput (``break_even``: kv_pool_breakeven.break_even, the collection's)."""
    rows = []
    for k in sorted(per_k, key=int):
        entry = per_k[k]
        keys = entry.get("keys") or {}
        per_token = keys.get("bytes_per_token") or bytes_per_token_plan
        for length in sorted(entry.get("lengths") or {}, key=int):
            m = entry["lengths"][length]
            miss, l1, l2 = (m.get(x) or {} for x in ("miss", "l1_hit", "l2_hit"))
            prefill = (miss.get("prompt_tokens") or int(length)) / miss["ttft_s"] if miss.get("ttft_s") else None
            target = break_even(per_token, prefill)[0] if prefill else None
            load = l2.get("l2_load") or {}
            metric = (load.get("sum") / load["count"]) if load.get("count") else None
            moved = (l2.get("hit_tokens") or 0) * (per_token or 0)
            rows.append({
                "k": int(k), "chunk_size": entry.get("chunk_size"), "prompt_tokens": int(length),
                "miss_s": miss.get("ttft_s"), "l1_hit_s": l1.get("ttft_s"), "l2_hit_s": l2.get("ttft_s"),
                "l1_vs_miss": ratio(l1.get("ttft_s"), miss.get("ttft_s")),
                "l2_vs_miss": ratio(l2.get("ttft_s"), miss.get("ttft_s")),
                "full_chunk_tokens": int(length) // entry["chunk_size"] * entry["chunk_size"]
                if entry.get("chunk_size") else None,
                "l2_hit_tokens": l2.get("hit_tokens"), "l1_hit_tokens": l1.get("hit_tokens"),
                "l2_hit_tokens_from_l2": l2.get("l2_lookup_hit_tokens"),
                "l2_load_GBps_metric": round(metric, 3) if metric is not None else None,
                "l2_GBps_end_to_end": round(moved / l2["ttft_s"] / 1e9, 3) if moved and l2.get("ttft_s") else None,
                "prefill_tokens_per_s": round(prefill, 1) if prefill else None,
                "bytes_per_token": per_token, "break_even_GBps": round(target / 1e9, 3) if target else None,
                "bytes_per_key": keys.get("value_bytes_max"), "keys": keys.get("keys"),
                "mamba_states_per_key": (entry.get("mamba") or {}).get("states"),
                "l2_scores_max_abs_diff_vs_miss": ((m.get("scores") or {}).get("l2_vs_miss") or {}).get("max_abs_diff"),
                "errors": [x.get("error") for x in (miss, l1, l2) if x.get("error")]})
    return rows
