# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/fleet_rules.py."""

from __future__ import annotations

import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import fleet_rules as rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.fleet_rules import FleetRuleError

HOST = 'gpu-03'
GOOD = {'vllm_server_model': 'Qwen/Qwen3.6-27B'}


def settings(**overrides):
    merged = dict(GOOD)
    merged.update(overrides)
    return merged


def only(errors, variable):
    """The messages that name ``variable=``."""
    return [error for error in errors if '%s=' % variable in error]


def assert_message(message, *parts):
    assert message.startswith('host %s: ' % HOST), message
    assert '; ' in message, message
    for part in parts:
        assert part in message, (part, message)


# ----------------------------------------------------------------- message format and errors

def test_message_format():
    assert rules.msg('h1', 'var', 12, 'is bad', 'use 3') == 'host h1: var=12 is bad; use 3'
    assert rules.msg('h1', 'flag', False, 'is off', 'use true') == 'host h1: flag=false is off; use true'
    assert rules.msg('h1', 'x', None, 'is unset', 'set it') == 'host h1: x=null is unset; set it'
    assert rules.msg('', 'x', '', 'is empty', 'set it') == 'host (unnamed): x="" is empty; set it'


def test_fleet_rule_error_keeps_every_message():
    exc = FleetRuleError(['a', 'b'])
    assert isinstance(exc, ValueError)
    assert exc.errors == ['a', 'b']
    assert str(exc) == 'a\nb'
    assert FleetRuleError('one').errors == ['one']


@pytest.mark.parametrize('value, expected', [
    (5, 5), ('5', 5), (' 12 ', 12), ('-3', -3), (4.0, 4), (4.5, None), (True, None), (None, None), ('x', None), ([1], None),
])
def test_as_int(value, expected):
    assert rules.as_int(value) == expected


def test_defaults_mirror_role_defaults():
    defaults = rules.DEFAULTS
    assert defaults['lmcache_server_port'] == 5555
    assert defaults['lmcache_server_http_port'] == 8080
    assert defaults['vllm_server_port'] == 8000
    assert defaults['lmcache_server_chunk_multiple'] == 1
    assert defaults['lmcache_server_separate_object_groups'] is True
    assert defaults['lmcache_server_eviction_policy'] == 'LRU'
    assert defaults['vllm_server_enable_prefix_caching'] is True
    assert defaults['vllm_server_mamba_cache_mode'] == 'align'
    assert defaults['vllm_server_kv_connector'] is True
    assert defaults['vllm_server_max_num_batched_tokens'] is None
    assert defaults['vllm_server_tensor_parallel_size'] == 1
    assert defaults['vllm_server_device'] == 'cuda'


# ----------------------------------------------------------------- chunk size

def test_chunk_size_is_n_times_multiple():
    assert rules.chunk_size(784) == 784
    assert rules.chunk_size(784, 2) == 1568
    assert rules.chunk_size(544, 3) == 1632


def test_check_chunk_size_example_message():
    assert rules.check_chunk_size('gpu-03', 784, 1000) == [
        'host gpu-03: lmcache_server_chunk_size=1000 is not a multiple of N=784; use 784 or 1568']


@pytest.mark.parametrize('value', [784, 1568, 784 * 5, '1568'])
def test_check_chunk_size_accepts_multiples(value):
    assert rules.check_chunk_size(HOST, 784, value) == []


def test_check_chunk_size_below_n_suggests_n():
    (error,) = rules.check_chunk_size(HOST, 784, 500)
    assert_message(error, 'lmcache_server_chunk_size=500', 'not a multiple of N=784', 'use 784')
    assert 'use 0' not in error


@pytest.mark.parametrize('value', [0, -784, 'abc'])
def test_check_chunk_size_rejects_non_positive(value):
    (error,) = rules.check_chunk_size(HOST, 784, value)
    assert_message(error, 'lmcache_server_chunk_size=%s' % value, 'not a positive multiple of N=784', 'use 784')


def test_default_chunk_size_non_hybrid():
    assert rules.default_chunk_size(16, hybrid=False) == 256
    assert rules.default_chunk_size(128, hybrid=False) == 256
    assert rules.default_chunk_size(544, hybrid=False) == 544
    assert rules.default_chunk_size(48, 2, hybrid=False) == 96
    assert rules.default_chunk_size(784, 2, hybrid=True) == 1568


# ----------------------------------------------------------------- max-num-batched-tokens

def test_default_max_num_batched_tokens_is_2n_minus_1():
    assert rules.default_max_num_batched_tokens(784) == 1567
    assert rules.default_max_num_batched_tokens(544) == 1087
    assert rules.default_max_num_batched_tokens(640) == 1279


def test_mnbt_none_is_default_and_valid():
    assert rules.check_max_num_batched_tokens(HOST, 784, None, True) == ([], [])


@pytest.mark.parametrize('value', [785, 1000, 1567])
def test_mnbt_inside_n_2n_is_clean(value):
    assert rules.check_max_num_batched_tokens(HOST, 784, value, True) == ([], [])
    assert rules.check_max_num_batched_tokens(HOST, 784, value, False) == ([], [])


def test_mnbt_below_n_is_error_suggesting_2n_minus_1():
    errors, warnings = rules.check_max_num_batched_tokens(HOST, 784, 783, True)
    assert warnings == []
    (error,) = errors
    assert_message(error, 'vllm_server_max_num_batched_tokens=783', 'below N=784', 'use 1567 (2N-1)')


def test_mnbt_equal_n_warns_about_serialised_prefill():
    errors, warnings = rules.check_max_num_batched_tokens(HOST, 784, 784, True)
    assert errors == []
    (warning,) = warnings
    assert_message(warning, 'vllm_server_max_num_batched_tokens=784', 'serialises prefill', '7x slower', 'use 1567 (2N-1)')


def test_mnbt_2n_with_separate_groups_warns_step_alignment():
    errors, warnings = rules.check_max_num_batched_tokens(HOST, 784, 1568, True)
    assert errors == []
    (warning,) = warnings
    assert_message(warning, 'vllm_server_max_num_batched_tokens=1568', '>= 2N=1568', 'step boundaries', 'use 1567 (2N-1)')


def test_mnbt_2n_without_separate_groups_is_error():
    errors, warnings = rules.check_max_num_batched_tokens(HOST, 784, 4096, False)
    assert warnings == []
    (error,) = errors
    assert_message(error, 'vllm_server_max_num_batched_tokens=4096', '>= 2N=1568', 'separate object groups',
                   'use 1567 (2N-1)', 'lmcache_server_separate_object_groups=true')


@pytest.mark.parametrize('value', [0, -1, 'lots'])
def test_mnbt_not_positive(value):
    errors, _warnings = rules.check_max_num_batched_tokens(HOST, 784, value, True)
    (error,) = errors
    assert_message(error, 'vllm_server_max_num_batched_tokens=%s' % value, 'not a positive integer', 'use 1567')


# ----------------------------------------------------------------- mamba cache mode

def test_mamba_align_with_prefix_caching_is_valid():
    assert rules.check_mamba_cache_mode(HOST, 'align', True) == []


def test_mamba_all_is_rejected_for_gdn():
    (error,) = rules.check_mamba_cache_mode(HOST, 'all', True)
    assert_message(error, 'vllm_server_mamba_cache_mode=all', 'GDN', 'use align')


def test_mamba_none_is_rejected():
    (error,) = rules.check_mamba_cache_mode(HOST, 'none', True)
    assert_message(error, 'vllm_server_mamba_cache_mode=none', 'use align')


def test_prefix_caching_off_is_rejected():
    (error,) = rules.check_mamba_cache_mode(HOST, 'align', False)
    assert_message(error, 'vllm_server_enable_prefix_caching=false', 'prefix caching off', 'use true')


# ----------------------------------------------------------------- kv-transfer-config

def test_kv_transfer_config_shape():
    assert rules.kv_transfer_config('127.0.0.1', 5555) == {
        'kv_connector': 'LMCacheMPConnector',
        'kv_role': 'kv_both',
        'kv_connector_module_path': 'lmcache.integration.vllm.lmcache_mp_connector',
        'kv_connector_extra_config': {'lmcache.mp.host': 'tcp://127.0.0.1', 'lmcache.mp.port': 5555},
    }


def test_kv_transfer_config_optional_keys_and_json():
    config = rules.kv_transfer_config('10.0.0.5', '6555', transfer_mode='lmcache_driven', mq_timeout=10)
    extra = config['kv_connector_extra_config']
    assert extra == {'lmcache.mp.host': 'tcp://10.0.0.5', 'lmcache.mp.port': 6555,
                     'lmcache.mp.mp_transfer_mode': 'lmcache_driven', 'lmcache.mp.mq_timeout': 10}
    assert json.loads(json.dumps(config)) == config
    assert rules.kv_transfer_config('h', 1, mq_timeout='2.5')['kv_connector_extra_config']['lmcache.mp.mq_timeout'] == 2.5


@pytest.mark.parametrize('bind, url', [('0.0.0.0', 'tcp://127.0.0.1'), ('::', 'tcp://127.0.0.1'),
                                       ('tcp://cache.example', 'tcp://cache.example'), ('localhost', 'tcp://localhost')])
def test_kv_transfer_config_host(bind, url):
    assert rules.kv_transfer_config(bind, 5555)['kv_connector_extra_config']['lmcache.mp.host'] == url


# ----------------------------------------------------------------- transfer modes

@pytest.mark.parametrize('server, connector, device', [
    ('auto', None, 'cuda'), ('auto', None, 'cpu'), ('auto', 'engine_driven', 'cuda'),
    ('lmcache_driven', None, 'cuda'), ('lmcache_driven', 'lmcache_driven', 'cpu'), ('lmcache_driven', 'auto', 'cuda'),
    ('engine_driven', 'engine_driven', 'cuda'), ('engine_driven', None, 'cpu'),
])
def test_transfer_modes_that_agree(server, connector, device):
    assert rules.check_transfer_modes(HOST, server, connector, device) == []


def test_transfer_mode_trap_cpu_default_connector_vs_lmcache_driven_server():
    (error,) = rules.check_transfer_modes(HOST, 'lmcache_driven', None, 'cpu')
    assert_message(error, 'vllm_server_lmcache_transfer_mode=null', 'engine_driven on cpu',
                   'lmcache_server_supported_transfer_mode=lmcache_driven',
                   'set vllm_server_lmcache_transfer_mode=lmcache_driven or lmcache_server_supported_transfer_mode=auto')


@pytest.mark.parametrize('server, connector, device', [
    ('engine_driven', None, 'cuda'), ('engine_driven', 'lmcache_driven', 'cpu'), ('lmcache_driven', 'engine_driven', 'cuda'),
])
def test_transfer_modes_that_disagree(server, connector, device):
    (error,) = rules.check_transfer_modes(HOST, server, connector, device)
    assert_message(error, 'vllm_server_lmcache_transfer_mode=', 'lmcache_server_supported_transfer_mode=%s' % server)


def test_transfer_mode_unknown_values():
    errors = rules.check_transfer_modes(HOST, 'fast', 'turbo', 'cuda')
    assert len(errors) == 2
    assert_message(only(errors, 'lmcache_server_supported_transfer_mode')[0], '=fast', 'lmcache_driven, engine_driven, auto')
    assert_message(only(errors, 'vllm_server_lmcache_transfer_mode')[0], '=turbo', 'lmcache_driven or engine_driven')


def test_resolve_connector_transfer_mode():
    assert rules.resolve_connector_transfer_mode(None, 'cpu') == 'engine_driven'
    assert rules.resolve_connector_transfer_mode('auto', 'cuda') == 'lmcache_driven'
    assert rules.resolve_connector_transfer_mode('engine_driven', 'cuda') == 'engine_driven'


# ----------------------------------------------------------------- validate_host

def test_validate_host_defaults_are_valid():
    assert rules.validate_host(HOST, GOOD) == []


def test_validate_host_cpu_dense_with_connector_is_valid():
    assert rules.validate_host(HOST, settings(vllm_server_device='cpu', hybrid=False)) == []


def test_validate_host_cpu_hybrid_without_connector_is_valid():
    assert rules.validate_host(HOST, settings(vllm_server_device='cpu', vllm_server_kv_connector=False)) == []


BAD_INPUTS = [
    ({'lmcache_server_eviction_policy': 'FIFO'}, 'lmcache_server_eviction_policy=FIFO', 'LRU, ARC, IsolatedLRU, noop'),
    ({'lmcache_server_eviction_policy': 'lru'}, 'lmcache_server_eviction_policy=lru', 'use LRU'),
    ({'lmcache_server_l1_size_gb': 0}, 'lmcache_server_l1_size_gb=0', 'number > 0'),
    ({'lmcache_server_l1_size_gb': 'big'}, 'lmcache_server_l1_size_gb=big', 'number > 0'),
    ({'lmcache_server_port': 70000}, 'lmcache_server_port=70000', '1..65535'),
    ({'lmcache_server_http_port': 0}, 'lmcache_server_http_port=0', '1..65535'),
    ({'vllm_server_port': 'http'}, 'vllm_server_port=http', '1..65535'),
    ({'vllm_server_port': True}, 'vllm_server_port=true', '1..65535'),
    ({'lmcache_server_http_port': 5555}, 'lmcache_server_http_port=5555', 'already used by lmcache_server_port'),
    ({'vllm_server_port': 8080}, 'vllm_server_port=8080', 'already used by lmcache_server_http_port'),
    ({'vllm_server_model': ''}, 'vllm_server_model=""', 'is empty'),
    ({'vllm_server_model': None}, 'vllm_server_model=null', 'is empty'),
    ({'vllm_server_tensor_parallel_size': 0}, 'vllm_server_tensor_parallel_size=0', 'integer >= 1'),
    ({'vllm_server_tensor_parallel_size': 4, 'vllm_server_gpus': [0, 1, 2]}, 'vllm_server_tensor_parallel_size=4',
     'TP=4 needs 4 GPUs, vllm_server_gpus lists 3'),
    ({'vllm_server_tensor_parallel_size': 2, 'vllm_server_gpus': '0,1,2,3'}, 'vllm_server_tensor_parallel_size=2',
     'TP=2 needs 2 GPUs, vllm_server_gpus lists 4'),
    ({'lmcache_server_chunk_multiple': 0}, 'lmcache_server_chunk_multiple=0', 'integer >= 1'),
    ({'lmcache_server_chunk_multiple': 1.5}, 'lmcache_server_chunk_multiple=1.5', 'integer >= 1'),
    ({'lmcache_server_chunk_size': -5}, 'lmcache_server_chunk_size=-5', 'multiple of N'),
    ({'vllm_server_speculative_config': 'mtp'}, 'vllm_server_speculative_config=mtp', 'not a dictionary'),
    ({'vllm_server_speculative_config': {'num_speculative_tokens': -1}}, 'vllm_server_speculative_config=', 'num_speculative_tokens'),
    ({'vllm_server_device': 'tpu'}, 'vllm_server_device=tpu', 'use cuda or cpu'),
    ({'vllm_server_max_num_batched_tokens': 0}, 'vllm_server_max_num_batched_tokens=0', 'integer >= N'),
    ({'vllm_server_lmcache_mq_timeout': 0}, 'vllm_server_lmcache_mq_timeout=0', 'positive number of seconds'),
    ({'vllm_server_mamba_cache_mode': 'all'}, 'vllm_server_mamba_cache_mode=all', 'use align'),
    ({'vllm_server_enable_prefix_caching': False}, 'vllm_server_enable_prefix_caching=false', 'use true'),
    ({'lmcache_server_separate_object_groups': False}, 'lmcache_server_separate_object_groups=false', 'use true'),
    ({'lmcache_server_max_gpu_workers': 0}, 'lmcache_server_max_gpu_workers=0', 'tensor parallel size'),
    ({'vllm_server_kv_connector': 'maybe'}, 'vllm_server_kv_connector=maybe', 'use true or false'),
    ({'vllm_server_kv_connector': False}, 'vllm_server_kv_connector=false', 'use true'),
    ({'vllm_server_device': 'cpu'}, 'vllm_server_kv_connector=true',
     'engine-driven transfer does not support multiple KV transfer groups now'),
    ({'lmcache_server_supported_transfer_mode': 'engine_driven'}, 'vllm_server_lmcache_transfer_mode=null',
     'lmcache_server_supported_transfer_mode=engine_driven'),
]


@pytest.mark.parametrize('overrides, head, fix', BAD_INPUTS, ids=[item[1] for item in BAD_INPUTS])
def test_validate_host_bad_inputs(overrides, head, fix):
    errors = rules.validate_host(HOST, settings(**overrides))
    matching = [error for error in errors if head in error]
    assert len(matching) == 1, errors
    message = matching[0]
    assert_message(message, head)
    assert fix in message.split('; ', 1)[1] or fix in message, message


def test_validate_host_reports_every_error():
    errors = rules.validate_host(HOST, {'vllm_server_model': '', 'lmcache_server_l1_size_gb': -1,
                                        'lmcache_server_eviction_policy': 'MRU', 'vllm_server_port': 5555})
    assert len(errors) == 4
    for variable in ('vllm_server_model', 'lmcache_server_l1_size_gb', 'lmcache_server_eviction_policy', 'vllm_server_port'):
        assert len(only(errors, variable)) == 1


def test_validate_host_string_values_from_extra_vars():
    assert rules.validate_host(HOST, settings(vllm_server_port='8001', lmcache_server_l1_size_gb='2.5',
                                              vllm_server_tensor_parallel_size='2', vllm_server_gpus='0,1')) == []


def test_validate_host_tp_equal_to_gpu_count():
    assert rules.validate_host(HOST, settings(vllm_server_tensor_parallel_size=4, vllm_server_gpus=[0, 1, 2, 3])) == []


def test_validate_host_cpu_hybrid_connector_lmcache_driven_reason():
    errors = rules.validate_host(HOST, settings(vllm_server_device='cpu', vllm_server_lmcache_transfer_mode='lmcache_driven'))
    (error,) = only(errors, 'vllm_server_kv_connector')
    assert_message(error, 'CPU host serving a hybrid model', 'migrate_to_shm_and_wrap requires a contiguous tensor',
                   'no CPU path for hybrid KV layouts', 'vllm_server_kv_connector=false')


def test_validate_host_non_hybrid_skips_mamba_and_group_rules():
    assert rules.validate_host(HOST, settings(hybrid=False, vllm_server_mamba_cache_mode='none',
                                              vllm_server_enable_prefix_caching=False,
                                              lmcache_server_separate_object_groups=False,
                                              vllm_server_kv_connector=False)) == []


def test_is_hybrid_from_probe_outcome():
    assert rules.is_hybrid({}) is True
    assert rules.is_hybrid({'hybrid': None, 'vllm_block_size_probe': {'outcome': 'not_hybrid'}}) is False
    assert rules.is_hybrid({'vllm_block_size_probe': {'outcome': 'found'}}) is True
    assert rules.is_hybrid({'hybrid': 'false'}) is False


# ----------------------------------------------------------------- validate_with_n and derive

def test_validate_with_n_bad_n():
    errors, warnings = rules.validate_with_n(HOST, 0, GOOD)
    (error,) = errors
    assert warnings == []
    assert_message(error, 'vllm_block_size=0', 'positive integer')


def test_validate_with_n_chunk_and_mnbt():
    errors, warnings = rules.validate_with_n(HOST, 784, settings(lmcache_server_chunk_size=1000,
                                                                 vllm_server_max_num_batched_tokens=784))
    assert errors == ['host gpu-03: lmcache_server_chunk_size=1000 is not a multiple of N=784; use 784 or 1568']
    assert len(warnings) == 1 and 'serialises prefill' in warnings[0]


def test_derive_hybrid_defaults():
    result = rules.derive(HOST, 784, GOOD)
    assert result == {
        'block_size': 784,
        'hybrid': True,
        'chunk_size': 784,
        'max_num_batched_tokens': 1567,
        'separate_object_groups': True,
        'mamba_cache_mode': 'align',
        'enable_prefix_caching': True,
        'kv_transfer_config': rules.kv_transfer_config('127.0.0.1', 5555),
        'warnings': [],
    }


def test_derive_chunk_multiple_and_explicit_values():
    result = rules.derive(HOST, 544, settings(lmcache_server_chunk_multiple=2, vllm_server_max_num_batched_tokens=800,
                                              lmcache_server_port=6555, vllm_server_lmcache_transfer_mode='lmcache_driven',
                                              vllm_server_lmcache_mq_timeout=10))
    assert result['chunk_size'] == 1088
    assert result['max_num_batched_tokens'] == 800
    assert result['kv_transfer_config']['kv_connector_extra_config'] == {
        'lmcache.mp.host': 'tcp://127.0.0.1', 'lmcache.mp.port': 6555,
        'lmcache.mp.mp_transfer_mode': 'lmcache_driven', 'lmcache.mp.mq_timeout': 10}
    assert result['warnings'] == []


def test_derive_explicit_chunk_size_wins():
    assert rules.derive(HOST, 784, settings(lmcache_server_chunk_size=2352, lmcache_server_chunk_multiple=2))['chunk_size'] == 2352


def test_derive_large_mnbt_warns():
    result = rules.derive(HOST, 784, settings(vllm_server_max_num_batched_tokens=8192))
    assert result['max_num_batched_tokens'] == 8192
    assert len(result['warnings']) == 1 and 'step boundaries' in result['warnings'][0]


def test_derive_speculative_with_connector_warns():
    result = rules.derive(HOST, 800, settings(vllm_server_speculative_config={'method': 'mtp', 'num_speculative_tokens': 1}))
    assert_message(result['warnings'][0], 'vllm_server_speculative_config=', 'speculative decoding')


def test_derive_cpu_hybrid_without_connector():
    result = rules.derive(HOST, 640, settings(vllm_server_device='cpu', vllm_server_kv_connector=False))
    assert result['kv_transfer_config'] is None
    assert result['chunk_size'] == 640
    assert result['max_num_batched_tokens'] == 1279


def test_derive_raises_with_all_errors():
    with pytest.raises(FleetRuleError) as info:
        rules.derive(HOST, 784, settings(lmcache_server_chunk_size=1000, vllm_server_max_num_batched_tokens=100,
                                         lmcache_server_eviction_policy='fifo'))
    errors = info.value.errors
    assert len(errors) == 3
    assert 'host gpu-03: lmcache_server_chunk_size=1000 is not a multiple of N=784; use 784 or 1568' in errors
    assert_message(only(errors, 'vllm_server_max_num_batched_tokens')[0], '=100', 'use 1567 (2N-1)')
    assert only(errors, 'lmcache_server_eviction_policy')
    assert str(info.value) == '\n'.join(errors)


def test_derive_hybrid_separate_groups_off_names_variable():
    with pytest.raises(FleetRuleError) as info:
        rules.derive(HOST, 784, settings(lmcache_server_separate_object_groups=False))
    (error,) = info.value.errors
    assert_message(error, 'lmcache_server_separate_object_groups=false', 'use true')


def test_derive_non_hybrid_cuda():
    result = rules.derive(HOST, 16, settings(hybrid=False))
    assert result['hybrid'] is False
    assert result['chunk_size'] == 256
    assert result['max_num_batched_tokens'] is None
    assert result['mamba_cache_mode'] is None
    assert result['kv_transfer_config']['kv_connector'] == 'LMCacheMPConnector'


def test_derive_non_hybrid_cpu_and_explicit_values():
    result = rules.derive(HOST, 128, settings(hybrid=False, vllm_server_device='cpu', vllm_server_max_num_batched_tokens=100,
                                              vllm_server_lmcache_transfer_mode='lmcache_driven',
                                              lmcache_server_supported_transfer_mode='lmcache_driven'))
    assert result['chunk_size'] == 256
    assert result['max_num_batched_tokens'] == 100
    assert result['warnings'] == []


def test_derive_non_hybrid_block_not_dividing_256():
    assert rules.derive(HOST, 96, settings(hybrid=False))['chunk_size'] == 96


def test_derive_non_hybrid_chunk_must_still_be_a_multiple():
    with pytest.raises(FleetRuleError) as info:
        rules.derive(HOST, 128, settings(hybrid=False, lmcache_server_chunk_size=200))
    assert info.value.errors == ['host gpu-03: lmcache_server_chunk_size=200 is not a multiple of N=128; use 128 or 256']


def test_derive_non_hybrid_cpu_transfer_trap():
    with pytest.raises(FleetRuleError) as info:
        rules.derive(HOST, 128, settings(hybrid=False, vllm_server_device='cpu',
                                         lmcache_server_supported_transfer_mode='lmcache_driven'))
    (error,) = info.value.errors
    assert_message(error, 'vllm_server_lmcache_transfer_mode=null', 'lmcache_server_supported_transfer_mode=lmcache_driven')


# --------------------------------------------------------------------------- shared-memory user (CPU, lmcache_driven)

CPU_LMCACHE_DRIVEN = {'vllm_server_model': '/srv/models/qwen3-dense-tiny', 'hybrid': False, 'vllm_server_device': 'cpu',
                      'vllm_server_lmcache_transfer_mode': 'lmcache_driven', 'lmcache_server_user': 'lmcache',
                      'vllm_server_user': 'vllm'}
SHM_ERROR = ('host gpu-03: lmcache_server_user=lmcache differs from vllm_server_user=vllm, but lmcache_driven transfer on CPU '
             'shares the KV cache through a shared-memory segment that only vLLM\'s user may open; set lmcache_server_user '
             'and lmcache_server_group to vLLM\'s user and group, or use engine_driven transfer '
             '(vllm_server_lmcache_transfer_mode=null and lmcache_server_supported_transfer_mode=auto)')


def test_shared_memory_user_two_users_refused():
    assert rules.check_shared_memory_user(HOST, CPU_LMCACHE_DRIVEN) == [SHM_ERROR]
    assert rules.validate_host(HOST, CPU_LMCACHE_DRIVEN) == [SHM_ERROR]


@pytest.mark.parametrize('overrides', [
    {'lmcache_server_user': 'vllm'},                      # one user for both services
    {'vllm_server_lmcache_transfer_mode': None},          # auto = engine_driven on CPU
    {'vllm_server_lmcache_transfer_mode': 'engine_driven'},
    {'vllm_server_device': 'cuda'},                       # GPU: no shared-memory segment
    {'vllm_server_kv_connector': False},                  # no connector, no transfer
    {'lmcache_server_user': None},                        # one role's view only
    {'vllm_server_user': ''},
], ids=['same-user', 'auto', 'engine-driven', 'cuda', 'no-connector', 'no-lmcache-user', 'no-vllm-user'])
def test_shared_memory_user_allowed(overrides):
    merged = dict(CPU_LMCACHE_DRIVEN, **overrides)
    assert rules.check_shared_memory_user(HOST, merged) == []


def test_shared_memory_user_connector_given_as_string():
    assert rules.check_shared_memory_user(HOST, dict(CPU_LMCACHE_DRIVEN, vllm_server_kv_connector='yes')) == [SHM_ERROR]
    assert rules.check_shared_memory_user(HOST, dict(CPU_LMCACHE_DRIVEN, vllm_server_kv_connector='false')) == []


def test_check_host_static_and_with_n():
    static = rules.check_host(HOST, settings(lmcache_server_chunk_size=1000, vllm_server_port=70000))
    assert only(static['errors'], 'vllm_server_port') and not only(static['errors'], 'lmcache_server_chunk_size')
    with_n = rules.check_host(HOST, settings(lmcache_server_chunk_size=1000, vllm_server_port=70000), 784)
    assert only(with_n['errors'], 'lmcache_server_chunk_size') == [
        'host gpu-03: lmcache_server_chunk_size=1000 is not a multiple of N=784; use 784 or 1568']
    assert rules.check_host(HOST, settings(), 784) == {'errors': [], 'warnings': []}
    assert rules.check_host(HOST, settings(vllm_server_max_num_batched_tokens=784), 784)['warnings']
    assert rules.check_host(HOST, CPU_LMCACHE_DRIVEN, 128)['errors'] == [SHM_ERROR]
