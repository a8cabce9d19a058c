# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml's drain steps (playbooks/tasks/router_drain.yml): a host no router routes to is a no-op that
contacts no router host; a router that does not answer (not deployed yet, stopped) is a warning, never a failure,
also in check mode; with the real vllm-router (FLEET_ROUTER_VENVS, else skipped) the host leaves the router's
workers and comes back, and check mode leaves them as they are."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from fleet_playbook_helpers import CONTACT_MARKERS, NO_CONTACT, REPO_ROOT

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_config

PLAYBOOK = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'deploy_router_drain.yml')
DOUBLE = os.path.join(REPO_ROOT, 'tests', 'doubles', 'openai_backend_double.py')
VENVS = os.environ.get('FLEET_ROUTER_VENVS', os.environ.get('FLEET_CACHE', '/var/cache/lmcache-vllm-fleet'))
VERSION = router_config.router_defaults()['vllm_router_version']
LOCAL = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def worker(port):
    return dict(LOCAL, vllm_server_model='double-model', vllm_server_host='0.0.0.0', vllm_server_port=port,
                ansible_host='127.0.0.1')


def inventory(tmp_path, ports, router_host, router_port, metrics_port):
    hosts = {'all': {'children': {
        'vllm_hosts': {'children': {
            'doubles': {'hosts': {'w1': worker(ports[0]), 'w2': worker(ports[1])}},
            'lonely': {'hosts': {'w3': worker(ports[2])}}}},
        'routers': {'hosts': {'rt-01': dict(router_host, vllm_router_instances=[
            {'group': 'doubles', 'port': router_port, 'metrics_port': metrics_port, 'policy': 'round_robin'}])}}}}}
    path = tmp_path / 'hosts.yml'
    path.write_text(yaml.safe_dump(hosts))
    return str(path)


def lines(output, tag):
    return re.findall(r'"msg": "%s ([^"]*)"' % tag, output)


def test_a_host_in_no_router_group_contacts_no_router_host(runner, tmp_path):
    # the router host is unreachable: a call delegated to it would show in the output
    path = inventory(tmp_path, [free_port()] * 3, NO_CONTACT, free_port(), free_port())
    for extra in ([], ['--check']):
        code, output = runner.run(PLAYBOOK, path, '-e', 'test_hosts=w3', *extra)
        assert code == 0, output[-4000:]
        assert lines(output, 'TEST-DRAIN') == ['w3 targets=0 drained=False'], output[-4000:]
        for marker in CONTACT_MARKERS:
            assert marker not in output, output[-4000:]


def test_a_router_that_does_not_answer_is_a_warning_also_in_check_mode(runner, tmp_path):
    router_port = free_port()  # nothing listens there: the router is not deployed yet
    path = inventory(tmp_path, [free_port(), free_port(), free_port()], LOCAL, router_port, free_port())
    for extra in ([], ['--check']):
        code, output = runner.run(PLAYBOOK, path, '-e', 'test_hosts=w1', *extra)
        assert code == 0, output[-4000:]
        assert lines(output, 'TEST-DRAIN') == ['w1 targets=1 drained=True'], output[-4000:]
        flat = ' '.join(output.split())
        assert 'the router at http://127.0.0.1:%d did not answer' % router_port in flat, output[-4000:]
        assert 'failed=0' in output and 'fatal' not in output


@pytest.fixture(name='live_router')
def live_router_fixture(tmp_path):
    binary = os.path.join(VENVS, 'vllm-router-%s' % VERSION, 'bin', 'vllm-router')
    if not os.access(binary, os.X_OK):
        pytest.skip('no vllm-router %s in %s' % (VERSION, VENVS))
    ports, procs = [free_port(), free_port(), free_port()], []
    for number, port in enumerate(ports[:2]):
        procs.append(subprocess.Popen([sys.executable, DOUBLE, str(port), 'w%d' % (number + 1),
                                       str(tmp_path / ('w%d.log' % number))]))
    router_port, metrics_port = free_port(), free_port()
    path = inventory(tmp_path, ports, LOCAL, router_port, metrics_port)
    plan = router_config.plan_router('rt-01', {
        'vllm_router_instances': [{'group': 'doubles', 'port': router_port, 'metrics_port': metrics_port,
                                   'policy': 'round_robin'}], 'vllm_router_venvs_dir': VENVS},
        {'doubles': ['w1', 'w2']}, {'w1': worker(ports[0]), 'w2': worker(ports[1])}.get)
    assert plan['errors'] == []
    procs.append(subprocess.Popen(plan['instances'][0]['argv'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    url = 'http://127.0.0.1:%d' % router_port
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(url + '/health', timeout=2):
                break
        except OSError:
            assert time.time() < deadline, 'the router did not start'
            time.sleep(0.3)
    yield path, url, ['http://127.0.0.1:%d' % p for p in ports[:2]]
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=20)


def listed(url):
    with urllib.request.urlopen(url + '/list_workers', timeout=5) as answer:
        return sorted(json.loads(answer.read())['urls'])


def test_the_real_router_loses_the_host_and_gets_it_back(runner, live_router):
    path, url, workers = live_router
    code, output = runner.run(PLAYBOOK, path, '-e', 'test_hosts=w1', '-e', 'test_router_up=true')
    assert code == 0, output[-4000:]
    assert lines(output, 'TEST-OUT') == ['w1 %s' % workers[1]], output[-4000:]
    assert listed(url) == sorted(workers)
    # check mode: the drain reads the router and changes nothing
    code, output = runner.run(PLAYBOOK, path, '-e', 'test_hosts=w1', '-e', 'test_router_up=true', '--check')
    assert code == 0, output[-4000:]
    assert lines(output, 'TEST-OUT') == ['w1 %s' % ','.join(sorted(workers))], output[-4000:]
    assert listed(url) == sorted(workers)
