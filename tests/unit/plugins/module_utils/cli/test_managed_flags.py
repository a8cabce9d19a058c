# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""managed_flags reads extra_args the way vLLM's and LMCache's parsers do (the generated tables).

Each case is checked against the table generated from the real parser; argparse itself (the
standard library's, which both programs use) confirms the abbreviation cases on a parser rebuilt
from the same table.
"""

from __future__ import annotations

import argparse

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import lmcache_cli_table
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import managed_flags as mf
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import launch
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import request
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli_table

VLLM = vllm_cli_table.TABLE
LMCACHE = lmcache_cli_table.TABLE


def dests(arg, table=None):
    table = VLLM if table is None else table
    return sorted(set(table['options'][option][0] for option in mf.reached(arg, table)))


@pytest.mark.parametrize('arg, expected', [
    ('--tensor-parallel-size', ['tensor_parallel_size']),
    ('-tp', ['tensor_parallel_size']),
    ('-tp=2', ['tensor_parallel_size']),
    ('--tensor_parallel_size=2', ['tensor_parallel_size']),
    ('--tensor-par', ['tensor_parallel_size']),
    ('--kv-transfer-config.kv_connector', ['kv_transfer_config']),
    ('--kv_transfer_config.kv_role=kv_both', ['kv_transfer_config']),
    ('-sc.method', ['speculative_config']),
    ('--spec-tokens', ['spec_tokens']),
    ('--device-memory-utilization=0.5', ['gpu_memory_utilization']),
    ('--no-enable-prefix-caching', ['enable_prefix_caching']),
    ('--config=/x.yaml', ['config']),
    ('-O3', [VLLM['options'][VLLM['optimization_option']][0]]),
    # values, not flags
    ('-1', []), ('-0.5', []), ('', []), ('plain', []), ('-', []), ('--', []),
])
def test_vllm_spellings(arg, expected):
    assert dests(arg) == expected


def test_every_json_option_is_reached_through_its_sub_keys():
    json_options = [option for option, (_dest, _value, is_json) in VLLM['options'].items()
                    if is_json and option.startswith('--')]
    assert '--kv-transfer-config' in json_options and '--speculative-config' in json_options
    for option in json_options:
        assert dests(option + '.a.b=1') == [VLLM['options'][option][0]], option


def test_file_option_and_foreign_dashes():
    assert mf.file_option('--config', VLLM) == '--config'
    assert mf.file_option('--port', VLLM) is None
    assert mf.file_option('--config', LMCACHE) is None
    for text in (u'\u2013tp', u'\u2014port', u'\u2212\u2212host', u'\u2010x', u'\uff0dx'):
        assert mf.foreign_dash(text) == text[0]
    for text in ('-tp', '--port', 'x', '', '1'):
        assert mf.foreign_dash(text) is None


def argparse_parser(table):
    """A standard-library parser with the table's options (what argparse itself expands)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=table['allow_abbrev'], exit_on_error=False)
    for option, (dest, takes_value, _json) in sorted(table['options'].items()):
        if option in ('-h', '--help'):
            continue
        if takes_value:
            parser.add_argument(option, dest='%s %s' % (dest, option))
        else:
            parser.add_argument(option, dest='%s %s' % (dest, option), action='store_const', const=True)
    return parser


@pytest.mark.parametrize('table', [VLLM, LMCACHE], ids=['vllm', 'lmcache'])
def test_unique_prefixes_agree_with_argparse(table):
    """Every unambiguous prefix of every long option: argparse and managed_flags reach the same option."""
    parser = argparse_parser(table)
    checked = 0
    for option in sorted(table['options']):
        if not option.startswith('--') or option == '--help':
            continue
        for cut in range(3, len(option) + 1, 3):
            prefix = option[:cut]
            hits = mf.reached(prefix, table)
            if len(hits) != 1:
                continue
            value = [] if not table['options'][hits[0]][1] else ['v']
            namespace, _rest = parser.parse_known_args([prefix] + value)
            set_by_argparse = [key.split(' ', 1)[1] for key, val in vars(namespace).items() if val is not None]
            assert set_by_argparse == hits, prefix
            checked += 1
    assert checked > 100


def test_managed_settings_exist_in_the_tables():
    for table, managed in ((VLLM, mf.MANAGED_VLLM), (LMCACHE, mf.MANAGED_LMCACHE)):
        known = set(dest for dest, _value, _json in table['options'].values())
        assert set(managed) - known <= {'model'}, sorted(set(managed) - known)


@pytest.mark.parametrize('extra', [
    ['--speculative-config', '{"method": "mtp"}'], ['-sc', '{}'], ['--speculative_config.method', 'mtp'],
    ['--spec-method', 'mtp'], ['--spec-model=x'], ['--spec_tokens', '2'], ['--speculative-c.method=mtp'],
    ['-pp', '2'], ['--hf-overrides.num_hidden_layers', '2'], ['--hf_config_path=/x'],
])
def test_the_probe_never_shrinks_with_speculative_decoding_or_layout_flags(extra):
    config = {'num_hidden_layers': 24, 'layer_types': ['linear_attention', 'full_attention'] * 12}
    assert request.shrink_overrides(config)[0] is not None
    overrides, reason = request.shrink_overrides(config, extra_args=extra)
    assert overrides is None and reason.startswith('extra_args set '), reason


def test_the_probe_drops_every_spelling_of_its_own_flags():
    kept, dropped = launch.filter_extra_args(['--ho', '0.0.0.0', '--port=1', '--kv-transfer-config.kv_role',
                                              'kv_both', '--seed', '1'])
    assert kept == ['--seed', '1']
    assert dropped == ['--ho', '0.0.0.0', '--port=1', '--kv-transfer-config.kv_role', 'kv_both']


def test_every_flag_the_plan_writes_is_managed():
    """Whatever the units' argv set, extra_args cannot reach by any spelling (the rule and the argv agree)."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
    plan = host_plan.plan_host('h', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_max_num_seqs': 8,
                                     'vllm_server_max_model_len': 4096, 'vllm_server_gpu_memory_utilization': 0.8,
                                     'vllm_server_language_model_only': True, 'vllm_server_load_format': 'dummy',
                                     'vllm_server_enforce_eager': True, 'vllm_server_block_size': 32,
                                     'vllm_server_mamba_cache_dtype': 'float32', 'lmcache_server_max_gpu_workers': 1,
                                     'vllm_server_speculative_config': {'method': 'mtp', 'num_speculative_tokens': 1},
                                     'vllm_server_model_revision': 'abc123'},
                               n=544, n_kind='probed')
    assert plan['errors'] == []
    for service, table, managed in (('vllm', VLLM, mf.MANAGED_VLLM), ('lmcache', LMCACHE, mf.MANAGED_LMCACHE)):
        flags = [arg for arg in plan[service]['argv'][2:] if arg.startswith('-')]
        assert len(flags) >= 8, flags
        assert service != 'vllm' or '--revision' in flags  # the revision the probe and the prediction read
        for flag in flags:
            assert mf.managed(flag, table, managed) is not None, (service, flag)
