# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/cli/mamba_clamp.py against what vLLM 0.24.0 did on an NVIDIA H200:
Qwen3.6-27B at --gpu-memory-utilization 0.6 loaded 50.22 GiB of weights, had 28.94 GiB of KV cache
memory and refused max_num_seqs 1024 with 604 Mamba cache blocks (../shared/reference/cuda-host.md)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import mamba_clamp
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, '..', '..', '..', '..', 'fixtures', 'models')
H200_MIB = 143771
GIB = 1 << 30

# The refusal as vLLM 0.24.0 logged it on the H200 (journal line of the engine core).
RECORDED_REFUSAL = (
    '(EngineCore pid=7113) ERROR 12-01 11:52:40 [core.py:1107] ValueError: max_num_seqs (1024) exceeds available '
    'Mamba cache blocks (604). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot '
    'proceed. Please lower max_num_seqs to at most 604 or increase gpu_memory_utilization.')


def config(name):
    with open(os.path.join(MODELS, name, 'config.json')) as handle:
        return json.load(handle)


@pytest.fixture(scope='module')
def big():
    cfg = config('qwen3.6-27b')
    return cfg, explain_block_size(cfg, platform='cuda', vllm_version='0.24.0')


def test_parse_refusal_recorded_line():
    assert mamba_clamp.parse_refusal(RECORDED_REFUSAL) == {'max_num_seqs': 1024, 'mamba_cache_blocks': 604}


def test_parse_refusal_takes_the_last_and_ignores_other_text():
    text = 'max_num_seqs (1024) exceeds available Mamba cache blocks (604)\nretry\n' \
           'max_num_seqs (604) exceeds available Mamba cache blocks (590)'
    assert mamba_clamp.parse_refusal(text)['mamba_cache_blocks'] == 590
    assert mamba_clamp.parse_refusal('Available KV cache memory: 28.94 GiB') is None
    assert mamba_clamp.parse_refusal(None) is None


def test_blocks_from_the_measured_kv_memory_is_604(big):
    pred = big[1]
    assert pred['block_size'] == 784
    attention, mamba = mamba_clamp.layer_counts(config('qwen3.6-27b')['text_config'])
    assert (attention, mamba) == (16, 48)
    group = mamba_clamp.group_size(attention, mamba)
    assert group == 16
    # "Available KV cache memory: 28.94 GiB" is rounded: every value it stands for gives 604.
    for gib in (28.935, 28.94, 28.9449):
        assert mamba_clamp.blocks_for(int(gib * GIB), 784 * pred['attn_page_size_per_token'], group) == 604


def test_group_size_follows_vllm():
    assert mamba_clamp.group_size(6, 18) == 6
    assert mamba_clamp.group_size(12, 13) == 13
    assert mamba_clamp.group_size(0, 10) == 10


def test_weights_from_the_parameter_count_match_the_measured_load(big):
    cfg = big[0]
    weights, source = mamba_clamp.weight_bytes(cfg)
    assert 'parameter count' in source
    # vLLM logged "Model loading took 50.22 GiB" (dummy weights, --language-model-only).
    assert abs(weights / float(GIB) - 50.22) < 0.25


def test_weights_from_a_safetensors_index(tmp_path, big):
    cfg = big[0]
    (tmp_path / 'model.safetensors.index.json').write_text(json.dumps({'metadata': {'total_size': 55_000_000_000}}))
    assert mamba_clamp.weight_bytes(cfg, str(tmp_path)) == (55_000_000_000, 'safetensors index metadata.total_size')


def test_prediction_errs_low_but_close_at_0_6(big):
    cfg, pred = big
    result = mamba_clamp.predict_mamba_blocks(cfg, pred, H200_MIB, 0.6, memory_source='gpu facts')
    assert result['source'] == 'predicted'
    assert 520 <= result['mamba_cache_blocks'] <= 604
    assert result['kv_cache_gib'] <= 28.94
    assert 'N=784' in result['how'] and '16 layers per group' in result['how']


def test_prediction_at_0_5_and_default(big):
    cfg, pred = big
    half = mamba_clamp.predict_mamba_blocks(cfg, pred, H200_MIB, 0.5)['mamba_cache_blocks']
    default = mamba_clamp.predict_mamba_blocks(cfg, pred, H200_MIB, None)
    assert 0 < half < 604
    assert default['gpu_memory_utilization'] == 0.9 and default['mamba_cache_blocks'] > 1024


def test_prediction_refuses_a_dense_model():
    cfg = config('qwen3-dense-tiny')
    with pytest.raises(ValueError):
        mamba_clamp.predict_mamba_blocks(cfg, explain_block_size(cfg, platform='cuda'), H200_MIB, 0.6)


def test_rescale_to_the_probed_n(big):
    cfg, pred = big
    result = mamba_clamp.predict_mamba_blocks(cfg, pred, H200_MIB, 0.6)
    doubled = mamba_clamp.rescale(result, 2 * 784)
    assert doubled['mamba_cache_blocks'] == result['kv_cache_bytes'] // (2 * 784 * 4096) // 16
    assert mamba_clamp.rescale({'source': 'refusal', 'mamba_cache_blocks': 604}, 1568)['mamba_cache_blocks'] == 604


def test_vllm_default_max_num_seqs():
    assert mamba_clamp.vllm_default_max_num_seqs('cuda', H200_MIB, 'NVIDIA H200') == 1024
    assert mamba_clamp.vllm_default_max_num_seqs('cuda', 81920, 'NVIDIA A100-SXM4-80GB') == 256
    assert mamba_clamp.vllm_default_max_num_seqs('cuda', 46068, 'NVIDIA L40S') == 256
    assert mamba_clamp.vllm_default_max_num_seqs('cpu') == 128


def test_gpu_memory_from_facts_then_table():
    assert mamba_clamp.gpu_memory_mib([{'memory_total_mib': 143771}, {'memory_total_mib': 81559}]) == (81559, 'gpu facts')
    assert mamba_clamp.gpu_memory_mib(None, 'NVIDIA H200')[0] == H200_MIB
    assert mamba_clamp.gpu_memory_mib(None, 'sm90')[0] is None


def test_decide_clamps_the_default_with_a_warning():
    out = mamba_clamp.decide_max_num_seqs('h200', None, {'mamba_cache_blocks': 604, 'source': 'refusal'}, 1024)
    assert out['value'] == 604 and out['clamped'] and not out['errors']
    assert 'h200' in out['warnings'][0] and 'M=604' in out['warnings'][0]
    assert 'vllm_server_gpu_memory_utilization' in out['warnings'][0]


def test_decide_keeps_a_fitting_default_and_never_raises_a_user_value():
    mamba = {'mamba_cache_blocks': 604, 'source': 'predicted'}
    assert mamba_clamp.decide_max_num_seqs('h', None, mamba, 256)['value'] is None
    assert mamba_clamp.decide_max_num_seqs('h', 8, mamba, 1024)['value'] == 8


def test_decide_user_value_above_known_m_is_an_error_above_predicted_a_warning():
    known = mamba_clamp.decide_max_num_seqs('h200', 1000, {'mamba_cache_blocks': 604, 'source': 'cached'}, 1024)
    assert known['errors'] and 'vllm_server_max_num_seqs=1000' in known['errors'][0] and 'h200' in known['errors'][0]
    guess = mamba_clamp.decide_max_num_seqs('h200', 1000, {'mamba_cache_blocks': 556, 'source': 'predicted'}, 1024)
    assert not guess['errors'] and guess['warnings'] and guess['value'] == 1000


def test_decide_ignores_a_predicted_m_with_enforce_eager_and_nothing_without_m():
    predicted = {'mamba_cache_blocks': 4, 'source': 'predicted'}
    assert mamba_clamp.decide_max_num_seqs('h', None, predicted, 1024, full_cudagraphs=False)['value'] is None
    assert mamba_clamp.decide_max_num_seqs('h', None, None, 1024)['value'] is None


def test_decide_applies_an_m_vllm_reported_whatever_the_mode():
    """A refusal is vLLM's own word: the vLLM that refused checks M, so the re-plan lowers the value."""
    for source in ('refusal', 'cached'):
        decision = mamba_clamp.decide_max_num_seqs('h', None, {'mamba_cache_blocks': 6, 'source': source}, 128,
                                                   full_cudagraphs=False)
        assert decision['value'] == 6 and decision['clamped'] and decision['source'] == source


def test_cache_key_changes_with_each_input():
    base = ('fp', 0.6, 16384, 'auto', 'auto', 'auto')
    key = mamba_clamp.cache_key(*base)
    assert key == mamba_clamp.cache_key(*base)
    for i, other in enumerate(('fp2', 0.5, 8192, 'fp8', 'float32', 'float32')):
        changed = list(base)
        changed[i] = other
        assert mamba_clamp.cache_key(*changed) != key
    # the probe cache's M records, {key: record}
    assert mamba_clamp.cached_blocks({key: {'mamba_cache_blocks': 604}}, key) == 604
    assert mamba_clamp.cached_blocks({'x': {'mamba_cache_blocks': 604}}, key) is None
    for broken in ({key: {'mamba_cache_blocks': True}}, {key: {'mamba_cache_blocks': -1}}, {key: 604}, None, 'text'):
        assert mamba_clamp.cached_blocks(broken, key) is None


def _plan(big, **overrides):
    cfg, pred = big
    prediction = dict(pred, mamba=mamba_clamp.predict_mamba_blocks(cfg, pred, H200_MIB, overrides.pop('util', 0.6)))
    settings = {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_device': 'cuda'}
    known = overrides.pop('mamba_blocks', None)
    settings.update(overrides)
    return host_plan.plan_host('h200', settings, n=784, n_kind='probed', prediction=prediction, mamba_blocks=known)


def _flag(argv, name):
    argv = [str(a) for a in argv]
    return argv[argv.index(name) + 1] if name in argv else None


def test_plan_clamps_the_unit_with_the_prediction(big):
    plan = _plan(big)
    m = plan['derived']['mamba']['mamba_cache_blocks']
    assert not plan['errors']
    assert _flag(plan['vllm']['argv'], '--max-num-seqs') == str(m)
    assert plan['summary']['max_num_seqs'] == m and plan['summary']['mamba_source'] == 'predicted'
    assert any('lowered' in w and 'h200' in w for w in plan['warnings'])


def test_plan_reported_m_wins_and_a_larger_user_value_fails_before_any_change(big):
    refusal = {'mamba_cache_blocks': 604, 'source': 'refusal'}
    plan = _plan(big, mamba_blocks=refusal)
    assert _flag(plan['vllm']['argv'], '--max-num-seqs') == '604'
    plan = _plan(big, mamba_blocks=refusal, vllm_server_max_num_seqs=700)
    assert any('vllm_server_max_num_seqs=700' in e for e in plan['errors'])
    plan = _plan(big, mamba_blocks=refusal, vllm_server_max_num_seqs=256)
    assert _flag(plan['vllm']['argv'], '--max-num-seqs') == '256' and not plan['errors']


def test_plan_leaves_eager_and_cpu_hosts_alone(big):
    assert _flag(_plan(big, vllm_server_enforce_eager=True)['vllm']['argv'], '--max-num-seqs') is None
    cpu = _plan(big, vllm_server_device='cpu')
    assert _flag(cpu['vllm']['argv'], '--max-num-seqs') is None and cpu['derived']['mamba'] is None


def test_plan_lowers_to_a_reported_m_on_eager_and_cpu_hosts(big):
    refusal = {'mamba_cache_blocks': 6, 'source': 'refusal'}
    cpu = _plan(big, vllm_server_device='cpu', vllm_server_enforce_eager=True, vllm_server_kv_connector=False,
                mamba_blocks=refusal)
    assert _flag(cpu['vllm']['argv'], '--max-num-seqs') == '6' and not cpu['errors']
    assert cpu['summary']['mamba_cache_blocks'] == 6 and cpu['summary']['mamba_source'] == 'refusal'
    assert any('lowered from vLLM\'s default 128' in w for w in cpu['warnings'])


def test_rescale_keeps_a_prediction_that_names_only_its_problem():
    """No GPU memory known: the prediction carries its problem and no M; the probed N changes nothing."""
    unknown = {'mamba_cache_blocks': None, 'source': 'predicted',
               'problem': 'no gpu facts and vllm_server_gpu_architecture names no GPU of the table'}
    assert mamba_clamp.rescale(unknown, 560) == unknown
