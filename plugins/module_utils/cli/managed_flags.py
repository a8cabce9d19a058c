# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which setting an item of ``*_extra_args`` reaches, read the way vLLM's and LMCache's parsers read it.

The option tables (every option string, its destination, whether it takes a value) are generated
from the pinned parsers by ``scripts/gen-cli-tables.py`` into ``vllm_cli_table`` and
``lmcache_cli_table`` (do not edit them: tests/real/test_cli_tables_real.py fails when a pinned
parser differs). Their format, read here only: ``TABLE['program']`` and ``['version']`` name the
parser; ``options``: option string -> [destination, takes a value, value is JSON]; ``dialect``:
``vllm`` (FlexibleArgumentParser's rewriting of ``_``, dotted sub-keys, ``-O<n>`` and ``--config``)
or ``argparse``; ``file_dests``: options that read a file of flags; ``optimization_option``,
``allow_abbrev``, ``prefix_chars`` and ``positionals`` as the parser has them. ``reached(arg, table)`` returns the option strings an argument can reach:
exact names, ``--flag=value``, underscores for dashes and dotted JSON sub-keys (vLLM's
``FlexibleArgumentParser`` rewrites them before argparse sees them), ``-O<level>``, the
abbreviations argparse accepts (``allow_abbrev``, for ``--long`` and ``-short`` options) and
short options written together with their value or with other short flags (``-tp2``).
``MANAGED_VLLM``/``MANAGED_LMCACHE`` map the destinations the collection sets itself to the
variable to use instead. ``argument_problems(args, table)`` lists what the parser itself would refuse in a
list of extra arguments (an option it does not have, with the nearest it has; an ambiguous abbreviation; a
value given to an option that takes none; a value no option takes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re
import unicodedata

# Destinations (argparse ``dest``) the collection sets itself -> the variable to use instead.
MANAGED_VLLM = {
    'model': 'vllm_server_model',
    'revision': 'vllm_server_model_revision',
    'host': 'vllm_server_host',
    'port': 'vllm_server_port',
    'uds': 'vllm_server_host and vllm_server_port',
    'served_model_name': 'vllm_server_served_model_name',
    'tensor_parallel_size': 'vllm_server_tensor_parallel_size',
    'dtype': 'vllm_server_dtype',
    'kv_cache_dtype': 'vllm_server_kv_cache_dtype',
    'mamba_ssm_cache_dtype': 'vllm_server_mamba_ssm_cache_dtype',
    'mamba_cache_dtype': 'vllm_server_mamba_cache_dtype',
    'block_size': 'vllm_server_block_size',
    'speculative_config': 'vllm_server_speculative_config',
    'spec_method': 'vllm_server_speculative_config',
    'spec_model': 'vllm_server_speculative_config',
    'spec_tokens': 'vllm_server_speculative_config',
    'max_num_batched_tokens': 'vllm_server_max_num_batched_tokens',
    'max_num_seqs': 'vllm_server_max_num_seqs',
    'max_model_len': 'vllm_server_max_model_len',
    'gpu_memory_utilization': 'vllm_server_gpu_memory_utilization',
    'enable_prefix_caching': 'vllm_server_enable_prefix_caching',
    'mamba_cache_mode': 'vllm_server_mamba_cache_mode',
    'kv_transfer_config': 'vllm_server_kv_connector (and vllm_server_lmcache_*)',
    'language_model_only': 'vllm_server_language_model_only',
    'load_format': 'vllm_server_load_format',
    'enforce_eager': 'vllm_server_enforce_eager',
    'api_key': 'vllm_server_api_key',
    'hf_token': 'vllm_server_hf_token',
    'device_ids': 'vllm_server_gpus',
}
MANAGED_LMCACHE = {
    'host': 'lmcache_server_host',
    'port': 'lmcache_server_port',
    'http_host': 'lmcache_server_http_host',
    'http_port': 'lmcache_server_http_port',
    'chunk_size': 'lmcache_server_chunk_size (or lmcache_server_chunk_multiple)',
    'separate_object_groups': 'lmcache_server_separate_object_groups',
    'l1_size_gb': 'lmcache_server_l1_size_gb',
    'eviction_policy': 'lmcache_server_eviction_policy',
    'supported_transfer_mode': 'lmcache_server_supported_transfer_mode',
    'max_gpu_workers': 'lmcache_server_max_gpu_workers',
}
# Destinations whose value is a secret (refused without showing the value).
SECRET_DESTS = ('api_key', 'hf_token')
# Destinations of vLLM options that change the model's layer layout or add a draft model: the
# probe never shrinks the model when extra_args reach one of them.
SHRINK_BLOCKING_DESTS = ('hf_overrides', 'hf_config_path', 'num_redundant_experts', 'pipeline_parallel_size',
                         'speculative_config', 'spec_method', 'spec_model', 'spec_tokens')

NEGATIVE_NUMBER_RE = re.compile(r'^-\d+$|^-\d*\.\d+$')
# Characters that look like a dash but are not ASCII "-" (U+002D).
DASH_LIKE = u'\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d\u00ad'


def foreign_dash(text):
    """The dash-like first character of ``text`` when it is not ASCII "-" (else None)."""
    if not text:
        return None
    first = text[0]
    if first == '-':
        return None
    if first in DASH_LIKE or unicodedata.category(first) == 'Pd':
        return first
    return None


def _rewrite(text, table):
    """The option name argparse is handed for ``text`` (vLLM's rewriting applied), and whether a
    value is attached to it (``=value``); None for a value."""
    if not text.startswith('-') or text in ('-', '--') or NEGATIVE_NUMBER_RE.match(text):
        return None, False
    name, sep, _value = text.partition('=')
    if table['dialect'] == 'vllm':
        if name.startswith('--'):
            name = name.split('.', 1)[0]
        elif name.startswith('-O') and name != '-O':
            return table['optimization_option'], True
        elif '.' in name:
            name = name.split('.', 1)[0]
    if name.startswith('--'):
        # vLLM turns "_" into "-" in names; the rule reads LMCache's names the same way (a
        # spelling LMCache would reject anyway is refused, never passed).
        name = '--' + name[2:].replace('_', '-')
    return name, bool(sep)


def _short_chain(text, table):
    """Options reached by single-dash ``text`` through argparse's short-option rules."""
    options = table['options']
    found = []
    head, rest = text[:2], text[2:]
    while head in options:
        found.append(head)
        if options[head][1] or not rest or rest.startswith('='):
            break
        head, rest = '-' + rest[0], rest[1:]
    return found


def reached(arg, table):
    """The option strings of ``table`` that ``arg`` can reach (empty for a value or an unknown flag)."""
    text = str(arg)
    name, _attached = _rewrite(text, table)
    if name is None:
        return []
    options = table['options']
    if name in options:
        return [name]
    hits = []
    if name.startswith('--'):
        if table['allow_abbrev'] and len(name) > 2:
            hits = [option for option in options if option.startswith(name)]
    else:
        hits = _short_chain(name, table)
        if table['allow_abbrev']:
            bare = name.split('=', 1)[0]
            hits += [option for option in options if option.startswith(bare) or option.startswith(name)]
    return sorted(set(hits))


def managed(arg, table, dests):
    """(option string, destination) of the first managed setting ``arg`` reaches, or None."""
    for option in reached(arg, table):
        dest = table['options'][option][0]
        if dest in dests:
            return option, dest
    return None


def file_option(arg, table):
    """The option that reads a file of flags which ``arg`` reaches (vLLM's ``--config``), or None."""
    for option in reached(arg, table):
        if table['options'][option][0] in table['file_dests']:
            return option
    return None


def suggestions(name, table, limit=3):
    """The long options of ``table`` nearest to the unknown option ``name`` (difflib), best first."""
    longs = [option for option in table['options'] if option.startswith('--')]
    return difflib.get_close_matches(name, longs, n=limit, cutoff=0.6)


def _option_problem(text, name, attached, table):
    """The parser's objection to the option item ``text`` (read as ``name``), or None."""
    options = table['options']
    hits = reached(text, table)
    if not hits:
        near = suggestions(name, table)
        return ('is not an option of %s %s' % (table['program'], table['version']),
                'did you mean %s?' % ' or '.join(near) if near else 'see `%s --help`' % table['program'])
    if name.startswith('--') and name not in options and len(hits) > 1:
        return ('is an ambiguous abbreviation (%s %s reads it as any of %s)'
                % (table['program'], table['version'], ', '.join(hits[:5])), 'write the option in full')
    if attached and len(hits) == 1 and not options[hits[0]][1] and not hits[0].startswith('-O'):
        return ('gives a value to %s, which takes none' % hits[0], 'write %s alone' % hits[0])
    return None


def argument_problems(args, table):
    """[(item, problem, fix)] for every item of ``args`` that ``table``'s parser would refuse when
    the list follows the collection's own flags: an option it does not have (with the nearest ones it
    has), an ambiguous abbreviation, ``--flag=value`` for a flag that takes no value, and a value that
    no option takes (the first item, or one after an option that takes none)."""
    out = []
    takes_value = False
    for index, text in enumerate(str(arg) for arg in args):
        name, attached = _rewrite(text, table)
        if name is None:
            if not takes_value:
                out.append((text, 'is a value that no option takes (%s)'
                            % ('the first item' if index == 0 else 'it follows an option that takes none'),
                            'put it after the option it belongs to, or remove it'))
            takes_value = True  # a value may be followed by more values (nargs '+')
            continue
        problem = _option_problem(text, name, attached, table)
        if problem is not None:
            out.append((text,) + problem)
            takes_value = True  # its value (if any) is not reported again
            continue
        takes_value = not attached and any(table['options'][hit][1] for hit in reached(text, table))
    return out


def option_values(args, table):
    """[(destination, [values])] of every option item of ``args``, in order, read as the parser reads
    them: a value attached with ``=`` or the items that follow (up to the next option), after the
    dotted sub-key of a JSON option (``.key``) when one is given. An item that reaches no single option
    of ``table`` is left out."""
    out = []
    current = None
    for text in (str(arg) for arg in args):
        name, attached = _rewrite(text, table)
        if name is None:
            if current is not None:
                current[1].append(text)
            continue
        hits = reached(text, table)
        current = None
        if len(hits) != 1:
            continue
        head = text.split('=', 1)[0]
        sub = ['.' + head.split('.', 1)[1]] if table['dialect'] == 'vllm' and head.startswith('--') and '.' in head else []
        current = (table['options'][hits[0]][0], sub + ([text.split('=', 1)[1]] if attached and '=' in text else []))
        out.append(current)
        if attached:
            current = None
    return out
