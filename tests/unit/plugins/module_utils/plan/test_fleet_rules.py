# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/plan/fleet_rules.py."""

from __future__ import annotations

import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules as rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_variables
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules import FleetRuleError

from rule_messages import HOST, assert_message, only


# ----------------------------------------------------------------- message format and errors

def test_message_format():
    assert plan_variables.msg('h1', 'var', 12, 'is bad', 'use 3') == 'host h1: var=12 is bad; use 3'
    assert plan_variables.msg('h1', 'flag', False, 'is off', 'use true') == 'host h1: flag=false is off; use true'
    assert plan_variables.msg('h1', 'x', None, 'is unset', 'set it') == 'host h1: x=null is unset; set it'
    assert plan_variables.msg('', 'x', '', 'is empty', 'set it') == 'host (unnamed): x="" is empty; set it'


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
    assert plan_variables.as_int(value) == expected


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
    assert_message(warning, 'vllm_server_max_num_batched_tokens=784', 'serialises prefill', 'about 3x slower under load on an H200', 'use 1567 (2N-1)')


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


@pytest.mark.parametrize('bind, url', [('0.0.0.0', 'tcp://127.0.0.1'), ('::', 'tcp://[::1]'), ('10.0.0.7', 'tcp://10.0.0.7'),
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


def test_lmcache_packages_add_what_a_release_imports_undeclared():
    assert rules.lmcache_packages('0.5.6') == ['lmcache==0.5.6']
    assert rules.lmcache_packages('0.5.5') == ['lmcache==0.5.5', 'openai']
    assert rules.lmcache_packages('0.5.3') == ['lmcache==0.5.3', 'openai']
