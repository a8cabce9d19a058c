# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU an idle LMCache server takes, side by side: a plain server (no L2) and a member of a P2P pool (the
collection's P2P flags, ``kv_p2p.server_flags``, with the pool's coordinator from ``kv_p2p.coordinator_argv``).

Both kinds start on loopback from one LMCache virtualenv that has NIXL (``nixl-cu12`` on CPU), wait until they
answer, then sit idle (no vLLM, no request) while the benchmark reads each process's CPU seconds from
``/proc/<pid>/stat`` over the same window. The result is the cores each server keeps busy and the ratio::

    python benchmarks/p2p_idle_cpu_benchmark.py --lmcache-venv <venv with lmcache and nixl-cu12>
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_common  # noqa: E402

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_p2p  # noqa: E402

CHUNK = 256
CLK_TCK = os.sysconf('SC_CLK_TCK')


def cpu_seconds(stat_line):
    """utime + stime of a ``/proc/<pid>/stat`` line, in seconds (fields 14 and 15, after the command's parens)."""
    fields = stat_line.rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def cores(before, after, seconds):
    """The cores a process kept busy between two readings ``seconds`` apart."""
    return round((after - before) / float(seconds), 3) if seconds > 0 else None


def _read_cpu(pid):
    with open('/proc/%d/stat' % pid) as f:
        return cpu_seconds(f.read())


def server_argv(lmcache_bin, index, p2p=None):
    """One loopback server's argv (request port 6600+index, HTTP 8100+index), with the P2P flags when ``p2p``."""
    argv = [lmcache_bin, 'server', '--host', '127.0.0.1', '--port', str(6600 + index), '--http-host', '127.0.0.1',
            '--http-port', str(8100 + index), '--chunk-size', str(CHUNK), '--l1-size-gb', '1',
            '--eviction-policy', 'LRU']
    return argv + (kv_p2p.server_flags(p2p) if p2p else [])


def p2p_values(index):
    """The P2P plan (kv_p2p.plan) of member ``bench-<index>`` on loopback: the coordinator bench-0 on port 9390, the
    member's transfer port 5590+index."""
    values = {'coordinator': 'bench-0', 'device': 'cpu',
              'ports': {'lmcache_server_kv_coordinator_port': 9390, 'lmcache_server_kv_p2p_port': 5590 + index}}
    return kv_p2p.plan('bench-%d' % index, {'lmcache_server_host': '127.0.0.1'}, {}, values)


def _wait_http(url, deadline):
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(1)
    return False


def measure(lmcache_bin, window, logdir):
    """Start the coordinator, two P2P members and one plain server; read their CPU over ``window`` seconds."""
    procs = {}
    specs = [('coordinator', kv_p2p.coordinator_argv(lmcache_bin, p2p_values(0), CHUNK), None),
             ('plain', server_argv(lmcache_bin, 0), 'http://127.0.0.1:8100/status'),
             ('p2p-1', server_argv(lmcache_bin, 1, p2p_values(1)), 'http://127.0.0.1:8101/status'),
             ('p2p-2', server_argv(lmcache_bin, 2, p2p_values(2)), 'http://127.0.0.1:8102/status')]
    try:
        for name, argv, _url in specs:
            with open(os.path.join(logdir, name + '.log'), 'w') as log:
                procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            if name == 'coordinator':
                _wait_http('http://127.0.0.1:9390/healthz', time.time() + 120)
        ready = dict((name, _wait_http(url, time.time() + 300)) for name, _argv, url in specs if url)
        time.sleep(10)  # registration with the coordinator, then idle
        start = dict((name, _read_cpu(p.pid)) for name, p in procs.items())
        t0 = time.time()
        time.sleep(window)
        seconds = time.time() - t0
        end = dict((name, _read_cpu(p.pid)) for name, p in procs.items())
        return {'window_s': round(seconds, 1), 'ready': ready,
                'cores': dict((name, cores(start[name], end[name], seconds)) for name in procs)}
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def commit():
    out = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=HERE, capture_output=True, text=True,
                         check=False)
    return out.stdout.strip() or None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--lmcache-venv', required=True)
    parser.add_argument('--window', type=float, default=30.0)
    parser.add_argument('--out', default=os.path.join(HERE, 'results'))
    args = parser.parse_args()
    stamp = '%s-%s' % (commit(), time.strftime('%Y%m%dT%H%M%S'))
    logdir = os.path.join(args.out, 'p2p-idle-cpu-%s-logs' % stamp)
    os.makedirs(logdir)
    result = measure(os.path.join(args.lmcache_venv, 'bin', 'lmcache'), args.window, logdir)
    plain = result['cores'].get('plain')
    result['ratio_p2p_to_plain'] = dict(
        (name, round(value / plain, 1) if plain else None)
        for name, value in result['cores'].items() if name.startswith('p2p'))
    result.update(commit=commit(), machine=bench_common.machine(), chunk_size=CHUNK)
    path = os.path.join(args.out, 'p2p-idle-cpu-%s.json' % stamp)
    with open(path, 'w') as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(json.dumps(result, indent=2, sort_keys=True))
    print('written: %s' % path)


if __name__ == '__main__':
    main()
