# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plan_tree.plan_one, the one computation of a host's plan of every stage (plan.yml's action, the lookup
host_plan of validate.yml, deploy.yml, status.yml and remove.yml): N and the Mamba cache blocks M predicted
from the model and the GPU, the GPU memory table, and the refusal of a model that does not fit its GPU.

The bounds are what vLLM 0.24.0 reported for Qwen3.6-27B on an NVIDIA H200 (benchmarks/results/gpu-clamp-27b-*:
M=368 at --gpu-memory-utilization 0.5, M=604 in the refusal at 0.6 with max_num_seqs 1024); they are read from
those result files, not restated here."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import mamba_clamp
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_tree

from fleet_collection import REPO_ROOT

MODEL_DIR = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3.6-27b')
RESULTS = os.path.join(REPO_ROOT, 'benchmarks', 'results')
H200_VARS = os.path.join(REPO_ROOT, 'tests', 'gpu', 'h200-27b-host-vars.yml')


def measured():
    """{gpu memory utilization: M vLLM reported on the H200 with the default max_num_seqs path}."""
    with open(os.path.join(RESULTS, 'gpu-clamp-27b-gmu050-20261201T1515.json')) as handle:
        half = json.load(handle)
    with open(os.path.join(RESULTS, 'gpu-clamp-27b-refusal-gmu060-20261201T1533.json')) as handle:
        refused = json.load(handle)
    assert half['inputs']['vllm_server_gpu_memory_utilization'] == 0.5 and 'H200' in half['nvidia_smi']
    assert refused['inputs']['vllm_server_gpu_memory_utilization'] == 0.6
    return {0.5: half['mamba']['M'], 0.6: refused['refusal_first']['refusal']['mamba_cache_blocks']}


def read_config(term, revision='main', paths=None):
    path = os.path.join(term, 'config.json')
    if not os.path.isfile(path):
        raise LookupError('model %s: config.json not found on the control node' % term)
    with open(path, encoding='utf-8') as handle:
        return json.load(handle)


def h200_settings(**overrides):
    with open(H200_VARS) as handle:
        settings = yaml.safe_load(handle)
    settings.update(dict({'vllm_server_model': MODEL_DIR}, **overrides))
    return settings


def plan(settings, **facts):
    facts.setdefault('n_kind', 'predicted')
    return plan_tree.plan_one('gpu-acceptance', settings, plan_tree.ConfigReader(read_config), facts)[1]


def test_the_measured_facts_are_what_the_issue_of_the_clamp_names():
    assert measured() == {0.5: 368, 0.6: 604}


@pytest.mark.parametrize('utilization', [0.5, 0.6])
def test_h200_27b_renders_max_num_seqs_within_the_m_vllm_reported(utilization):
    out = plan(h200_settings(vllm_server_gpu_memory_utilization=utilization))
    assert out['errors'] == []
    mamba = out['derived']['mamba']
    assert mamba['source'] == 'predicted' and mamba['clamped']
    value = out['derived']['max_num_seqs']
    assert 64 <= value <= measured()[utilization], mamba['how']
    # errs low, but not absurdly: at least 60 % of what vLLM allocated
    assert value >= 0.6 * measured()[utilization]
    argv = out['vllm']['argv']
    assert argv[argv.index('--max-num-seqs') + 1] == str(value)
    assert any('host gpu-acceptance: --max-num-seqs lowered' in w and 'vllm_server_gpu_memory_utilization' in w
               for w in out['warnings'])


def test_h200_27b_at_0_9_keeps_vllms_default():
    out = plan(h200_settings(vllm_server_gpu_memory_utilization=0.9))
    assert out['derived']['mamba']['mamba_cache_blocks'] > 1024 > measured()[0.6]
    assert out['derived']['max_num_seqs'] is None and '--max-num-seqs' not in out['vllm']['argv']


def test_a_small_m_warns_naming_the_host_and_what_raises_it():
    out = plan(h200_settings(vllm_server_gpu_memory_utilization=0.42))
    value = out['derived']['max_num_seqs']
    assert 0 < value < 64
    warning = [w for w in out['warnings'] if '--max-num-seqs lowered' in w][0]
    assert warning.startswith('host gpu-acceptance:') and 'fewer than 64' in warning
    assert 'vllm_server_gpu_memory_utilization or vllm_server_tensor_parallel_size' in warning


def test_gpu_facts_win_over_the_table():
    facts = {'gpus': [{'index': 0, 'name': 'NVIDIA H200', 'memory_total_mib': 143771 // 2}]}
    out = plan(h200_settings(vllm_server_gpu_memory_utilization=0.9), gpus=facts)
    assert out['derived']['mamba']['gpu_memory_source'] == 'gpu facts'
    assert out['derived']['mamba']['mamba_cache_blocks'] < plan(h200_settings(
        vllm_server_gpu_memory_utilization=0.9))['derived']['mamba']['mamba_cache_blocks']


def test_a_reported_m_wins_and_the_group_is_its_source():
    group = {'mamba_cache_blocks': 604, 'source': 'refusal', 'group': 'G1', 'canary': 'gpu-01'}
    out = plan(h200_settings(), n=784, n_kind='probed', mamba_blocks=group)
    assert out['derived']['mamba']['source'] == 'group' and out['derived']['mamba']['group_source'] == 'refusal'
    assert out['derived']['max_num_seqs'] == 604
    cached = plan(h200_settings(), n=784, n_kind='probed', mamba_blocks={'mamba_cache_blocks': 600, 'source': 'cached'})
    assert cached['derived']['mamba']['source'] == 'cached' and cached['derived']['max_num_seqs'] == 600


def test_m_is_shown_with_its_source_even_when_it_cannot_be_predicted():
    out = plan(h200_settings(vllm_server_gpu_architecture=None, vllm_server_model='/nowhere/model',
                             vllm_server_expected_block_size=784))
    assert out['derived']['mamba']['mamba_cache_blocks'] is None and out['derived']['mamba']['source'] == 'unknown'
    out = plan(h200_settings(vllm_server_gpu_architecture='sm90'))
    assert out['derived']['mamba']['mamba_cache_blocks'] is None and 'gpu_architecture' in out['derived']['mamba']['problem']


@pytest.mark.parametrize('gpu', ['NVIDIA L4', 'NVIDIA L40S', 'NVIDIA A100-SXM4-40GB', 'NVIDIA A100-PCIE-40GB'])
def test_the_27b_at_tp_1_does_not_fit_and_the_error_says_what_changes_that(gpu):
    out = plan(h200_settings(vllm_server_gpu_architecture=gpu, vllm_server_gpu_memory_utilization=0.9))
    errors = [e for e in out['errors'] if 'does not fit' in e]
    assert len(errors) == 1 and errors[0].startswith('host gpu-acceptance: the model does not fit')
    for name in ('vllm_server_tensor_parallel_size', 'vllm_server_gpu_memory_utilization', 'quantiz'):
        assert name in errors[0]
    assert gpu in errors[0]


@pytest.mark.parametrize('gpu, tp', [('NVIDIA A100-SXM4-80GB', 1), ('NVIDIA H100 80GB HBM3', 1), ('NVIDIA L40S', 2)])
def test_the_27b_fits_where_it_can(gpu, tp):
    out = plan(h200_settings(vllm_server_gpu_architecture=gpu, vllm_server_gpu_memory_utilization=0.9,
                             vllm_server_tensor_parallel_size=tp))
    assert not [e for e in out['errors'] if 'does not fit' in e], out['errors']
    assert out['derived']['gpu_memory']['fits'] is True


def test_a_quantized_model_without_an_index_is_not_refused():
    out = plan(h200_settings(vllm_server_gpu_architecture='NVIDIA L4',
                             vllm_server_extra_args=['--quantization', 'fp8']))
    assert not [e for e in out['errors'] if 'does not fit' in e]
    assert out['derived']['gpu_memory']['fits'] is None


@pytest.mark.parametrize('name, mib', [
    ('NVIDIA H200', 143771), ('NVIDIA H200 NVL', 143771), ('NVIDIA GH200 480GB', 97871),
    ('NVIDIA H100 80GB HBM3', 81559), ('NVIDIA H100 PCIe', 81559), ('NVIDIA H100 NVL', 95830),
    ('NVIDIA A100-SXM4-40GB', 40960), ('NVIDIA A100-PCIE-40GB', 40960), ('NVIDIA A100-SXM4-80GB', 81920),
    ('NVIDIA A100 80GB PCIe', 81920), ('NVIDIA L4', 23034), ('NVIDIA L40', 46068), ('NVIDIA L40S', 46068),
    ('NVIDIA A10', 23028), ('NVIDIA A10G', 23028), ('NVIDIA B200', 183359), ('NVIDIA RTX 6000 Ada Generation', 49140),
    ('NVIDIA RTX A6000', 49140), ('NVIDIA A40', 46068),
])
def test_gpu_table_reads_the_most_specific_name(name, mib):
    assert mamba_clamp.table_memory_mib(name) == mib
    assert mamba_clamp.gpu_memory_mib(None, name) == (mib, 'GPU table (%s)' % name)


def test_gpu_table_knows_no_architecture_names():
    assert mamba_clamp.table_memory_mib('sm90') is None and mamba_clamp.table_memory_mib(None) is None


def test_group_blocks_takes_the_canarys_m_only_with_the_same_inputs():
    group = {'name': 'G1', 'canary': 'a-2'}
    canary = {'mamba_cache_blocks': 604, 'source': 'refusal'}
    inputs = {'gpu_memory_utilization': 0.6}
    took = mamba_clamp.group_blocks(None, {'source': 'group'}, canary, inputs, dict(inputs), group)
    assert took == {'mamba_cache_blocks': 604, 'source': 'refusal', 'group': 'G1', 'canary': 'a-2'}
    assert mamba_clamp.group_blocks(None, {'source': 'group'}, canary, inputs, {'gpu_memory_utilization': 0.5},
                                    group) is None
    assert mamba_clamp.group_blocks(None, {'source': 'probe'}, canary, inputs, inputs, group) is None
    own = {'mamba_cache_blocks': 500, 'source': 'refusal'}
    assert mamba_clamp.group_blocks(own, {'source': 'group'}, canary, inputs, inputs, group) is own
