# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""predicted_block_size: every keyword of its documentation, and the hardware architecture."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.fleet import FilterModule

UNIT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO_ROOT = os.path.dirname(os.path.dirname(UNIT_DIR))
DOC = os.path.join(REPO_ROOT, 'plugins', 'filter', 'predicted_block_size.yml')
FIXTURES = os.path.join(UNIT_DIR, 'fixtures', 'models')
SMI = os.path.join(UNIT_DIR, 'fixtures', 'nvidia-smi')

predict = FilterModule().filters()['predicted_block_size']


def load(name):
    with open(os.path.join(FIXTURES, name, 'config.json'), encoding='utf-8') as handle:
        return json.load(handle)


def documented_options():
    with open(DOC, encoding='utf-8') as handle:
        return yaml.safe_load(handle)['DOCUMENTATION']['options']


# one valid value per documented keyword, and the N it gives for Qwen3.5-0.8B (None: any int)
KEYWORD_VALUES = {
    'tensor_parallel_size': (2, None),
    'dtype': ('float32', 288),
    'kv_cache_dtype': ('fp8', 1072),
    'mamba_cache_dtype': ('float32', 560),
    'mamba_ssm_cache_dtype': ('bfloat16', 288),
    'num_speculative_tokens': (2, None),
    'speculative_config': ({'method': 'qwen3_5_mtp', 'num_speculative_tokens': 1}, None),
    'block_size': (32, 544),
    'platform': ('cpu', 640),
    'architecture': ('hopper', 544),
    'vllm_version': ('0.19.1', 544),
    'details': (True, None),
}


def test_every_documented_keyword_has_a_case():
    assert set(documented_options()) - {'_input'} == set(KEYWORD_VALUES)


@pytest.mark.parametrize('keyword', sorted(KEYWORD_VALUES))
def test_every_documented_keyword_is_accepted(keyword):
    value, want = KEYWORD_VALUES[keyword]
    got = predict(load('qwen3.5-0.8b'), **{keyword: value})
    if keyword == 'details':
        assert got['block_size'] == 544
        return
    assert isinstance(got, int) and got > 0
    if want is not None:
        assert got == want


@pytest.mark.parametrize('alias, name, value', [('device', 'platform', 'cpu'),
                                                ('gpu_architecture', 'architecture', 'cpu')])
def test_documented_aliases(alias, name, value):
    small = load('qwen3.5-0.8b')
    assert predict(small, **{alias: value}) == predict(small, **{name: value}) == 640


def test_the_call_plan_yml_makes():
    """predicted_block_size(..., architecture=...) used to fail with an unexpected keyword."""
    details = predict(load('qwen3.6-27b'), details=True, tensor_parallel_size=1, dtype='auto',
                      kv_cache_dtype='auto', mamba_ssm_cache_dtype='auto', mamba_cache_dtype='auto',
                      block_size=None, speculative_config=None, platform='cuda', vllm_version='0.32.0',
                      architecture='sm90')
    assert details['block_size'] == 784
    assert details['architecture'] == 'Qwen3_5ForConditionalGeneration'
    assert details['assumed_architecture'] == 'sm90' and details['architecture_source'] == 'given'
    assert details['attention_backend'] == 'FLASH_ATTN' and details['kernel_block_size'] == 16


@pytest.mark.parametrize('options, arch, source', [
    ({}, 'sm90', 'default for platform cuda'),
    ({'platform': 'cuda'}, 'sm90', 'default for platform cuda'),
    ({'platform': 'cpu'}, 'cpu', 'default for platform cpu'),
    ({'architecture': None}, 'sm90', 'default for platform cuda'),
    ({'architecture': ''}, 'sm90', 'default for platform cuda'),
    ({'architecture': 'cpu'}, 'cpu', 'given'),
    ({'architecture': 'NVIDIA H200'}, 'sm90', 'given'),
    ({'architecture': '8.0'}, 'sm80', 'given'),
    ({'architecture': 'blackwell', 'platform': 'cuda'}, 'sm100', 'given'),
])
def test_result_says_which_architecture_it_assumed(options, arch, source):
    details = predict(load('qwen3.5-0.8b'), details=True, **options)
    assert details['assumed_architecture'] == arch and details['architecture_source'] == source


@pytest.mark.parametrize('arch, backend', [('volta', 'TRITON_ATTN'), ('turing', 'TRITON_ATTN'),
                                           ('ampere', 'FLASH_ATTN'), ('ada', 'FLASH_ATTN'),
                                           ('hopper', 'FLASH_ATTN'), ('blackwell', 'FLASHINFER'),
                                           ('sm120', 'FLASHINFER')])
def test_every_nvidia_generation_gives_the_gpu_n(arch, backend):
    details = predict(load('qwen3.6-27b'), details=True, architecture=arch)
    assert details['attention_backend'] == backend and details['block_size'] == 784


def test_cpu_architecture_selects_the_cpu_kernel_and_block():
    details = predict(load('qwen3.5-0.8b'), details=True, architecture='cpu')
    assert details['platform'] == 'cpu' and details['kernel_block_size'] == 32
    assert details['block_size'] == 640
    assert predict(load('qwen3.5-0.8b'), architecture='cpu', block_size=16) == 544


def test_gpu_inventory_dicts_are_accepted():
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import parse_gpu_inventory
    with open(os.path.join(SMI, 'synthetic-h200x2-query-gpu.txt')) as f:
        gpus = parse_gpu_inventory(f.read())
    assert predict(load('qwen3.6-27b'), architecture=gpus) == 784
    assert predict(load('qwen3.6-27b'), architecture=gpus[0], details=True)['assumed_architecture'] == 'sm90'
    assert predict(load('qwen3.6-27b'), architecture={'name': 'NVIDIA H100 80GB HBM3'}) == 784


def test_legacy_version_reports_alignment_16():
    details = predict(load('qwen3.5-0.8b'), details=True, vllm_version='0.19.1', architecture='cpu')
    assert details['kernel_block_size'] == 16


@pytest.mark.parametrize('options, text', [
    ({'architecture': 'pentium'}, 'not known'),
    ({'architecture': 'cpu', 'platform': 'cuda'}, 'is a cpu architecture but platform is cuda'),
    ({'architecture': 'hopper', 'platform': 'cpu'}, 'is a cuda architecture but platform is cpu'),
    ({'architecture': 'sm60'}, 'not supported by vLLM'),
    ({'architecture': [{'compute_cap': '9.0'}, {'compute_cap': '8.0'}]}, 'different architectures'),
    ({'architecture': {'name': 'Mystery GPU'}}, 'name the predictor does not know'),
])
def test_architecture_errors(options, text):
    with pytest.raises(AnsibleFilterError, match=text):
        predict(load('qwen3.5-0.8b'), **options)
