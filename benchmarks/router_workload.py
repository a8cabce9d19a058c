# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The multi-turn workload of benchmarks/router_policy_benchmark.py: sessions that each resend the conversation so
far plus a new user message after a shared system prompt, sent by a few client threads, bounded in count and time.

Every prompt is fixed by the seed (the assistant's turns in the history are scripted, not the model's reply: the
dummy weights answer random bytes), so each policy is fed the same prompts. The model's tokenizer is a byte
tokenizer: one character is one token."""

from __future__ import annotations

import json
import queue
import random
import threading
import time
import urllib.request

WORDS = ('the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches near '
         'twelve old harbours and count the silver boats').split()


def text(rng, length):
    out = []
    while sum(len(w) + 1 for w in out) < length:
        out.append(rng.choice(WORDS))
    return ' '.join(out)[:length]


def sessions(count, turns, system_chars, user_chars, reply_chars, seed=7):
    """``[[prompt of turn 1, prompt of turn 2, ...] per session]``: each turn is the conversation so far (system
    prompt, the earlier user and assistant turns) plus a new user message."""
    rng = random.Random(seed)
    system = 'System: you are the fleet assistant. ' + text(rng, system_chars)
    out = []
    for index in range(count):
        history, prompts = system, []
        for turn in range(turns):
            history += '\nUser %d.%d: %s\nAssistant:' % (index, turn, text(rng, user_chars))
            prompts.append(history)
            history += ' ' + text(rng, reply_chars)
        out.append(prompts)
    return out


def stream(url, body, headers, timeout):
    """(seconds to the first streamed token, seconds to the end) of one streamed completion."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    start, first = time.time(), None
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        for raw in answer:
            line = raw.decode('utf-8', 'replace').strip()
            if first is None and line.startswith('data: ') and line != 'data: [DONE]':
                first = time.time() - start
    return first, time.time() - start


def run(base_url, model, conversations, concurrency, deadline_s, max_tokens=16, timeout=300):
    """Send every session's turns in order (one session per client thread at a time); a session header and the
    OpenAI ``user`` field name the session (consistent_hash hashes on it). Returns the requests' rows and the
    wall time."""
    todo = queue.Queue()
    for index, prompts in enumerate(conversations):
        todo.put((index, prompts))
    rows, lock, start = [], threading.Lock(), time.time()

    def client():
        while True:
            try:
                index, prompts = todo.get_nowait()
            except queue.Empty:
                return
            for turn, prompt in enumerate(prompts):
                row = {'session': index, 'turn': turn, 'prompt_tokens': len(prompt)}
                if time.time() - start > deadline_s:
                    row['error'] = 'not sent: deadline'
                else:
                    row.update(one(base_url, model, 'session-%d' % index, prompt, max_tokens, timeout))
                with lock:
                    rows.append(row)

    threads = [threading.Thread(target=client) for dummy in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(rows, key=lambda r: (r['session'], r['turn'])), time.time() - start


def one(base_url, model, session, prompt, max_tokens, timeout):
    body = {'model': model, 'prompt': prompt, 'max_tokens': max_tokens, 'temperature': 0, 'stream': True,
            'ignore_eos': True, 'user': session}
    headers = {'Content-Type': 'application/json', 'X-Session-Id': session}
    try:
        first, total = stream(base_url + '/v1/completions', body, headers, timeout)
    except OSError as exc:
        return {'error': '%s: %s' % (type(exc).__name__, exc)}
    return {'ttft_s': round(first, 4) if first is not None else None, 'total_s': round(total, 4)}


def percentile(values, fraction):
    """The nearest-rank percentile of ``values`` (None for none)."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    rank = max(1, int(-(-fraction * len(ordered) // 1)))
    return ordered[min(rank, len(ordered)) - 1]


def latency(rows, wall_s):
    """TTFT p50/p95, requests and prompt tokens per second, failed requests of one run."""
    done = [r for r in rows if 'error' not in r]
    ttfts = [r['ttft_s'] for r in done]
    return {'requests': len(rows), 'failed': len(rows) - len(done),
            'ttft_p50_s': percentile(ttfts, 0.5), 'ttft_p95_s': percentile(ttfts, 0.95),
            'wall_s': round(wall_s, 2),
            'requests_per_s': round(len(done) / wall_s, 3) if wall_s else None,
            'prompt_tokens_per_s': round(sum(r['prompt_tokens'] for r in done) / wall_s, 1) if wall_s else None}
