# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""LMCache's L2 on a shared store, on this machine: a prompt computed behind one LMCache server is a hit behind
another one of the same pool, never behind one of another pool, and serving survives the store going away.

Everything the collection would deploy comes from its own plans: the store's configuration and ACL file
(``kv_store_config.plan_store``), the LMCache and vLLM argv and environments and the ``--l2-adapter`` JSON
(``host_plan.plan_host`` with the pool, ``kv_pool``), for the dense CPU model of the molecule scenarios
(LMCache on CPU refuses hybrids). Only the paths (venvs, homes, ports) are changed to run here, without systemd.

Phases (each a fresh LMCache server, i.e. an empty L1, and a fresh vLLM behind it):
  A      pool P: every prompt once (miss), then again after POST /reset_prefix_cache (LMCache L1 hit);
  other  pool P' (another chunk size, so another key prefix): the prompts of A find nothing;
  B      pool P again ("a host that never saw them"): the prompts of A are L2 hits, new prompts misses;
         then the store is stopped: new prompts and repeated ones are still answered (L1 / prefill);
         then the store is started again (empty: no persistence) and serving goes on.
TTFT is measured with streaming completions (time to the first streamed token).

    python benchmarks/kv_l2_benchmark.py --vllm-venv $FLEET_VLLM_VENV --lmcache-venv /path/to/lmcache-venv \
        --prompts 3 --out benchmarks/results

The LMCache venv needs ``valkey-glide-sync`` (LMCache's valkey adapter imports ``glide_sync``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, 'tests'))

from fleet_collection import expose_collection  # noqa: E402

expose_collection()

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config  # noqa: E402

MODEL = os.path.join(REPO, 'tests', 'fixtures', 'models', 'qwen3-dense-tiny')
LAUNCHER = os.path.join(REPO, 'roles', 'lmcache_server', 'files', 'fleet_lmcache_l2.py')
DENSE = {
    'vllm_server_model': MODEL, 'vllm_server_served_model_name': 'tiny-dense', 'vllm_server_device': 'cpu',
    'vllm_server_hybrid': False, 'vllm_server_kv_connector': True, 'vllm_server_version': '0.32.0',
    'vllm_server_load_format': 'dummy', 'vllm_server_dtype': 'bfloat16', 'vllm_server_enforce_eager': True,
    'vllm_server_max_model_len': 4096, 'vllm_server_cpu_kvcache_space_gb': 1, 'vllm_server_port': 18600,
    'vllm_server_env': {'HF_HUB_OFFLINE': '1', 'VLLM_SERVER_DEV_MODE': '1'},
    'lmcache_server_version': '0.5.6', 'lmcache_server_supported_transfer_mode': 'lmcache_driven',
    'vllm_server_lmcache_transfer_mode': 'lmcache_driven', 'vllm_server_lmcache_mq_timeout': 20,
    'lmcache_server_l1_size_gb': 1, 'lmcache_server_kv_pool': 'bench',
    # Ports of their own: a phase must talk to the servers it started, not to another program's.
    'lmcache_server_port': 18655, 'lmcache_server_http_port': 18680,
    # lmcache_driven on CPU: the server opens vLLM's shared-memory segment, so it runs as vLLM's user.
    'lmcache_server_user': 'vllm', 'lmcache_server_group': 'vllm', 'lmcache_server_home': '/var/lib/vllm',
}
N_CPU = 128  # the dense model's block size on CPU (vLLM's CPU default)


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def post(url, body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else b''
    request = urllib.request.Request(url, data=data, headers={'Content-Type': 'application/json'})
    return urllib.request.urlopen(request, timeout=timeout)


def wait_http(url, deadline_s, proc):
    start = time.time()
    while time.time() - start < deadline_s:
        if proc.poll() is not None:
            raise RuntimeError('%s exited (%s) before %s answered' % (proc.args[0], proc.returncode, url))
        try:
            get(url, 2)
            return time.time() - start
        except OSError:
            time.sleep(1)
    raise RuntimeError('%s did not answer in %d s' % (url, deadline_s))


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith('#'):
            total += float(line.rsplit(' ', 1)[1])
    return total


class Run:
    def __init__(self, work, args):
        self.work, self.args, self.procs = work, args, []

    def start(self, name, argv, env):
        log = open(os.path.join(self.work, name + '.log'), 'w')
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=self.work)
        self.procs.append(proc)
        return proc

    def stop(self, proc):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        # LMCache's L1 segment (/dev/shm/lmcache_kv_<pid>_<n>) outlives a server that did not shut down
        # cleanly; the units remove it in ExecStopPost=, here the segments of servers no longer running go.
        for leftover in glob.glob('/dev/shm/lmcache_kv_*_*'):
            pid = os.path.basename(leftover).split('_')[2]
            if pid.isdigit() and not os.path.exists('/proc/%s' % pid):
                os.unlink(leftover)

    def stop_all(self):
        for proc in reversed(self.procs):
            self.stop(proc)


def store_plan(work, password, port):
    """The store role's plan, its configuration and ACL file written where the plan puts them (under ``work``:
    the role refuses a directory directly inside /tmp); ``plan['config_path']`` is redis-server's argument."""
    conf, data = os.path.join(work, 'store-conf'), os.path.join(work, 'store-data')
    os.makedirs(conf, exist_ok=True)
    os.makedirs(data, exist_ok=True)
    settings = {'kv_store_password': password, 'kv_store_port': port, 'kv_store_home': data,
                'kv_store_config_dir': conf, 'kv_store_maxmemory_mb': 256}
    plan = kv_store_config.plan_store('bench-store', settings, {'redis-server': 'local'})
    assert not plan['errors'], plan['errors']
    with open(plan['config_path'], 'w') as handle:
        # Not under systemd here: no readiness notification.
        handle.write('\n'.join(line for line in plan['config_lines'] if line != 'supervised systemd') + '\n')
    with open(plan['acl_path'], 'w') as handle:
        handle.write('\n'.join(plan['acl_lines']) + '\n')
    os.chmod(plan['acl_path'], 0o600)
    return plan


def host_plans(password, port, chunk_size=None):
    stores = {'bench': {'kv_store_password': password, 'kv_store_port': port, 'kv_store_pools': ['bench']}}
    cfg = dict(DENSE)
    if chunk_size:
        cfg['lmcache_server_chunk_size'] = chunk_size
    plan = host_plan.plan_host('bench', cfg, n=N_CPU, n_kind='probed', probe={'outcome': 'not_hybrid'},
                               kv_stores=stores)
    assert not plan['errors'], plan['errors']
    return plan


def port_free(port):
    with socket.socket() as sock:
        return sock.connect_ex(('127.0.0.1', int(port))) != 0


def start_pair(run, plan, tag, args):
    """LMCache (the plan's argv + the adapter, as ExecStart= expands it) and vLLM (the plan's argv)."""
    ports = [plan['lmcache']['port'], plan['lmcache']['http_port'], plan['vllm']['argv'][plan['vllm']['argv'].index('--port') + 1]]
    deadline = time.time() + 120
    while not all(port_free(port) for port in ports):
        if time.time() > deadline:
            raise RuntimeError('a port of %s is taken: %s' % (tag, [p for p in ports if not port_free(p)]))
        time.sleep(2)
    home = os.path.join(run.work, tag)
    os.makedirs(home, exist_ok=True)
    lm = plan['lmcache']
    # The unit's own launcher (argv[1]), from the repository, run by this LMCache venv's python.
    assert lm['argv'][1].endswith(kv_pool.LAUNCHER)
    lm_argv = [os.path.join(args.lmcache_venv, 'bin', 'python'), LAUNCHER] + lm['argv'][2:]
    lm_env = dict(os.environ, **lm['environment'])
    lm_env.update(lm['env_file'])
    lm_env['HOME'] = home
    lmcache = run.start('%s-lmcache' % tag, lm_argv, lm_env)
    wait_http(lm['health_url'], 300, lmcache)
    vl = plan['vllm']
    vl_argv = [os.path.join(args.vllm_venv, 'bin', 'vllm')] + vl['argv'][1:]
    vl_env = dict(os.environ, **vl['environment'])
    vl_env.update(vl['env_file'])
    vl_env.update({'HOME': home, 'VLLM_CACHE_ROOT': os.path.join(home, 'cache'), 'HF_HOME': os.path.join(home, 'hf')})
    vllm = run.start('%s-vllm' % tag, vl_argv, vl_env)
    started = wait_http(vl['health_url'], 900, vllm)
    return lmcache, vllm, started


def ttft(plan, prompt):
    """Seconds to the first streamed token, and the text."""
    vl = plan['vllm']
    url = 'http://127.0.0.1:%s/v1/completions' % vl['argv'][vl['argv'].index('--port') + 1]
    body = {'model': 'tiny-dense', 'prompt': prompt, 'max_tokens': 4, 'temperature': 0, 'stream': True}
    start = time.time()
    first, text = None, ''
    with post(url, body) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith('data: ') or line == 'data: [DONE]':
                continue
            if first is None:
                first = time.time() - start
            text += json.loads(line[6:])['choices'][0].get('text', '')
    return first, text


def counters(plan):
    lm = get(plan['lmcache']['metrics_url'])
    vl = get(plan['vllm']['health_url'].replace('/health', '/metrics'))
    return {'lmcache_hit_tokens': metric(lm, 'lmcache_mp_lookup_hit_tokens_total'),
            'lmcache_requested_tokens': metric(lm, 'lmcache_mp_lookup_requested_tokens_total'),
            'vllm_external_hits': metric(vl, 'vllm:external_prefix_cache_hits_total')}


def reset(plan):
    port = plan['vllm']['argv'][plan['vllm']['argv'].index('--port') + 1]
    post('http://127.0.0.1:%s/reset_prefix_cache' % port).read()


def measure(plan, prompt, label, results, phase):
    before = counters(plan)
    seconds, text = ttft(plan, prompt)
    after = counters(plan)
    row = {'phase': phase, 'case': label, 'ttft_s': round(seconds, 4), 'text': text}
    row.update(dict((k, after[k] - before[k]) for k in after))
    results.append(row)
    print(json.dumps(row), flush=True)
    reset(plan)
    return row


def prompts(count, length):
    words = 'the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches'.split()
    out = []
    for index in range(count):
        rng = secrets.SystemRandom()
        body = ' '.join(rng.choice(words) for dummy in range(length // 4))
        out.append(('prompt %d %s: ' % (index, secrets.token_hex(4)) + body)[:length])
    return out


def store_keys(store, password):
    cli = [shutil.which('redis-cli') or 'redis-cli'] + store['health']['argv'][1:]
    out = subprocess.run(check=False, args=cli + ['DBSIZE'], env=dict(os.environ, REDISCLI_AUTH=password), capture_output=True,
                         text=True)
    return int(out.stdout.strip() or 0) if out.stdout.strip().isdigit() else out.stdout.strip()


def phases(run, args, store, password, results):
    texts = prompts(args.prompts, args.length)
    plan = host_plans(password, args.store_port)
    other = host_plans(password, args.store_port, chunk_size=2 * plan['derived']['chunk_size'])
    facts = {'key_prefix': plan['kv_pool']['key_prefix'], 'other_key_prefix': other['kv_pool']['key_prefix'],
             'chunk_size': plan['derived']['chunk_size'], 'other_chunk_size': other['derived']['chunk_size']}
    lm, vl, facts['start_a_s'] = start_pair(run, plan, 'a', args)
    for text in texts:
        measure(plan, text, 'miss', results, 'A')
        measure(plan, text, 'l1_hit', results, 'A')
    facts['store_keys_after_a'] = store_keys(store, password)
    run.stop(vl)
    run.stop(lm)
    lm, vl, facts['start_other_s'] = start_pair(run, other, 'other', args)
    for text in texts:
        measure(other, text, 'other_pool', results, 'other')
    run.stop(vl)
    run.stop(lm)
    lm, vl, facts['start_b_s'] = start_pair(run, plan, 'b', args)
    for text in texts:
        measure(plan, text, 'l2_hit', results, 'B')
    answers = dict((r['phase'], [x['text'] for x in results if x['phase'] == r['phase'] and
                                 x['case'] in ('miss', 'l2_hit')][:len(texts)]) for r in results)
    facts['b_answers_equal_a'] = answers.get('A') == answers.get('B')
    for text in prompts(args.prompts, args.length):
        measure(plan, text, 'miss', results, 'B')
    return plan, facts, (lm, vl)


def failure(run, args, plan, pair, store_proc, store_argv, results, facts):
    """Stop the store under a serving pair; restart the pair while the store is down; start the store again."""
    run.stop(store_proc)
    for text in prompts(args.prompts, args.length):
        measure(plan, text, 'store_down_miss', results, 'B store down')
        measure(plan, text, 'store_down_repeat', results, 'B store down')
    for proc in reversed(pair):
        run.stop(proc)
    # A restart of the host's services while the store is down (LMCache alone would refuse to start).
    lm, vl, facts['start_b_store_down_s'] = start_pair(run, plan, 'b-restarted', args)
    for text in prompts(1, args.length):
        measure(plan, text, 'restarted_store_down_miss', results, 'B restarted, store down')
        measure(plan, text, 'restarted_store_down_repeat', results, 'B restarted, store down')
    store_proc = run.start('store-again', store_argv, dict(os.environ))
    time.sleep(2)
    for text in prompts(1, args.length):
        measure(plan, text, 'store_back_miss', results, 'B store back')
        measure(plan, text, 'store_back_repeat', results, 'B store back')
    return store_proc


def summary(results):
    table = {}
    for row in results:
        table.setdefault((row['phase'], row['case']), []).append(row)
    out = []
    for (phase, case), rows in table.items():
        out.append({'phase': phase, 'case': case, 'n': len(rows),
                    'ttft_median_s': round(statistics.median(r['ttft_s'] for r in rows), 4),
                    'lmcache_hit_tokens': sum(r['lmcache_hit_tokens'] for r in rows),
                    'vllm_external_hits': sum(r['vllm_external_hits'] for r in rows),
                    'answered': sum(1 for r in rows if r['ttft_s'] is not None)})
    return out


def markdown(record):
    """The summary as a Markdown table, and the facts."""
    lines = ['| phase | case | requests | TTFT median s | LMCache hit tokens | vLLM external hit tokens | answered |',
             '|---|---|---:|---:|---:|---:|---:|']
    for row in record['summary']:
        lines.append('| %s | %s | %d | %.3f | %d | %d | %d |' % (
            row['phase'], row['case'], row['n'], row['ttft_median_s'], row['lmcache_hit_tokens'],
            row['vllm_external_hits'], row['answered']))
    lines += ['', '```', json.dumps(record['facts'], indent=2), '```', '']
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--vllm-venv', default=os.environ.get('FLEET_VLLM_VENV'))
    parser.add_argument('--lmcache-venv', required=True)
    parser.add_argument('--redis-server', default=shutil.which('redis-server') or '/usr/bin/redis-server')
    parser.add_argument('--store-port', type=int, default=16390)
    parser.add_argument('--prompts', type=int, default=3)
    parser.add_argument('--length', type=int, default=2000, help='prompt characters (= tokens: byte tokenizer)')
    parser.add_argument('--out', default=os.path.join(HERE, 'results'))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='kv-l2-')
    password = secrets.token_hex(16)
    run = Run(work, args)
    results = []
    try:
        store = store_plan(work, password, args.store_port)
        store_argv = [args.redis_server, store['config_path']]
        facts0 = {'glide_sync': subprocess.run(
            [os.path.join(args.lmcache_venv, 'bin', 'python'), '-c',
             'from importlib import metadata; print(metadata.version("valkey-glide-sync"))'],
            check=False, capture_output=True, text=True).stdout.strip(),
            'command': ' '.join(sys.argv)}
        store_proc = run.start('store', store_argv, dict(os.environ))
        time.sleep(1)
        plan, facts, pair = phases(run, args, store, password, results)
        facts.update(facts0)
        facts['store_keys_after_b'] = store_keys(store, password)
        failure(run, args, plan, pair, store_proc, store_argv, results, facts)
    finally:
        run.stop_all()
    stamp = time.strftime('%Y%m%dT%H%M%S')
    os.makedirs(args.out, exist_ok=True)
    logs = os.path.join(args.out, 'kv-l2-%s-logs' % stamp)
    shutil.copytree(work, logs, ignore=shutil.ignore_patterns('*.acl', '*.conf', 'cache', 'hf', '*.rdb'))
    for name in os.listdir(logs):
        path = os.path.join(logs, name)
        if os.path.isfile(path):
            with open(path) as handle:
                text = handle.read()
            if password in text:
                with open(path, 'w') as handle:
                    handle.write(text.replace(password, '<redacted>'))
    record = {'facts': facts, 'results': results, 'summary': summary(results)}
    with open(os.path.join(args.out, 'kv-l2-%s.json' % stamp), 'w') as handle:
        json.dump(record, handle, indent=2)
    with open(os.path.join(args.out, 'kv-l2-%s.md' % stamp), 'w') as handle:
        handle.write(markdown(record))
    print(json.dumps(record['summary'], indent=2))
    print(json.dumps(facts, indent=2))


if __name__ == '__main__':
    main()
