# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An L2 pool never shares pages between hosts whose weights or cached values differ: every vLLM flag that can
change them (--quantization, --hf-overrides, --load-format, the model's revision, a flag the table's vLLM does not
know on a host that pins another release) splits the key prefix and is refused between members of one pool; LoRA
adapters, which LMCache's key does not hold, are refused in a pool."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool

STORE = {'kv_store_bind': '0.0.0.0', 'kv_store_allow_network': True, 'kv_store_password': 'correct-horse-battery-staple',
         'ansible_host': '10.0.0.9'}
DENSE = {'vllm_server_model': '/srv/models/qwen3-tiny', 'vllm_server_device': 'cpu', 'vllm_server_hybrid': False,
         'lmcache_server_kv_pool': 'default'}


def plan(host, **cfg):
    return host_plan.plan_host(host, dict(DENSE, **cfg), n=16, n_kind='probed', probe={'outcome': 'not_hybrid'},
                               kv_stores={'store-1': STORE})


@pytest.mark.parametrize('args', [['--quantization', 'fp8'], ['--hf-overrides', '{"rope_theta": 20000}']])
def test_a_flag_that_changes_the_weights_splits_the_pool(args):
    base, other = plan('a'), plan('b', vllm_server_extra_args=args)
    assert other['errors'] == [], other['errors']
    assert base['kv_pool']['key_prefix'] != other['kv_pool']['key_prefix']
    errors = kv_pool.plans_errors([base, other])
    assert errors and 'pool default: hosts a and b differ in vllm_args' in errors[0], errors


def test_a_flag_of_another_release_splits_the_pool():
    """A host that pins another vLLM release may pass a flag the collection's table does not know (a warning,
    not an error): the flag still splits the pool, and the other release already does."""
    base = plan('a', vllm_server_version='0.99.0')
    other = plan('b', vllm_server_version='0.99.0', vllm_server_extra_args=['--some-future-flag', '1'])
    assert other['errors'] == [], other['errors']
    assert base['kv_pool']['key_prefix'] != other['kv_pool']['key_prefix']
    errors = kv_pool.plans_errors([base, other])
    assert errors and 'pool default: hosts a and b differ in vllm_args' in errors[0], errors


def test_dummy_weights_split_the_pool():
    base, other = plan('a'), plan('b', vllm_server_load_format='dummy')
    assert base['kv_pool']['key_prefix'] != other['kv_pool']['key_prefix']
    assert 'differ in load_format (auto vs dummy)' in kv_pool.plans_errors([base, other])[0]


def test_another_revision_splits_the_pool():
    base, other = plan('a'), plan('b', vllm_server_model_revision='abc123')
    assert base['kv_pool']['key_prefix'] != other['kv_pool']['key_prefix']
    assert 'differ in revision' in kv_pool.plans_errors([base, other])[0]


def test_a_serving_only_flag_keeps_the_pool():
    base, other = plan('a'), plan('b', vllm_server_extra_args=['--served-model-name', 'tiny', '--disable-log-stats'])
    assert base['kv_pool']['key_prefix'] == other['kv_pool']['key_prefix']


def test_an_environment_variable_splits_the_pool():
    base, other = plan('a'), plan('b', vllm_server_env={'VLLM_USE_V2_MODEL_RUNNER': '1'})
    assert base['kv_pool']['key_prefix'] != other['kv_pool']['key_prefix']


@pytest.mark.parametrize('cfg, found', [
    ({'vllm_server_extra_args': ['--enable-lora', '--lora-modules', 'a=/srv/lora/a']}, '--enable-lora, --lora-modules'),
    ({'vllm_server_extra_args': ['--max-loras=4']}, '--max-loras'),
    ({'vllm_server_env': {'VLLM_ALLOW_RUNTIME_LORA_UPDATING': 'True'}}, 'VLLM_ALLOW_RUNTIME_LORA_UPDATING'),
])
def test_lora_adapters_are_refused_in_a_pool(cfg, found):
    errors = [e for e in plan('a', **cfg)['errors'] if 'LoRA' in e]
    assert errors and errors[0].startswith('host a: vllm_server_extra_args=%s enables LoRA adapters' % found), errors
    assert 'lmcache_server_kv_pool: null' in errors[0]
    assert not [e for e in plan('a', **dict(cfg, lmcache_server_kv_pool=None))['errors'] if 'LoRA' in e]
