# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which routers a serving host is drained from (computed from the router hosts' plans), whether it is put back after
its restart, and the administration client's reading of vLLM's answers."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.lmcache_vllm.fleet.plugins.filter.router import FilterModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_admin, router_config, router_drain

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))

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


# The put-back decision of deploy.yml's stage 4 (router_drain.put_back, filter router_put_back).
DEPLOYED, FAILED = 'deployed', 'failed'


@pytest.mark.parametrize('outcome, drained, before, restore, back', [
    # a deployed host answers /health: back in, also when this run did not take it out (a former run left it out)
    (DEPLOYED, True, {'vllm_active': True}, {}, True),
    (DEPLOYED, False, {}, {}, True),
    (DEPLOYED, False, None, None, True),
    # rolled back: back in once its previous vLLM is back
    (FAILED, True, {'vllm_active': True}, {'changed': True}, True),
    (FAILED, True, {'vllm_active': True}, {'skipped': True}, True),
    (FAILED, 'true', {'vllm_active': 'yes'}, {'failed': 'no'}, True),
    # ... never when the previous vLLM did not come back, did not run before, or the host was never taken out
    (FAILED, True, {'vllm_active': True}, {'failed': True}, False),
    (FAILED, True, {'vllm_active': False}, {}, False),
    (FAILED, True, {}, {}, False),
    (FAILED, False, {'vllm_active': True}, {}, False),
    ('', False, None, None, False),
    (None, True, {'vllm_active': True}, {'failed': 'true'}, False),
])
def test_the_put_back_decision(outcome, drained, before, restore, back):
    assert router_drain.put_back(outcome, drained, before, restore) is back
    assert FilterModule().filters()['router_put_back'](outcome, drained, before, restore) is back


def test_the_put_back_filter_reads_what_deploy_yml_gives_it():
    """The condition of deploy.yml's put-back task, templated with the filter, on the facts it reads."""
    with open(os.path.join(ROOT, 'playbooks', 'deploy.yml'), encoding='utf-8') as handle:
        plays = yaml.safe_load(handle)
    tasks = [t for play in plays for t in play.get('tasks') or [] if t.get('name') == 'Put the host back into its routers']
    assert len(tasks) == 1
    condition = tasks[0]['when'][-1]
    assert 'router_put_back' in condition
    cases = [({'fleet_result': {'outcome': 'deployed'}}, True),
             ({'fleet_result': {'outcome': 'failed'}}, False),
             ({}, False),
             ({'__fleet_router_drained': True, '__fleet_before': {'vllm_active': True}}, True),
             ({'__fleet_router_drained': True, '__fleet_before': {'vllm_active': True},
               '__fleet_restore_vllm': {'failed': True}}, False)]
    for facts, back in cases:
        assert _template(condition, facts) is back, facts


def _template(condition, facts):
    """Jinja (native types, as Ansible templates a condition) with the collection's router filters under their full
    names."""
    from jinja2.nativetypes import NativeEnvironment

    environment = NativeEnvironment()
    environment.filters.update(('lmcache_vllm.fleet.' + name, f) for name, f in FilterModule().filters().items())
    return environment.from_string('{{ %s }}' % condition).render(facts)


def test_the_lookups_plan_a_router_host_the_same_way():
    """router_plan (the current router host) and router_drain (every router host) both plan through
    router_config.plan_from_inventory: the host's own variables and its workers' from hostvars, templated."""
    seen = []

    def template(value):
        seen.append(value)
        if value == '{{ broken }}':
            raise ValueError('broken is undefined')
        return value

    variables = {'vllm_router_instances': [{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000}],
                 'vllm_router_policy': '{{ broken }}', 'unrelated': 1}
    plan = router_config.plan_from_inventory('rt-01', variables, WORKERS, GROUPS, template,
                                             lambda host, name, error: 'host %s: %s: %s' % (host, name, error),
                                             ValueError)
    assert plan['errors'][0] == 'host rt-01: vllm_router_policy: broken is undefined'
    assert [w['host'] for w in plan['instances'][0]['workers']] == ['gpu-01', 'gpu-02']
    assert 1 not in seen and ['Qwen/Qwen3.6-27B', '0.0.0.0', 8000, '10.0.0.1'] in seen
    good = dict(variables, vllm_router_policy='round_robin')
    assert router_config.plan_from_inventory('rt-01', good, WORKERS, GROUPS, template, None, ValueError) == \
        router_config.plan_router('rt-01', good, GROUPS, WORKERS.get)
