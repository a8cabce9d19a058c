# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for a serving host's result of a deploy (module_utils/report/host_result.py, the filter
fleet_result): what each stage records, what it keeps, what it refuses, and the summary row read from it alone."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.result import FilterModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import host_result

PLAN = {'summary': {'model': 'Qwen/Qwen3.6-27B', 'tp': 2, 'hybrid': True, 'chunk_size': 784,
                    'max_num_batched_tokens': 1567},
        'prediction': {'block_size': 784},
        'vllm': {'env_file': {'HF_TOKEN': 'hf_secret'}}}


def _stages():
    """The results deploy.yml's stages record for one host that deploys: stage 2, 3 and 4."""
    probed = host_result.record(None, 'gpu-01', 'probe', 'probed', block_size=784, probe={'source': 'group'},
                                gpus={'count': 2, 'gpus': []})
    checked = host_result.record(probed, 'gpu-01', 'check', 'checked', plan=PLAN, block_size=784,
                                 probe={'source': 'group'})
    deployed = host_result.record(checked, 'gpu-01', 'rollout', 'deployed', findings=[])
    final = host_result.record(deployed, 'gpu-01', None, None, services={'lmcache': 'active', 'vllm': 'active'},
                               warm_start='host gpu-01: compile caches of gpu-00, 12.0 MiB copied in 0.4 s')
    return probed, checked, deployed, final


def test_each_stage_adds_what_it_learnt_and_keeps_the_rest():
    probed, checked, deployed, final = _stages()
    assert (probed['stage'], probed['outcome'], probed['block_size'], probed['block_size_source'], probed['gpus']) == (
        'probe', 'probed', 784, 'group', 2)
    assert probed['summary'] == {} and probed['predicted_block_size'] is None
    assert (checked['summary']['chunk_size'], checked['predicted_block_size'], checked['gpus']) == (784, 784, 2)
    assert (final['stage'], final['outcome'], final['services']) == ('rollout', 'deployed',
                                                                     {'lmcache': 'active', 'vllm': 'active'})
    assert final['summary'] == PLAN['summary'] and final['block_size'] == 784


def test_the_result_carries_no_secret_of_the_plan():
    final = _stages()[-1]
    assert 'hf_secret' not in repr(final) and 'vllm' not in final


def test_a_failure_keeps_what_the_earlier_stages_recorded_and_says_why():
    checked = _stages()[1]
    failed = host_result.record(checked, 'gpu-01', 'vllm', 'failed',
                                findings=[{'cause': 'oom', 'message': 'host gpu-01: out of memory'}])
    restored = host_result.record(failed, 'gpu-01', None, None, findings=failed['findings'] + ['came back'])
    assert (restored['stage'], restored['outcome'], restored['block_size']) == ('vllm', 'failed', 784)
    assert [f['message'] for f in restored['findings']] == ['host gpu-01: out of memory', 'came back']


@pytest.mark.parametrize('previous, stage, outcome, needle', [
    (None, 'deploy', 'probed', "unknown stage 'deploy'"),
    (None, 'probe', 'ok', "unknown outcome 'ok'"),
    (None, None, 'probed', 'unknown stage None'),
    ({'stage': 'probe', 'outcome': None}, 'probe', None, 'unknown outcome None'),
])
def test_a_stage_or_outcome_the_contract_does_not_know_is_refused(previous, stage, outcome, needle):
    with pytest.raises(host_result.ResultError, match=needle.replace('(', r'\(')):
        host_result.record(previous, 'gpu-01', stage, outcome)


def test_the_summary_row_is_read_from_the_result_alone():
    row = host_result.summary_row('gpu-01', _stages()[-1])
    assert (row['n'], row['n_source'], row['predicted'], row['gpus'], row['lmcache'], row['result']) == (
        784, 'group', 784, 2, 'active', 'deployed')
    assert row['warm_start'].startswith('host gpu-01: compile caches of gpu-00')
    absent = host_result.summary_row('gpu-02', None)
    assert (absent['model'], absent['n'], absent['n_source'], absent['result'], absent['vllm'], absent['warm_start']) == (
        '?', '?', '-', 'failed', 'unknown', None)


def test_the_filter_records_and_refuses_in_ansibles_words():
    fleet_result = FilterModule().filters()['fleet_result']
    result = fleet_result(None, 'gpu-01', 'probe', 'probed', block_size=640)
    assert fleet_result(result, 'gpu-01', 'rollout', 'skipped')['block_size'] == 640
    with pytest.raises(AnsibleFilterError, match='unknown argument'):
        fleet_result(None, 'gpu-01', 'probe', 'probed', outcome_of='x')
    with pytest.raises(AnsibleFilterError, match='previous result'):
        fleet_result('deployed', 'gpu-01', 'probe', 'probed')
    with pytest.raises(AnsibleFilterError, match="unknown stage 'nope'"):
        fleet_result(None, 'gpu-01', 'nope', 'probed')
    with pytest.raises(AnsibleFilterError, match='findings must be a list'):
        fleet_result(None, 'gpu-01', 'probe', 'failed', findings='boom')
