# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of the inputs of N drives the service's argv, the probe's argv and the fingerprint."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import fingerprint
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import hardware_groups
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import launch
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import managed_flags
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_tree
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli_table
from fleet_collection import REPO_ROOT

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


# ----------------------------------------------------------------------------- inputs of N only extra_args carry
MODEL_DIR = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3.5-0.8b')


def load_config(term, revision='main', paths=None):
    with open(os.path.join(term, 'config.json'), encoding='utf-8') as handle:
        return json.load(handle)


SKIP = ['--kv-cache-dtype-skip-layers', '0', '3']


def test_every_extra_input_of_n_is_an_unmanaged_option_of_the_pinned_vllm():
    options = vllm_cli_table.TABLE['options']
    for item in vllm_cli.N_EXTRA_INPUTS:
        assert options[item.flag][0] == item.dest, item
        assert item.dest not in managed_flags.MANAGED_VLLM, item  # a variable of its own is an N_INPUT
    managed_inputs = set(item.name for item in vllm_cli.N_INPUTS)
    assert managed_inputs <= set(managed_flags.MANAGED_VLLM) and not managed_inputs & set(vllm_cli.N_EXTRA_DESTS)


@pytest.mark.parametrize('args, expected', [
    (SKIP + ['--seed', '1'], {'kv_cache_dtype_skip_layers': '0 3'}),
    (['--kv_cache_dtype_skip_layers=sliding_window'], {'kv_cache_dtype_skip_layers': 'sliding_window'}),
    (['--kv-cache-dtype-skip', '1'], {'kv_cache_dtype_skip_layers': '1'}),  # an abbreviation argparse expands
    (['--attention-backend', 'FLASHINFER', '--attention-backend', 'FLASH_ATTN'], {'attention_backend': 'FLASH_ATTN'}),
    (['--attention-config.backend=FLASHMLA'], {'attention_config': '.backend FLASHMLA'}),
    (['--seed', '1', '--max-num-active-seqs', '8'], {}),
])
def test_extra_inputs_of_n_are_read_as_vllm_reads_them(args, expected):
    assert vllm_cli.extra_n_inputs(args) == expected


def test_only_values_the_prediction_models_are_predicted():
    assert vllm_cli.unpredicted({'attention_backend': 'FLASHINFER'}) == []
    assert vllm_cli.unpredicted({'attention_backend': 'FLASHMLA'}) == ['--attention-backend FLASHMLA']
    assert vllm_cli.unpredicted({'kv_cache_dtype_skip_layers': '0 3'}) == ['--kv-cache-dtype-skip-layers 0 3']
    assert vllm_cli.unpredicted({'attention_config': '.backend X'}) == ['--attention-config.backend X']


def plan_of(host, **settings):
    base = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}
    base.update(settings)
    return host_plan.plan_host(host, base)


def test_skip_layers_are_an_input_of_n_for_the_groups_and_the_prediction():
    """--kv-cache-dtype-skip-layers makes vLLM 0.32 align N a second time: the host is grouped apart (its own
    probe), and the prediction, which does not model that alignment, declines (the probe decides)."""
    plain, skip = plan_of('a'), plan_of('b', vllm_server_extra_args=SKIP)
    assert skip['errors'] == [] and skip['n_inputs']['extra_n_inputs'] == {'kv_cache_dtype_skip_layers': '0 3'}
    assert plain['n_inputs']['extra_n_inputs'] == {}
    row = {'gpu_kind': 'NVIDIA H200', 'gpus': '0'}
    assert hardware_groups.plan_key(dict(row, n_inputs=plain['n_inputs'])) != \
        hardware_groups.plan_key(dict(row, n_inputs=skip['n_inputs']))
    config = load_config(MODEL_DIR)
    prediction, problem = plan_tree.predict('b', skip['n_inputs'], config, plan_tree.ConfigReader(load_config), [])
    assert prediction is None
    assert problem == ('host b: N is not predicted: vllm_server_extra_args set --kv-cache-dtype-skip-layers 0 3, an '
                       'input of N the prediction does not model; the probe on the host decides')
    assert plan_tree.predict('a', plain['n_inputs'], config, plan_tree.ConfigReader(load_config), [])[0] is not None


def test_the_probe_and_the_fingerprint_run_with_the_extra_inputs_of_n():
    skip = plan_of('b', vllm_server_extra_args=SKIP)
    assert skip['probe']['extra_args'] == SKIP
    base = dict((name, skip['probe'][name]) for name in vllm_cli.N_INPUT_NAMES)
    one = fingerprint.fingerprint_inputs('m', '0.32.0', extra_args=[], platform='cuda', **base)
    two = fingerprint.fingerprint_inputs('m', '0.32.0', extra_args=SKIP, platform='cuda', **base)
    assert fingerprint.compute_fingerprint(one) != fingerprint.compute_fingerprint(two)
