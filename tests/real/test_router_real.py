# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real vllm-router (the pinned wheel, in FLEET_ROUTER_VENV) started with the argv of the router plan, in
front of two test doubles of vLLM's OpenAI server (``tests/doubles/openai_backend_double.py``: the routing logic
is what is tested here, no model runs): requests go through, round_robin spreads them, cache_aware keeps one
prompt on one worker, a worker whose /health fails gets no request and none fails, and it is routed to again
once it answers. Draining (deploy.yml's rolling restart): the module router_worker's own code takes a worker out,
waits for its running requests, the worker restarts and is put back, while a stream of requests runs with none
failed. Without the venv it skips, unless CI or FLEET_REQUIRE_REAL=1 asks for the real programs."""

from __future__ import absolute_import, division, print_function

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from fleet_real_probe_helpers import REPO, skip_or_fail

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import (
    router_admin,
    router_config,
    router_drain,
    router_status,
)
from ansible_collections.lmcache_vllm.fleet.plugins.modules import router_worker

CACHE = os.environ.get('FLEET_CACHE', '/var/cache/lmcache-vllm-fleet')
VENVS = os.environ.get('FLEET_ROUTER_VENVS', CACHE)
VERSION = router_config.router_defaults()['vllm_router_version']
DOUBLE = os.path.join(REPO, 'tests', 'doubles', 'openai_backend_double.py')


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def wait_http(url, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return answer.status
        except OSError:
            time.sleep(0.3)
    raise AssertionError('%s did not answer within %ss' % (url, timeout))


def complete(url, prompt):
    body = json.dumps({'model': 'double-model', 'prompt': prompt, 'max_tokens': 1}).encode()
    request = urllib.request.Request(url + '/v1/completions', data=body,
                                     headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
        return json.loads(answer.read())['choices'][0]['text']


@pytest.fixture(name='backends')
def backends_fixture(tmp_path):
    procs, out = [], {}
    for name in ('w1', 'w2'):
        port, log = free_port(), str(tmp_path / ('%s.log' % name))
        procs.append(subprocess.Popen([sys.executable, DOUBLE, str(port), name, log]))
        out[name] = {'port': port, 'log': log}
        wait_http('http://127.0.0.1:%d/health' % port)
    yield out
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def start_double(backend, name, delay):
    proc = subprocess.Popen([sys.executable, DOUBLE, str(backend['port']), name, backend['log'], str(delay)])
    wait_http('http://127.0.0.1:%d/health' % backend['port'])
    return proc


def start_router(backends, policy, **settings):
    """The router of a plan whose model group is the two doubles (inventory hosts w1, w2 on this machine)."""
    if not os.access(os.path.join(VENVS, 'vllm-router-%s' % VERSION, 'bin', 'vllm-router'), os.X_OK):
        skip_or_fail('no vllm-router %s in %s (pip install vllm-router==%s into %s/vllm-router-%s)'
                     % (VERSION, VENVS, VERSION, VENVS, VERSION))
    port, metrics = free_port(), free_port()
    workers = dict((name, {'vllm_server_model': 'double-model', 'vllm_server_host': '0.0.0.0',
                           'vllm_server_port': b['port'], 'ansible_host': '127.0.0.1'}) for name, b in backends.items())
    plan = router_config.plan_router('router-01', {
        'vllm_router_instances': [{'group': 'doubles', 'port': port, 'metrics_port': metrics, 'policy': policy}],
        'vllm_router_venvs_dir': VENVS, 'vllm_router_health_check_interval_secs': 1,
        'vllm_router_health_failure_threshold': 1, 'vllm_router_health_success_threshold': 1, **settings},
        {'doubles': sorted(backends)}, workers.get)
    assert plan['errors'] == [], plan['errors']
    (instance,) = plan['instances']
    instance['plan'] = plan
    proc = subprocess.Popen(instance['argv'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(instance['url'] + '/health')
    return proc, instance


def served(backend):
    with open(backend['log']) as handle:
        return sum(1 for line in handle if '"/v1/completions"' in line)


@pytest.mark.real
def test_round_robin_spreads_and_a_worker_taken_out_gets_nothing(backends):
    proc, router = start_router(backends, 'round_robin')
    try:
        answers = [complete(router['url'], 'hello %d' % i) for i in range(6)]
        assert sorted(set(answers)) == ['w1', 'w2'], answers
        open(backends['w1']['log'] + '.down', 'w').close()  # w1's /health answers 503 now
        time.sleep(3)
        before = served(backends['w1'])
        answers = [complete(router['url'], 'hello again %d' % i) for i in range(6)]
        assert answers == ['w2'] * 6 and served(backends['w1']) == before
        with urllib.request.urlopen(router['metrics_url'], timeout=5) as answer:
            row = router_status.row('router-01', router, 'active', answer.read().decode())
        assert [(w['host'], w['state']) for w in row['workers']] == [('w1', 'unhealthy'), ('w2', 'healthy')], row
        assert row['state'] == 'routing' and 'routes nothing to w1' in ' '.join(row['problems'])
        os.unlink(backends['w1']['log'] + '.down')
        time.sleep(3)
        answers = [complete(router['url'], 'back %d' % i) for i in range(6)]
        assert 'w1' in answers, answers
        with urllib.request.urlopen(router['metrics_url'], timeout=5) as answer:
            assert b'vllm_router_worker_health' in answer.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.real
def test_cache_aware_keeps_a_conversation_on_one_worker(backends):
    proc, router = start_router(backends, 'cache_aware')
    try:
        system = 'You are a helpful assistant. ' * 20
        first = complete(router['url'], system + 'turn 1')
        follow = [complete(router['url'], system + 'turn 1 answer turn %d' % i) for i in range(2, 6)]
        assert follow == [first] * 4, (first, follow)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


class Stream:
    """Requests sent one after another from a few threads until stopped; every answer and failure counted."""

    def __init__(self, url, threads=4):
        self.url, self.stop, self.answers, self.failures = url, threading.Event(), [], []
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(threads)]

    def _run(self, index):
        turn = 0
        while not self.stop.is_set():
            turn += 1
            try:
                self.answers.append(complete(self.url, 'stream %d turn %d' % (index, turn)))
            except Exception as exc:  # every failure is counted and shown by the test
                self.failures.append(repr(exc))

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


@pytest.mark.real
def test_a_worker_drained_restarted_and_put_back_with_no_failed_request(tmp_path):
    backends, procs = {}, {}
    for name in ('w1', 'w2'):
        backends[name] = {'port': free_port(), 'log': str(tmp_path / ('%s.log' % name))}
        procs[name] = start_double(backends[name], name, 0.3)
    # without retries, a request the router sends to a stopped worker fails (measured: 10 of 76 when w1 is killed
    # in this stream without draining): only the drain keeps the count at zero
    proc, router = start_router(backends, 'round_robin', vllm_router_disable_retries=True)
    try:
        (target,) = router_drain.targets('w1', [router['plan']])
        assert target['router_url'] == router['url'] and target['wait_idle'] == 120
        w1 = target['worker_url']
        assert w1 == 'http://127.0.0.1:%d' % backends['w1']['port']
        # check mode reads the router, changes nothing
        changed, workers, warnings = router_worker.apply(router['url'], w1, False, True)[:3]
        assert (changed, warnings) == (True, []) and w1 in workers
        assert w1 in router_admin.list_workers(router['url'])
        with Stream(router['url']) as stream:
            time.sleep(2)
            changed, workers, warnings, idle, in_flight = router_worker.apply(
                router['url'], w1, False, False, wait_idle=target['wait_idle'])
            assert (changed, warnings, idle, in_flight) == (True, [], True, 0)
            assert w1 not in workers and len(workers) == 1
            assert router_worker.apply(router['url'], w1, False, False)[0] is False  # taken out already
            # the worker restarts while out of the router (its running requests ended before)
            before = served(backends['w1'])
            procs['w1'].terminate()
            procs['w1'].wait(timeout=10)
            time.sleep(2)
            procs['w1'] = start_double(backends['w1'], 'w1', 0.3)
            changed, workers, warnings = router_worker.apply(router['url'], w1, True, False)[:3]
            assert (changed, warnings) == (True, []) and w1 in workers
            assert router_worker.apply(router['url'], w1, True, False)[0] is False  # back already
            time.sleep(2)
        assert stream.failures == [], stream.failures[:5]
        assert served(backends['w1']) > before, 'w1 got no request after it was put back'
        assert 'w1' in stream.answers and 'w2' in stream.answers and len(stream.answers) > 20
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)


@pytest.mark.real
def test_draining_from_a_router_that_does_not_answer_warns_and_changes_nothing():
    down = 'http://127.0.0.1:%d' % free_port()
    changed, workers, warnings, idle, _count = router_worker.apply(down, 'http://127.0.0.1:1', False, False, wait_idle=5)
    assert (changed, workers, idle) == (False, [], None)
    assert len(warnings) == 1 and 'did not answer' in warnings[0] and down in warnings[0]
    # putting a worker back into a router that is down: nothing to say, it starts with every worker of its unit
    assert router_worker.apply(down, 'http://127.0.0.1:1', True, False) == (False, [], [], None, None)
