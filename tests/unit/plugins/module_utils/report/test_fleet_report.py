# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/report/fleet_report.py and the filters of plugins/filter/day2.py."""

from __future__ import annotations

import math

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter import day2
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report as fr
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules import FleetRuleError


def service(state='active', ok=True, present=True, status=200):
    return {'present': present, 'active_state': state, 'sub_state': 'running',
            'health': {'ok': ok, 'status': status if ok else None, 'url': 'http://x', 'error': None if ok else 'refused'}}


SERVING = {
    'state': 'serving',
    'services': {'lmcache': service(), 'vllm': service()},
    'block_size': {'n': 784, 'source': 'probe', 'detail': 'probed'},
    'versions': {'vllm': '0.32.0', 'vllm_package': 'vllm', 'lmcache': '0.5.6'},
    'gpus': {'driver_present': True, 'count': 2, 'summary': ['0 NVIDIA H200 52.4/140.4 GiB 37%'],
             'gpus': [{'name': 'NVIDIA H200', 'memory_used_mib': 53658, 'memory_total_mib': 143771},
                      {'name': 'NVIDIA H200', 'memory_used_mib': 0, 'memory_total_mib': 143771}]},
    'metrics': {'lmcache': {'hit_ratio': 0.5, 'lookup_hit_tokens': 10.0, 'lookup_requested_tokens': 20.0},
                'vllm': {'external_hit_ratio': 0.25, 'prefix_hit_ratio': None}},
    'problems': [],
}


def test_rows_of_a_serving_host_a_failed_task_and_an_unreachable_host():
    rows = fr.status_rows([
        {'host': 'gpu-01', 'model': 'Qwen/Qwen3.6-27B', 'result': SERVING},
        {'host': 'gpu-02', 'model': 'm', 'result': {'unreachable': True, 'msg': 'Failed to connect to the host via ssh\nmore'}},
        {'host': 'gpu-03', 'model': 'm', 'result': {'failed': True, 'msg': 'module failure'}},
        {'host': 'gpu-04', 'model': None, 'result': None},
    ])
    first = rows[0]
    assert (first['state'], first['lmcache'], first['vllm'], first['n']) == ('serving', 'active/ok', 'active/ok', '784 (probe)')
    assert first['versions'] == '0.32.0 / 0.5.6'
    assert first['gpus'] == '2x NVIDIA H200 52/281 GiB'
    assert (first['lmcache_hit'], first['vllm_external_hit'], first['vllm_prefix_hit']) == ('50.0%', '25.0%', '-')
    assert [r['state'] for r in rows[1:]] == ['unreachable', 'error', 'unknown']
    assert rows[1]['problems'] == ['host gpu-02: Failed to connect to the host via ssh']
    assert rows[2]['problems'] == ['host gpu-03: module failure']
    assert rows[3]['model'] == '-' and rows[3]['problems'][0].startswith('host gpu-04: the status was not read')


def test_rows_of_units_that_are_down_absent_or_unhealthy():
    result = dict(SERVING, state='down', gpus={'driver_present': False},
                  services={'lmcache': service(ok=False), 'vllm': service(state='failed', ok=False)},
                  block_size={}, problems=['host gpu-05: unit vllm.service is failed (failed)'])
    (row,) = fr.status_rows([{'host': 'gpu-05', 'model': 'm', 'result': result}])
    assert (row['lmcache'], row['vllm'], row['n'], row['gpus']) == ('active/no answer', 'failed', '? (unknown)', 'no driver')
    (absent,) = fr.status_rows([{'host': 'h', 'model': 'm', 'result': dict(SERVING, gpus=None, services={
        'lmcache': service(present=False), 'vllm': service(present=False)})}])
    assert (absent['lmcache'], absent['gpus']) == ('absent', '-')


def test_lines_align_columns_count_states_and_list_problems():
    rows = fr.status_rows([
        {'host': 'gpu-01', 'model': 'Qwen/Qwen3.6-27B', 'result': SERVING},
        {'host': 'a-much-longer-host-name', 'model': 'm', 'result': {'unreachable': True, 'msg': 'gone'}},
    ])
    lines = fr.status_lines(rows)
    assert lines[0].startswith('host                    state       lmcache')
    assert lines[1].startswith('gpu-01                  serving     active/ok')
    assert lines[2].startswith('a-much-longer-host-name unreachable -')
    assert lines[3] == '2 host(s): 1 serving, 1 unreachable'
    assert lines[4:] == ['host a-much-longer-host-name: gone']
    assert all(line == line.rstrip() for line in lines)
    assert fr.status_lines([]) == [fr.status_lines([])[0], '0 host(s): ']


@pytest.mark.parametrize('value, want', [(None, '-'), (0.0, '0.0%'), (0.5125, '51.2%'), (1, '100.0%')])
def test_percent(value, want):
    assert fr.percent(value) == want


def host(name, **kw):
    base = {'host': name, 'address': None, 'model': 'M', 'vllm_host': '127.0.0.1', 'vllm_port': 8000,
            'lmcache_http_host': '127.0.0.1', 'lmcache_http_port': 8080}
    base.update(kw)
    return base


def test_file_sd_targets_by_bind_address():
    out = fr.file_sd_targets([
        host('gpu-01', address='10.0.0.11', vllm_host='0.0.0.0', lmcache_http_host='10.0.1.11', labels={'dc': 'x'}),
        host('gpu-02', vllm_host='', lmcache_http_host='localhost'),
        host('gpu-03', address='fd00::3', vllm_host='::', lmcache_http_host='[::]', lmcache_http_port=8081),
        host('gpu-04', address='10.0.0.14', vllm_host='::1', lmcache_http_host='127.0.0.53'),
    ])
    targets = [(g['labels']['host'], g['labels']['service'], g['targets'][0]) for g in out['targets']]
    assert targets == [('gpu-01', 'vllm', '10.0.0.11:8000'), ('gpu-01', 'lmcache', '10.0.1.11:8080'),
                       ('gpu-02', 'vllm', 'gpu-02:8000'),
                       ('gpu-03', 'vllm', '[fd00::3]:8000'), ('gpu-03', 'lmcache', '[fd00::3]:8081')]
    assert out['targets'][0]['labels'] == {'host': 'gpu-01', 'model': 'M', 'service': 'vllm', 'dc': 'x'}
    assert [s.split(':')[0] for s in out['skipped']] == ['host gpu-02', 'host gpu-04', 'host gpu-04']
    assert "LMCache's HTTP API listens on localhost (lmcache_server_http_host)" in out['skipped'][0]
    assert 'vLLM listens on ::1 (vllm_server_host)' in out['skipped'][1]
    assert 'no authentication' in out['skipped'][2]


def test_filters():
    assert day2.fleet_file_sd(None) == {'targets': [], 'skipped': []}
    with pytest.raises(AnsibleFilterError):
        day2.fleet_file_sd([1, 2])
    samples = day2.prometheus_samples(['a_total{x="1"} 2', 'b +Inf'])
    assert samples[0] == {'name': 'a_total', 'labels': {'x': '1'}, 'value': 2.0}
    assert math.isinf(samples[1]['value'])
    assert day2.prometheus_samples('bad line here\n') == []
    with pytest.raises(AnsibleFilterError, match='line 1'):
        day2.prometheus_samples('bad line here\n', strict=True)
    with pytest.raises(AnsibleFilterError):
        day2.prometheus_samples(42)
    assert day2.kv_store_file_sd(None) == {'targets': [], 'skipped': []}
    with pytest.raises(AnsibleFilterError, match='fleet_monitoring_labels sets host'):
        day2.kv_store_file_sd([{'host': 'kv-1', 'labels': {'host': 'x'}, 'exporter': {'enabled': True}}])
    names = ['fleet_file_sd', 'kv_store_file_sd', 'prometheus_samples']
    assert sorted(day2.FilterModule().filters()) == names


def test_file_sd_vllm_target_carries_the_plans_n_and_hybrid():
    out = fr.file_sd_targets([
        host('gpu-01', vllm_host='0.0.0.0', lmcache_http_host='0.0.0.0', block_size=528, hybrid=True),
        host('gpu-02', vllm_host='0.0.0.0', lmcache_http_host='0.0.0.0', block_size='None', hybrid='False'),
    ])
    labels = {(g['labels']['host'], g['labels']['service']): g['labels'] for g in out['targets']}
    assert labels[('gpu-01', 'vllm')] == {'host': 'gpu-01', 'model': 'M', 'service': 'vllm',
                                          'fleet_block_size': '528', 'fleet_hybrid': 'true'}
    # only the vLLM target: the alerts compare vLLM's own N with the plan's
    assert 'fleet_block_size' not in labels[('gpu-01', 'lmcache')]
    assert labels[('gpu-02', 'vllm')] == {'host': 'gpu-02', 'model': 'M', 'service': 'vllm'}


def test_file_sd_refuses_user_labels_named_like_the_plans():
    with pytest.raises(FleetRuleError, match='fleet_monitoring_labels sets fleet_block_size'):
        fr.file_sd_targets([host('gpu-01', labels={'fleet_block_size': '16'})])


def test_the_status_row_shows_m_and_its_source():
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report
    assert fleet_report._mamba({'mamba_cache_blocks': 6, 'source': 'refusal'}) == '6 (refusal)'
    assert fleet_report._mamba(None) == '-' and fleet_report._mamba({'mamba_cache_blocks': None}) == '-'
    assert ('mamba', 'M (source)') in fleet_report.COLUMNS
