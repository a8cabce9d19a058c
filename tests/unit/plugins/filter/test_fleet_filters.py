# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/filter/fleet.py and its documentation files."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter import fleet
from ansible_collections.lmcache_vllm.fleet.plugins.filter.fleet import FilterModule

UNIT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO_ROOT = os.path.dirname(os.path.dirname(UNIT_DIR))
FILTER_DIR = os.path.join(REPO_ROOT, 'plugins', 'filter')
FIXTURES = os.path.join(UNIT_DIR, 'fixtures', 'models')

FILTERS = FilterModule().filters()
NAMES = ['lmcache_chunk_size', 'vllm_max_num_batched_tokens', 'lmcache_kv_transfer_config', 'venvs_to_remove',
         'host_plan_public', 'predicted_block_size', 'same_version']
GOOD = {'vllm_server_model': 'Qwen/Qwen3.6-27B'}


def load(name):
    with open(os.path.join(FIXTURES, name, 'config.json'), encoding='utf-8') as handle:
        return json.load(handle)


def test_filter_names():
    assert sorted(FILTERS) == sorted(NAMES)


@pytest.mark.parametrize('name', NAMES)
def test_every_filter_has_documentation(name):
    path = os.path.join(FILTER_DIR, '%s.yml' % name)
    with open(path, encoding='utf-8') as handle:
        doc = yaml.safe_load(handle)
    assert set(doc) == {'DOCUMENTATION', 'EXAMPLES', 'RETURN'}
    documentation = doc['DOCUMENTATION']
    assert documentation['name'] == name
    assert documentation['short_description']
    assert '_input' in documentation['options']
    assert documentation['positional'].split(',')[0].strip() == '_input'
    assert 'lmcache_vllm.fleet.%s' % name in doc['EXAMPLES']
    assert '_value' in doc['RETURN']


# ----------------------------------------------------------------- lmcache_chunk_size

def test_lmcache_chunk_size():
    chunk = FILTERS['lmcache_chunk_size']
    assert chunk(784) == 784
    assert chunk(784, 2) == 1568
    assert chunk('544', '3') == 1632


@pytest.mark.parametrize('n, multiple, text', [(0, 1, 'N=0'), (784, 0, 'lmcache_server_chunk_multiple=0'), ('x', 1, 'N=x')])
def test_lmcache_chunk_size_errors(n, multiple, text):
    with pytest.raises(AnsibleFilterError, match=text):
        FILTERS['lmcache_chunk_size'](n, multiple)


# ----------------------------------------------------------------- vllm_max_num_batched_tokens

def test_mnbt_default_is_2n_minus_1():
    assert FILTERS['vllm_max_num_batched_tokens'](784) == 1567
    assert FILTERS['vllm_max_num_batched_tokens'](544, None) == 1087
    assert FILTERS['vllm_max_num_batched_tokens'](544, '') == 1087


def test_mnbt_in_range_returned():
    assert FILTERS['vllm_max_num_batched_tokens'](784, 1000) == 1000
    assert FILTERS['vllm_max_num_batched_tokens'](784, '1200', host='gpu-03') == 1200


def test_mnbt_below_n_fails_with_rule_message():
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS['vllm_max_num_batched_tokens'](784, 512, True, 'gpu-03')
    message = str(info.value)
    assert 'host gpu-03: vllm_server_max_num_batched_tokens=512 is below N=784' in message
    assert 'use 1567 (2N-1)' in message


def test_mnbt_2n_without_groups_fails():
    with pytest.raises(AnsibleFilterError, match='lmcache_server_separate_object_groups=true'):
        FILTERS['vllm_max_num_batched_tokens'](784, 1568, False, 'gpu-03')


def test_mnbt_warnings_are_displayed(monkeypatch):
    shown = []
    monkeypatch.setattr(fleet.display, 'warning', lambda text, *args, **kwargs: shown.append(text))
    assert FILTERS['vllm_max_num_batched_tokens'](784, 784, True, 'gpu-03') == 784
    assert FILTERS['vllm_max_num_batched_tokens'](784, 4096, True, 'gpu-03') == 4096
    assert len(shown) == 2
    assert 'serialises prefill' in shown[0]
    assert 'step boundaries' in shown[1]


# ----------------------------------------------------------------- lmcache_kv_transfer_config

def test_kv_transfer_config_filter_shape():
    config = FILTERS['lmcache_kv_transfer_config']('127.0.0.1', 5555)
    assert config == {
        'kv_connector': 'LMCacheMPConnector',
        'kv_role': 'kv_both',
        'kv_connector_module_path': 'lmcache.integration.vllm.lmcache_mp_connector',
        'kv_connector_extra_config': {'lmcache.mp.host': 'tcp://127.0.0.1', 'lmcache.mp.port': 5555},
    }


def test_kv_transfer_config_filter_options():
    config = FILTERS['lmcache_kv_transfer_config']('0.0.0.0', '6555', 'engine_driven', 10)
    assert config['kv_connector_extra_config'] == {
        'lmcache.mp.host': 'tcp://127.0.0.1', 'lmcache.mp.port': 6555,
        'lmcache.mp.mp_transfer_mode': 'engine_driven', 'lmcache.mp.mq_timeout': 10}


@pytest.mark.parametrize('args, text', [
    (('127.0.0.1', 0), 'lmcache_server_port=0'),
    (('127.0.0.1', 'zmq'), 'lmcache_server_port=zmq'),
    (('127.0.0.1', 5555, 'fastest'), 'vllm_server_lmcache_transfer_mode=fastest'),
    (('127.0.0.1', 5555, None, -1), 'vllm_server_lmcache_mq_timeout=-1'),
])
def test_kv_transfer_config_filter_errors(args, text):
    with pytest.raises(AnsibleFilterError, match=text):
        FILTERS['lmcache_kv_transfer_config'](*args)


# ----------------------------------------------------------------- host_plan_public

def test_host_plan_public_hides_the_secrets():
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import plan_host
    plan = plan_host('gpu-03', dict(GOOD, vllm_server_api_key='sk-live-123', vllm_server_hf_token='hf_' + 'a' * 30,
                                    vllm_server_env={'HF_HUB_OFFLINE': '1'}), n=784, n_kind='probed')
    assert plan['vllm']['env_file']['VLLM_API_KEY'] == 'sk-live-123'
    public = FILTERS['host_plan_public'](plan)
    text = json.dumps(public)
    assert 'sk-live-123' not in text and 'hf_aaaa' not in text
    assert public['vllm']['env_file'] == {'VLLM_API_KEY': '<redacted>', 'HF_TOKEN': '<redacted>', 'HF_HUB_OFFLINE': '1'}
    assert public['vllm']['env_file_lines'] == ['VLLM_API_KEY="<redacted>"', 'HF_TOKEN="<redacted>"', 'HF_HUB_OFFLINE="1"']
    assert public['vllm']['argv'] == plan['vllm']['argv']
    with pytest.raises(AnsibleFilterError, match='host plan'):
        FILTERS['host_plan_public'](['x'])


# ----------------------------------------------------------------- predicted_block_size

def test_predicted_block_size_filter():
    small = load('qwen3.5-0.8b')
    large = load('qwen3.6-27b')
    predict = FILTERS['predicted_block_size']
    assert predict(small) == 544
    assert predict(small, platform='cpu') == 640
    assert predict(small, device='cpu', block_size=32) == 544
    assert predict(small, platform='cpu', dtype='float32') == 384
    assert predict(large) == 784
    assert predict(json.dumps(large), kv_cache_dtype='fp8') == 1568
    details = predict(large, details=True)
    assert details['block_size'] == 784 and details['padding_percent'] == 0.13


@pytest.mark.parametrize('config, options, text', [
    ({'architectures': ['FalconMambaForCausalLM']}, {}, 'model family FalconMambaForCausalLM is unknown'),
    ({'architectures': ['Qwen3NextForCausalLM']}, {}, 'num_key_value_heads'),
    ({'architectures': ['Qwen3ForCausalLM']}, {'platform': 'rocm'}, 'platform'),
    ({'architectures': ['Qwen3ForCausalLM']}, {'colour': 'red'}, 'colour'),
])
def test_predicted_block_size_filter_errors(config, options, text):
    with pytest.raises(AnsibleFilterError, match=text):
        FILTERS['predicted_block_size'](config, **options)


def test_same_version_compares_pep440_versions():
    same = FILTERS['same_version']
    assert same('0.5.6', '0.5.6') and same('0.5.6.0', '0.5.6') and same('2.13.0+CPU', '2.13.0+cpu')
    assert not same(None, '0.5.6') and not same('0.5.5', '0.5.6') and not same('0.32.0+cpu', '0.32.0')


def test_fleet_unreachable_summary_names_every_lost_host_and_the_limit():
    from ansible_collections.lmcache_vllm.fleet.plugins.filter.fleet_checks import fleet_unreachable_summary
    hostvars = {
        'gpu-01': {'__fleet_reach': {'ping': 'pong'}},
        'gpu-02': {'__fleet_reach': {'unreachable': True, 'msg': 'ssh: connect to host 10.0.0.2 port 22: timed out\n'}},
        'kv-01': {'__fleet_reach': {'failed': True, 'msg': 'Unable to execute ssh command line on a controller'}},
    }
    assert fleet_unreachable_summary(['gpu-01'], hostvars) == ''
    text = fleet_unreachable_summary(['gpu-01', 'gpu-02', 'kv-01'], hostvars)
    assert text.startswith('2 host(s) could not be reached, so nothing was changed on any host: '
                           'gpu-02 (ssh: connect to host 10.0.0.2 port 22: timed out); kv-01 (Unable to execute')
    assert text.endswith("--limit 'all:!gpu-02:!kv-01'")
    assert fleet_unreachable_summary(['gpu-02'], hostvars, limit='eu').endswith("--limit 'eu:!gpu-02'")
