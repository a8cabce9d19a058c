# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the pinned parsers refuse in ``*_extra_args`` is refused by the plan, before any host changes.

``managed_flags.argument_problems`` reads a list of extra arguments with the generated tables; each case
is also handed to a standard-library parser rebuilt from the same table (argparse is what vLLM and LMCache
use), which must refuse exactly the lists the plan refuses. The real parsers read every rendered unit in
tests/real/test_cli_tables_real.py.
"""

from __future__ import annotations

import argparse

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import lmcache_cli_table
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import managed_flags as mf
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli_table

VLLM = vllm_cli_table.TABLE
LMCACHE = lmcache_cli_table.TABLE
HOST = 'gpu-07'


def strict_parser(table):
    """argparse with the table's options; every option takes exactly one value or none."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=table['allow_abbrev'], exit_on_error=False)
    for option, (dest, takes_value, _json) in sorted(table['options'].items()):
        if option in ('-h', '--help') or option.startswith('-O'):
            continue
        if takes_value:
            parser.add_argument(option, dest='%s %s' % (dest, option))
        else:
            parser.add_argument(option, dest='%s %s' % (dest, option), action='store_const', const=True)
    return parser


def argparse_refuses(args, table):
    # argparse prints to stderr and exits for some errors even with exit_on_error=False
    try:
        _namespace, rest = strict_parser(table).parse_known_args(list(args))
    except (argparse.ArgumentError, SystemExit):
        return True
    return bool(rest)


# (args, table, the refused item or None)
CASES = [
    (['--max-num-partial-prefills', '2'], VLLM, '--max-num-partial-prefills'),
    (['--seeed', '1'], VLLM, '--seeed'),
    (['--max-num', '3'], VLLM, '--max-num'),
    (['--disable-log-stats=1'], VLLM, '--disable-log-stats=1'),
    (['x'], VLLM, 'x'),
    (['--disable-log-stats', 'true'], VLLM, 'true'),
    (['--seed', '1', '--disable-log-stats'], VLLM, None),
    (['--seed=1'], VLLM, None),
    (['--max-num-active-seqs', '32'], VLLM, None),
    (['--attention-backend', 'FLASHINFER'], VLLM, None),
    (['--additional-config', '{"gdn_prefill_backend": "triton"}'], VLLM, None),
    (['--chunk-sise', '256'], LMCACHE, '--chunk-sise'),
    (['--coordinator-url', 'a b'], LMCACHE, None),
]


@pytest.mark.parametrize('args, table, refused', CASES, ids=[' '.join(c[0]) for c in CASES])
def test_argument_problems_name_what_the_parser_refuses(args, table, refused):
    problems = mf.argument_problems(args, table)
    assert [item for item, _problem, _fix in problems] == ([refused] if refused else [])
    assert argparse_refuses(args, table) == bool(refused)


def test_unknown_flags_get_a_did_you_mean_from_the_table():
    ((item, problem, fix),) = mf.argument_problems(['--chunk-sise', '256'], LMCACHE)
    assert problem == 'is not an option of lmcache server %s' % LMCACHE['version']
    assert fix == 'did you mean --chunk-size?'
    ((_item, _problem, fix),) = mf.argument_problems(['--max-num-partial-prefills', '2'], VLLM)
    assert fix.startswith('did you mean --') and all(o in VLLM['options'] for o in fix[13:-1].split(' or '))
    ((_item, _problem, fix),) = mf.argument_problems(['--zzzzzz'], VLLM)
    assert fix == 'see `vllm serve --help`'


def plan(**overrides):
    settings = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}
    settings.update(overrides)
    return host_plan.plan_host(HOST, settings, n=544, n_kind='probed')


def test_the_plan_refuses_a_flag_the_pinned_vllm_does_not_have():
    result = plan(vllm_server_extra_args=['--max-num-partial-prefills', '2'])
    assert result['errors'] == [
        'host gpu-07: vllm_server_extra_args=["--max-num-partial-prefills", "2"] has "--max-num-partial-prefills", '
        'which is not an option of vllm serve %s; did you mean --max-num-active-seqs?; vllm serve refuses the '
        'command line otherwise' % VLLM['version']]


def test_the_plan_refuses_a_flag_the_pinned_lmcache_does_not_have():
    (error,) = plan(lmcache_server_extra_args=['--chunk-sise', '256'])['errors']
    assert error.startswith('host gpu-07: lmcache_server_extra_args=["--chunk-sise", "256"] has "--chunk-sise", '
                            'which is not an option of lmcache server %s; did you mean --chunk-size?' % LMCACHE['version'])


def test_another_pinned_version_is_warned_not_refused():
    """The table describes one release: a host pinning another gets a warning naming both versions."""
    result = plan(vllm_server_version='0.24.0', vllm_server_extra_args=['--max-num-partial-prefills', '2'],
                  vllm_server_lmcache_version='0.5.3', lmcache_server_version='0.5.3', lmcache_server_torch_version='2.11.0')
    assert result['errors'] == []
    (warning,) = [w for w in result['warnings'] if 'vllm_server_extra_args' in w]
    assert 'not an option of vllm serve %s' % VLLM['version'] in warning
    assert 'this host pins vllm_server_version=0.24.0, which is not checked' in warning
    assert '--max-num-partial-prefills' in result['vllm']['argv']


def test_the_same_version_in_another_spelling_is_the_table_version():
    result = plan(vllm_server_version=VLLM['version'] + '.0', vllm_server_extra_args=['--seeed', '1'])
    assert len(result['errors']) == 1 and 'did you mean --seed' in result['errors'][0]


def test_a_refused_secret_is_never_read_again_as_a_value():
    """--api-key is refused (its value hidden); the parser check does not then report the key as a stray value."""
    errors = plan(vllm_server_extra_args=['--api-key', 'sk-secret-value'])['errors']
    assert len(errors) == 1 and 'sk-secret-value' not in errors[0]
