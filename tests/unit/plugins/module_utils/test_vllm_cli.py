# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of the inputs of N drives the service's argv, the probe's argv and the fingerprint."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import fingerprint
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import launch
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import vllm_cli

# A value other than vLLM's default for every input of N, and the variable that sets it.
NON_DEFAULT = {
    'tensor_parallel_size': ('vllm_server_tensor_parallel_size', 2, '2'),
    'dtype': ('vllm_server_dtype', 'float16', 'float16'),
    'kv_cache_dtype': ('vllm_server_kv_cache_dtype', 'fp8', 'fp8'),
    'mamba_ssm_cache_dtype': ('vllm_server_mamba_ssm_cache_dtype', 'float16', 'float16'),
    'mamba_cache_dtype': ('vllm_server_mamba_cache_dtype', 'float32', 'float32'),
    'block_size': ('vllm_server_block_size', 32, '32'),
    'speculative_config': ('vllm_server_speculative_config', {'method': 'mtp', 'num_speculative_tokens': 1},
                           '{"method":"mtp","num_speculative_tokens":1}'),
}


def test_every_input_has_a_case():
    assert set(NON_DEFAULT) == set(vllm_cli.N_INPUT_NAMES)
    assert len({item.flag for item in vllm_cli.N_INPUTS}) == len(vllm_cli.N_INPUTS)


def value_after(argv, flag):
    assert argv.count(flag) == 1, argv
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize('item', vllm_cli.N_INPUTS, ids=vllm_cli.N_INPUT_NAMES)
def test_one_entry_reaches_service_probe_and_fingerprint(item):
    variable, value, text = NON_DEFAULT[item.name]
    plan = host_plan.plan_host('h', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', variable: value,
                                     'vllm_server_gpus': [0, 1] if item.name == 'tensor_parallel_size' else None},
                               n=544, n_kind='probed')
    assert value_after(plan['vllm']['argv'], item.flag) == text
    probe = plan['probe']
    assert probe[item.name] == value
    argv = launch.build_probe_argv('/v/bin/vllm', 'm', 1, **{item.name: probe[item.name]})
    assert value_after(argv, item.flag) == text
    base = fingerprint.fingerprint_inputs({'kind': 'hub', 'id': 'm'}, '0.32.0')
    changed = fingerprint.fingerprint_inputs({'kind': 'hub', 'id': 'm'}, '0.32.0', **{item.name: value})
    assert item.name in base and base[item.name] != changed[item.name]
    assert fingerprint.compute_fingerprint(base) != fingerprint.compute_fingerprint(changed)


@pytest.mark.parametrize('item', vllm_cli.N_INPUTS, ids=vllm_cli.N_INPUT_NAMES)
def test_defaults_stay_out_of_the_probe_argv(item):
    argv = launch.build_probe_argv('/v/bin/vllm', 'm', 1, **{item.name: item.default})
    assert item.flag not in argv
    service = vllm_cli.n_input_argv({item.name: item.default}, explicit=True)
    assert (item.flag in service) is item.service_always


def test_normalised_values():
    values = vllm_cli.n_input_values({'dtype': ' ', 'tensor_parallel_size': None, 'block_size': '32',
                                      'speculative_config': '{"method": "mtp"}'})
    assert values == {'tensor_parallel_size': 1, 'dtype': 'auto', 'kv_cache_dtype': 'auto',
                      'mamba_ssm_cache_dtype': 'auto', 'mamba_cache_dtype': 'auto', 'block_size': 32,
                      'speculative_config': {'method': 'mtp'}}
    with pytest.raises(ValueError, match='speculative_config must be a JSON object'):
        vllm_cli.n_input_values({'speculative_config': '[1]'})
