# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which routers a serving host is drained from (computed from the router hosts' plans), and the administration
client's reading of vLLM's answers."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import router_admin, router_config, router_drain

GROUPS = {'qwen36_hosts': ['gpu-01', 'gpu-02'], 'qwen35_hosts': ['gpu-03'], 'routers': ['rt-01', 'rt-02']}
WORKERS = {
    'gpu-01': {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000,
               'ansible_host': '10.0.0.1'},
    'gpu-02': {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_host': '10.0.0.2', 'vllm_server_port': 8001},
    'gpu-03': {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000},
    'gpu-04': {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000},
}


def plans(**rt02):
    one = router_config.plan_router('rt-01', {'vllm_router_instances': [
        {'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000},
        {'group': 'qwen35_hosts', 'port': 30001, 'metrics_port': 29001}]}, GROUPS, WORKERS.get)
    settings = {'vllm_router_instances': [{'group': 'qwen36_hosts', 'port': 31000, 'metrics_port': 29100}],
                'vllm_router_bind': '0.0.0.0', 'vllm_router_allow_network': True}
    settings.update(rt02)
    two = router_config.plan_router('rt-02', settings, GROUPS, WORKERS.get)
    assert one['errors'] == [] and two['errors'] == [], (one['errors'], two['errors'])
    return [one, two]


def test_a_host_is_drained_from_every_router_of_its_group_on_the_routers_own_address():
    found = router_drain.targets('gpu-01', plans())
    assert [(t['router_host'], t['router'], t['router_url'], t['worker_url']) for t in found] == [
        ('rt-01', 'vllm-router-qwen36-hosts', 'http://127.0.0.1:30000', 'http://10.0.0.1:8000'),
        ('rt-02', 'vllm-router-qwen36-hosts', 'http://127.0.0.1:31000', 'http://10.0.0.1:8000')]
    # the wait for its running requests comes once, after it left the last router
    assert [t['wait_idle'] for t in found] == [0, 120]


def test_the_longest_drain_timeout_of_its_routers_is_waited():
    found = router_drain.targets('gpu-02', plans(vllm_router_drain_timeout=300))
    assert [t['wait_idle'] for t in found] == [0, 300]
    assert found[0]['worker_url'] == 'http://10.0.0.2:8001'
    found = router_drain.targets('gpu-02', plans(vllm_router_drain_timeout=0))
    assert [t['wait_idle'] for t in found] == [0, 120]


def test_a_host_of_one_router_and_a_host_of_none():
    found = router_drain.targets('gpu-03', plans())
    assert [(t['router_host'], t['router'], t['wait_idle']) for t in found] == [
        ('rt-01', 'vllm-router-qwen35-hosts', 120)]
    assert router_drain.targets('gpu-04', plans()) == []
    assert router_drain.targets('gpu-01', []) == []
    assert 'nothing to drain' in router_drain.describe('gpu-04', [])
    assert 'vllm-router-qwen36-hosts on rt-02' in router_drain.describe('gpu-01', router_drain.targets('gpu-01', plans()))


def test_a_listed_subset_drains_only_its_workers():
    subset = router_config.plan_router('rt-01', {'vllm_router_instances': [
        {'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000, 'workers': ['gpu-02']}]}, GROUPS, WORKERS.get)
    assert router_drain.targets('gpu-01', [subset]) == []
    assert len(router_drain.targets('gpu-02', [subset])) == 1


def test_a_router_plan_without_instances_drains_nothing():
    broken = router_config.plan_router('rt-01', {'vllm_router_service_prefix': 'bad name'}, GROUPS, WORKERS.get)
    assert broken['errors'] and router_drain.targets('gpu-01', [broken]) == []


@pytest.mark.parametrize('value', [-1, 'soon', 1.5])
def test_a_bad_drain_timeout_is_refused(value):
    p = router_config.plan_router('rt-01', {'vllm_router_drain_timeout': value, 'vllm_router_instances': [
        {'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000}]}, GROUPS, WORKERS.get)
    assert any('vllm_router_drain_timeout' in e and 'host rt-01' in e for e in p['errors']), p['errors']


def test_in_flight_requests_are_read_from_vllms_metrics():
    text = ('# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 1.0\n')
    assert router_admin.requests_in_flight(text) == 3
    assert router_admin.requests_in_flight('vllm:num_requests_running{engine="0"} 0.0\n') == 0
    assert router_admin.requests_in_flight('other_metric 4\n') is None
    assert router_admin.requests_in_flight('') is None


def metrics(count):
    return 200, 'vllm:num_requests_running{engine="0"} %d.0\nvllm:num_requests_waiting{engine="0"} 0.0\n' % count


def test_the_wait_ends_once_the_worker_runs_nothing(monkeypatch):
    answers = iter([metrics(2), metrics(1), metrics(0)])
    monkeypatch.setattr(router_admin, '_open', lambda url, **kw: next(answers))
    slept = []
    assert router_admin.wait_idle('http://10.0.0.1:8000', 60, sleep=slept.append) == (True, 0)
    assert len(slept) == 2


def test_the_wait_gives_up_at_its_timeout_with_the_last_count(monkeypatch):
    monkeypatch.setattr(router_admin, '_open', lambda url, **kw: metrics(3))
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    assert router_admin.wait_idle('http://10.0.0.1:8000', 5, clock=lambda: now[0], sleep=sleep) == (False, 3)
    assert 5 <= now[0] <= 6


def test_a_worker_without_metrics_is_not_waited_for(monkeypatch):
    def refuse(url, **kw):
        raise router_admin.RouterUnreachable(url)

    monkeypatch.setattr(router_admin, '_open', refuse)
    assert router_admin.wait_idle('http://10.0.0.1:8000', 60, sleep=pytest.fail) == (False, None)
