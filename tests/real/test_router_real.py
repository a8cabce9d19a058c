# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real vllm-router (the pinned wheel, in FLEET_ROUTER_VENV) started with the argv of the router plan, in
front of two test doubles of vLLM's OpenAI server (``tests/doubles/openai_backend_double.py``: the routing logic
is what is tested here, no model runs): requests go through, round_robin spreads them, cache_aware keeps one
prompt on one worker, a worker whose /health fails gets no request and none fails, and it is routed to again
once it answers. Without the venv it skips, unless CI or FLEET_REQUIRE_REAL=1 asks for the real programs."""

from __future__ import absolute_import, division, print_function

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from fleet_real_probe_helpers import REPO, skip_or_fail

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import router_config, router_status

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


def start_router(backends, policy):
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
        'vllm_router_health_failure_threshold': 1, 'vllm_router_health_success_threshold': 1},
        {'doubles': sorted(backends)}, workers.get)
    assert plan['errors'] == [], plan['errors']
    (instance,) = plan['instances']
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
