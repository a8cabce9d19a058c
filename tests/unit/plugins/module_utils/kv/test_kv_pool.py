# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/kv/kv_pool.py and the pool part of the host plan."""

from __future__ import annotations

import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool

PASSWORD = 'correct-horse-battery-staple'
STORE = {'kv_store_bind': '0.0.0.0', 'kv_store_allow_network': True, 'kv_store_password': PASSWORD,
         'ansible_host': '10.0.0.9'}
DENSE = {'vllm_server_model': '/srv/models/qwen3-tiny', 'vllm_server_device': 'cpu', 'vllm_server_hybrid': False,
         'lmcache_server_kv_pool': 'default'}


def plan(host, cfg, stores, n=16):
    return host_plan.plan_host(host, cfg, n=n, n_kind='probed' if n else None, probe={'outcome': 'not_hybrid'},
                               kv_stores=stores)


def test_pool_host_gets_the_valkey_adapter_through_its_environment_file():
    result = plan('a', DENSE, {'store-1': STORE})
    assert result['errors'] == []
    lm = result['lmcache']
    # The launcher runs LMCache with the adapter from the environment file: no JSON on the command line.
    assert lm['argv'][:3] == [lm['python'], lm['venv'] + '/bin/fleet-lmcache-l2', 'server']
    assert '--l2-adapter' not in lm['argv']
    adapter = json.loads(lm['env_file'][kv_pool.ADAPTER_ENV])
    # Crossed on purpose: LMCache 0.5.6 passes (username, password) to glide-sync's (password, username).
    assert adapter == {'type': 'valkey', 'startup_nodes': '10.0.0.9:6379', 'cluster_mode': False,
                       'username': PASSWORD, 'password': 'lmcache', 'key_prefix': result['kv_pool']['key_prefix'],
                       'shared': True, 'max_capacity_gb': 0,
                       'request_timeout': kv_pool.REQUEST_TIMEOUT_DEFAULT}
    # The password is nowhere but the environment file (0600): not in the unit, not in the redacted lines.
    assert PASSWORD not in '\n'.join(lm['unit_lines'])
    assert PASSWORD not in json.dumps(lm['env_file_lines_redacted'])
    assert PASSWORD not in json.dumps(host_plan.public_view(result))
    assert result['summary']['kv_store'] == '10.0.0.9:6379'


def test_the_adapter_json_is_what_lmcache_0_5_6_parses():
    adapter = kv_pool.adapter({'nodes': ['a:1', 'b:2', 'c:3'], 'cluster': True, 'username': 'u', 'password': 'p'},
                              'default.m.n16.c256.tp1.0123456789ab')
    # The keys and types LMCache's ValkeyL2AdapterConfig.from_dict reads (valkey_l2_adapter.py, 0.5.6).
    assert adapter['startup_nodes'] == 'a:1,b:2,c:3'
    assert adapter['cluster_mode'] is True
    assert '@' not in adapter['key_prefix']
    assert set(adapter) == {'type', 'startup_nodes', 'cluster_mode', 'username', 'password', 'key_prefix',
                            'shared', 'max_capacity_gb'}


@pytest.mark.parametrize('value, expected', [(0.25, 0.25), (5, 5.0), ('2.5', 2.5), (60, 60.0)])
def test_the_request_timeout_goes_into_the_adapter(value, expected):
    result = plan('a', dict(DENSE, lmcache_server_kv_request_timeout=value), {'store-1': STORE})
    assert result['errors'] == []
    adapter = json.loads(result['lmcache']['env_file'][kv_pool.ADAPTER_ENV])
    assert adapter['request_timeout'] == expected
    # the JSON LMCache reads: request_timeout is a float of seconds, > 0 (ValkeyL2AdapterConfig.from_dict)
    assert isinstance(adapter['request_timeout'], float)


@pytest.mark.parametrize('value', [0, -1, 61, 'soon', None, float('nan')])
def test_a_bad_request_timeout_is_refused_with_the_fix(value):
    result = plan('a', dict(DENSE, lmcache_server_kv_request_timeout=value), {'store-1': STORE})
    found = [e for e in result['errors'] if 'lmcache_server_kv_request_timeout' in e]
    assert len(found) == 1, result['errors']
    assert found[0].startswith('host a: lmcache_server_kv_request_timeout=')
    assert 'use seconds such as 1' in found[0]


def test_no_pool_means_no_adapter():
    cfg = dict(DENSE, lmcache_server_kv_pool=None)
    result = plan('a', cfg, None)
    assert result['lmcache']['argv'][0].endswith('/bin/lmcache')
    assert kv_pool.ADAPTER_ENV not in result['lmcache']['env_file']
    assert result['kv_pool'] is None


def test_the_adapter_waits_for_n():
    result = plan('a', DENSE, {'store-1': STORE}, n=None)
    assert result['kv_pool']['key_prefix'] is None
    assert kv_pool.ADAPTER_ENV not in result['lmcache']['env_file']


@pytest.mark.parametrize('change', [
    {'vllm_server_model': '/srv/models/other'},
    {'lmcache_server_chunk_size': 512},
    {'vllm_server_kv_cache_dtype': 'fp8'},
    {'vllm_server_mamba_ssm_cache_dtype': 'float32'},
    {'vllm_server_model_revision': 'abc123'},
    {'vllm_server_version': '0.31.0'},
    {'lmcache_server_version': '0.5.5'},
    {'vllm_server_extra_args': ['--attention-backend', 'TORCH_SDPA']},
    {'vllm_server_extra_args': ['--attention_backend=TORCH_SDPA']},
    {'vllm_server_extra_args': ['--kv-cache-dtype-skip-layers', '0']},
    {'vllm_server_speculative_config': {'method': 'mtp', 'num_speculative_tokens': 1}},
    {'vllm_server_extra_args': ['--hf-overrides', '{"head_dim": 64}']},
    {'vllm_server_gpu_architecture': 'sm90'},
])
def test_hosts_that_differ_get_different_prefixes(change):
    one = plan('a', DENSE, {'store-1': STORE})['kv_pool']
    two = plan('b', dict(DENSE, **change), {'store-1': STORE})['kv_pool']
    assert one['key_prefix'] != two['key_prefix']
    errors = kv_pool.check_pools([{'host': 'a', 'pool': 'default', 'inputs': one['inputs']},
                                  {'host': 'b', 'pool': 'default', 'inputs': two['inputs']}])
    assert len(errors) == 1 and errors[0].startswith('pool default: hosts a and b differ in ')


def test_hosts_that_agree_share_the_prefix_and_pass_the_pool_check():
    one = plan('a', DENSE, {'store-1': STORE})['kv_pool']
    two = plan('b', dict(DENSE, vllm_server_port=8001), {'store-1': STORE})['kv_pool']
    assert one['key_prefix'] == two['key_prefix']
    assert one['key_prefix'].startswith('default.qwen3-tiny.n16.c')
    assert kv_pool.check_pools([{'host': 'a', 'pool': 'default', 'inputs': one['inputs']},
                                {'host': 'b', 'pool': 'default', 'inputs': two['inputs']}]) == []


def test_the_pool_check_names_the_differing_inputs():
    errors = kv_pool.check_pools([
        {'host': 'a', 'pool': 'p', 'inputs': {'model': 'm', 'chunk_size': 256}},
        {'host': 'b', 'pool': 'p', 'inputs': {'model': 'm', 'chunk_size': 512}},
        {'host': 'c', 'pool': 'q', 'inputs': {'model': 'x', 'chunk_size': 1}}])
    assert errors == ["pool p: hosts a and b differ in chunk_size (256 vs 512), so they could never read each "
                      "other's pages; put them in different pools (lmcache_server_kv_pool) or give them the same "
                      "values"]


def test_a_pool_without_store_is_refused():
    result = plan('a', dict(DENSE, lmcache_server_kv_pool='chat'), {'store-1': STORE})
    assert result['errors'] == [
        'host a: lmcache_server_kv_pool=chat has no store: no host of group kv_stores lists it in kv_store_pools; '
        "add it to a store's kv_store_pools, or put the store host in group kv_stores "
        '(lmcache_server_kv_store_group)']


def test_a_loopback_store_on_another_host_is_refused():
    store = dict(STORE, kv_store_bind='127.0.0.1')
    errors = plan('a', DENSE, {'store-1': store})['errors']
    assert errors == ['host a: lmcache_server_kv_pool=default uses store store-1, which binds 127.0.0.1 (loopback) '
                      'and cannot be reached from a; set kv_store_bind (and kv_store_allow_network: true) on store-1, '
                      'or serve the pool from this host']
    assert plan('store-1', DENSE, {'store-1': store})['errors'] == []


def test_several_stores_need_cluster_mode_and_three_nodes():
    two = {'s1': STORE, 's2': dict(STORE, ansible_host='10.0.0.10')}
    assert 'not all set kv_store_cluster=true' in plan('a', DENSE, two)['errors'][0]
    clustered = dict((k, dict(v, kv_store_cluster=True)) for k, v in two.items())
    assert 'a cluster needs at least 3 primaries' in plan('a', DENSE, clustered)['errors'][0]
    clustered['s3'] = dict(STORE, ansible_host='10.0.0.11', kv_store_cluster=True)
    result = plan('a', DENSE, clustered)
    assert result['errors'] == []
    adapter = json.loads(result['lmcache']['env_file'][kv_pool.ADAPTER_ENV])
    assert adapter['cluster_mode'] is True
    assert adapter['startup_nodes'] == '10.0.0.9:6379,10.0.0.10:6379,10.0.0.11:6379'


def test_cluster_stores_must_share_the_password():
    stores = dict(('s%d' % i, dict(STORE, kv_store_cluster=True, ansible_host='10.0.0.%d' % i)) for i in range(3))
    stores['s2']['kv_store_password'] = 'another-password-of-16'
    assert 'differ in kv_store_password' in plan('a', DENSE, stores)['errors'][0]


def test_a_store_without_password_is_refused_without_showing_values():
    errors = plan('a', DENSE, {'store-1': dict(STORE, kv_store_password='')})['errors']
    assert errors == ['host a: lmcache_server_kv_pool=default uses store store-1, whose kv_store_password (value '
                      'hidden) is not set; set it from a vault']


def test_a_bad_pool_name_is_refused():
    errors = plan('a', dict(DENSE, lmcache_server_kv_pool='Bad Name'), {'store-1': STORE})['errors']
    assert errors[0].startswith("host a: lmcache_server_kv_pool='Bad Name' is not a pool name;") or \
        errors[0].startswith('host a: lmcache_server_kv_pool=Bad Name is not a pool name;')


def test_attention_backend_is_read_from_args_and_env():
    assert kv_pool.attention_backend(['--attention-backend=FLASH_ATTN'], {}) == 'FLASH_ATTN'
    assert kv_pool.attention_backend(['--attention-backend', 'TRITON_ATTN'], {}) == 'TRITON_ATTN'
    assert kv_pool.attention_backend([], {'VLLM_ATTENTION_BACKEND': 'FLASHINFER'}) == 'FLASHINFER'
    assert kv_pool.attention_backend([], {}) == 'auto'
    # any spelling vLLM's parser accepts (the generated table), as the other inputs of N
    assert kv_pool.attention_backend(['--attention_backend=FLASHINFER'], {}) == 'FLASHINFER'
    assert kv_pool.attention_backend(['--attention-back', 'FLASHINFER'], {}) == 'FLASHINFER'


def test_a_host_without_extra_inputs_of_n_keeps_its_key():
    """The key hashes extra_n_inputs only when a host sets one: the other hosts' pages stay readable."""
    inputs = {'model': 'm', 'block_size': 544, 'chunk_size': 544, 'tensor_parallel_size': 1}
    assert kv_pool.key_prefix('p', dict(inputs, extra_n_inputs={})) == kv_pool.key_prefix('p', inputs)
    assert kv_pool.key_prefix('p', dict(inputs, extra_n_inputs={'kv_cache_dtype_skip_layers': '0'})) \
        != kv_pool.key_prefix('p', inputs)


def test_adapter_json_for_given_inputs_is_the_plans():
    result = plan('a', DENSE, {'store-1': STORE})
    pool = result['kv_pool']
    text = kv_pool.adapter_json('default', ['10.0.0.9:6379'], 'lmcache', PASSWORD, pool['inputs'],
                                request_timeout=pool['request_timeout'])
    assert text == result['lmcache']['env_file'][kv_pool.ADAPTER_ENV]


def test_the_wheelhouse_holds_the_pinned_store_client():
    import pathlib
    script = pathlib.Path(__file__).parents[5] / 'scripts' / 'download-wheels.sh'
    assert '"%s"' % kv_pool.CLIENT_PACKAGE in script.read_text()
    # LMCache 0.5.6's worker pool needs >= 2.3.0 (memoryview SET, buffer GET).
    assert tuple(int(x) for x in kv_pool.CLIENT_VERSION.split('.')[:2]) >= (2, 3)


def test_store_variables_take_only_the_store_role_and_address():
    hosts = {'kv-1': {'kv_store_password': PASSWORD, 'ansible_host': '10.0.0.9', 'vllm_server_port': 1,
                      'other': 'x'}}
    assert kv_pool.store_variables(['kv-1'], hosts.get) == {
        'kv-1': {'ansible_host': '10.0.0.9', 'kv_store_password': PASSWORD}}
    assert kv_pool.store_variables(['kv-1'], hosts.get, lambda values: [str(v).upper() for v in values]) == {
        'kv-1': {'ansible_host': '10.0.0.9', 'kv_store_password': PASSWORD.upper()}}


def test_store_group_only_for_a_host_in_a_pool():
    assert kv_pool.store_group({'lmcache_server_kv_pool': None}) is None
    assert kv_pool.store_group({'lmcache_server_kv_pool': 'p'}) == 'kv_stores'
    assert kv_pool.store_group({'lmcache_server_kv_pool': 'p', 'lmcache_server_kv_store_group': 'g'}) == 'g'


def test_plans_errors_compare_the_pools_of_host_plans():
    one = plan('a', DENSE, {'store-1': STORE})
    other = plan('b', dict(DENSE, lmcache_server_chunk_size=512), {'store-1': STORE})
    assert kv_pool.plans_errors([one, one]) == []
    (error,) = kv_pool.plans_errors([one, other])
    assert error.startswith('pool default: hosts a and b differ in chunk_size (')
    # the plan shows the pool without the adapter JSON (it carries the password)
    assert 'adapter_json' not in one['kv_pool'] and PASSWORD not in json.dumps(one['kv_pool'])
    assert one['summary']['kv_pool'] == 'default' and one['summary']['kv_store'] == '10.0.0.9:6379'


def test_every_input_of_n_is_in_the_pool_key():
    """vllm_cli's table of the inputs of N: each is hashed as itself, as the resulting N (block_size, which a
    user's --block-size only raises) or as an optional input (speculative decoding as its draft tokens)."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli
    as_other = {'block_size': 'block_size', 'speculative_config': 'num_speculative_tokens'}
    keyed = set(kv_pool.PREFIX_INPUTS) | set(kv_pool.OPTIONAL_INPUTS)
    for name in vllm_cli.N_INPUT_NAMES:
        assert as_other.get(name, name) in keyed, name
    assert 'extra_n_inputs' in kv_pool.OPTIONAL_INPUTS
