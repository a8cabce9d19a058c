# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host plan's validation: each check records an error that names the host, the variable and the fix.

Pure, and run before any host changes. ``first_checks`` and ``type_checks`` look at every variable
(control characters, unknown names, tokens in the wrong place, the declared types); ``vllm_values`` and
``lmcache_values`` read the variables the units use, each through its range or choices; ``service_values``
runs them with the checks of names, paths, packages, exposure, environments and extra arguments.
"""

from __future__ import annotations

import difflib
import json
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import lmcache_cli_table
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import managed_flags
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import package_spec
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli_table
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    ACCOUNT_RE, LMCACHE_LOG_LEVELS, SERVICE_NAME_RE, VARIABLE_RE, VLLM_DTYPES, VLLM_KV_CACHE_DTYPES, VLLM_MAMBA_DTYPES,
    CheckedValues, as_bool, as_int, host_label, typed)

# Flags the collection sets itself: extra_args may not reach them by any spelling the program's own
# parser accepts (the generated option tables, read by managed_flags). The mapping names the
# variable to use instead, by the option's destination.
VLLM_MANAGED_FLAGS = (vllm_cli_table.TABLE, managed_flags.MANAGED_VLLM)
LMCACHE_MANAGED_FLAGS = (lmcache_cli_table.TABLE, managed_flags.MANAGED_LMCACHE)
# Environment variables the units set themselves, and secrets that have their own variable.
VLLM_MANAGED_ENV = {
    'HOME': 'vllm_server_home', 'HF_HOME': 'vllm_server_hf_home', 'VLLM_CACHE_ROOT': 'vllm_server_home',
    'PYTHONHASHSEED': 'nothing (the unit sets 0, which LMCache needs for stable chunk hashes)',
    'VLLM_ENGINE_READY_TIMEOUT_S': 'vllm_server_start_timeout',
    'CUDA_VISIBLE_DEVICES': 'vllm_server_gpus', 'VLLM_CPU_KVCACHE_SPACE': 'vllm_server_cpu_kvcache_space_gb',
    'VLLM_HOST_IP': 'vllm_server_host', 'VLLM_PORT': 'vllm_server_port',
}
LMCACHE_MANAGED_ENV = {
    'HOME': 'lmcache_server_home', 'PYTHONHASHSEED': 'nothing (the unit sets 0)',
    'LMCACHE_LOG_LEVEL': 'lmcache_server_log_level', 'LMCACHE_TRACK_USAGE': 'lmcache_server_track_usage',
    'CUDA_VISIBLE_DEVICES': 'lmcache_server_gpus', 'LMCACHE_FLEET_L2_ADAPTER': 'lmcache_server_kv_pool',
}
SECRET_ENV = {
    'HF_TOKEN': 'vllm_server_hf_token', 'HUGGING_FACE_HUB_TOKEN': 'vllm_server_hf_token',
    'HF_API_TOKEN': 'vllm_server_hf_token', 'VLLM_API_KEY': 'vllm_server_api_key',
}
SECRET_VARIABLES = ('vllm_server_api_key', 'vllm_server_hf_token')
# A Hugging Face access token, wherever it is written.
TOKEN_RE = re.compile(r'\bhf_[A-Za-z0-9]{20,}\b')

# Variables the roles no longer read, refused when set: {name: (problem, fix)}.
REMOVED_VARIABLES = {
    # N has one door: the probe (or the prediction where the docs say so), through the host plan.
    'lmcache_server_block_size': (
        'is refused: N comes only from the probe (the vllm_block_size fact), through the host plan, so that LMCache '
        'and vLLM always use the same N',
        'remove it; before a probe, set vllm_server_expected_block_size to the N vLLM logs, or lmcache_server_chunk_size'),
}

HOST_LABEL_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$')
LOAD_FORMAT_RE = re.compile(r'^[a-z][a-z0-9_]*$')
HUB_ID_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$')


def managed_flag(arg, table):
    """(dest, variable to use) of the managed setting ``arg`` reaches (exactly, as ``--flag=value``, an
    alias, a short option, an abbreviation argparse would expand or a dotted JSON sub-key), or None."""
    options, dests = table
    hit = managed_flags.managed(arg, options, dests)
    return None if hit is None else (hit[1], dests[hit[1]])


def _walk_strings(value, path):
    """(path, text) for every string (and dict key) inside ``value``."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield '%s.%s' % (path, key), str(key)
            yield from _walk_strings(item, '%s.%s' % (path, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _walk_strings(item, '%s[%d]' % (path, index))


def _describe_control(text):
    for char, name in (('\n', 'a newline'), ('\r', 'a carriage return'), ('\x00', 'a NUL byte')):
        if char in text:
            return name
    return 'a control character'


# --------------------------------------------------------------------------- every variable

def first_checks(p, known):
    """Control characters, unknown variable names, the host name and secrets in the wrong place."""
    for name in sorted(p.cfg):
        value = p.cfg[name]
        for where, text in _walk_strings(value, name):
            if sq.has_control_character(text):
                shown = '(value hidden)' if name in SECRET_VARIABLES else repr(text)
                p.errors.append('host %s: %s=%s holds %s, which would cut or extend the unit file; remove it '
                                '(a YAML "|" block ends in a newline: use a plain or ">-" scalar)'
                                % (host_label(p.host), where, shown, _describe_control(text)))
                break
        if name in SECRET_VARIABLES:
            continue
        for where, text in _walk_strings(value, name):
            if TOKEN_RE.search(text):
                p.errors.append('host %s: %s holds what looks like a Hugging Face token (value hidden); '
                                'put it in vllm_server_hf_token only (written to a 0600 file, never logged)'
                                % (host_label(p.host), where))
                break
    for name in sorted(set(p.cfg) & set(REMOVED_VARIABLES)):
        if p.cfg[name] not in (None, ''):
            p.error(name, p.cfg[name], *REMOVED_VARIABLES[name])
    if known:
        for name in sorted(p.cfg):
            if VARIABLE_RE.match(name) and name not in known and name not in REMOVED_VARIABLES:
                close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
                fix = 'did you mean %s?' % close[0] if close else 'remove it (see the roles\' meta/argument_specs.yml)'
                p.error(name, p.cfg[name], 'is not a variable of the lmcache_server or vllm_server role', fix)
    if not isinstance(p.host, str) or not HOST_LABEL_RE.match(p.host) or '..' in p.host:
        p.errors.append('host %s: the inventory host name is not a safe name (it names the plan\'s and the backups\' '
                        'folders); use letters, digits, ".", "_" and "-", starting with a letter or digit, without ".."'
                        % json.dumps(p.host))


_TYPE_WORDS = {'str': 'a string', 'path': 'a path (a string)', 'int': 'an integer', 'float': 'a number',
               'bool': 'a boolean', 'list': 'a list', 'dict': 'a mapping'}


def type_checks(p, specs):
    """Each variable against the type its argument spec declares (before the specific checks)."""
    for name in sorted(p.cfg):
        spec = specs.get(name)
        if not spec or name in p.failed:
            continue
        kind = spec.get('type', 'str')
        value = p.cfg[name]
        if value is None:
            if spec.get('required') or (spec.get('default') is not None and kind in ('list', 'bool')):
                p.error(name, value, 'is null', 'give it %s' % _TYPE_WORDS.get(kind, 'a value'))
            continue
        ok = True
        if kind in ('str', 'path'):
            ok = isinstance(value, str)
            if not ok and name in SECRET_VARIABLES:
                continue  # reported by secrets without the value
            if not ok and isinstance(value, (int, float)) and not isinstance(value, bool):
                p.error(name, value, 'is a number, but a string is expected (YAML reads 0.40 as 0.4)',
                        'quote it: %s: "%s"' % (name, value))
                continue
        elif kind in ('int', 'float'):
            continue  # every number has its own range check below
        elif kind == 'bool':
            ok = isinstance(as_bool(value), bool)
        elif kind == 'list':
            ok = isinstance(value, (list, tuple)) or (name.endswith('_gpus') and isinstance(value, (str, int)))
        elif kind == 'dict':
            ok = isinstance(value, dict)
        if not ok:
            p.error(name, value, 'is not %s' % _TYPE_WORDS.get(kind, kind),
                    'use true or false' if kind == 'bool' else 'use %s' % _TYPE_WORDS.get(kind, kind))


def checked_values(p, specs):
    """Validation's result: every variable of the host by its full name, typed as its argument spec declares (the
    clean value a check returned, where one ran; ``HostSettings.error`` drops the value of a variable that failed),
    with the values ``resolve`` filled in. A number or boolean that failed its check is null; a string that failed
    keeps its given value (the plan lists the error either way, and a plan with errors changes no host). What the
    plan's units read (``plan_units``)."""
    values = CheckedValues((name, None) for name in specs)
    given = dict(p.cfg, **p.checked)
    values.update((name, typed(value, (specs.get(name) or {}).get('type'))) for name, value in given.items())
    return values


def kind_name(value):
    """The YAML word for a value's type (Ansible may hand over subclasses of the builtin types)."""
    for kind, word in ((bool, 'boolean'), (int, 'number'), (float, 'number'), (str, 'string'), (dict, 'mapping'),
                       ((list, tuple), 'list')):
        if isinstance(value, kind):
            return word
    return type(value).__name__


def secrets(p):
    out = {}
    for name in SECRET_VARIABLES:
        value = p.get(name)
        if value is None:
            value = ''
        if not isinstance(value, str):
            p.secret_error(name, 'is a %s, not a string' % kind_name(value),
                           'quote it in the inventory (for example %s: "{{ vault_value }}")' % name)
            value = ''
        out[name] = value
    return out


# --------------------------------------------------------------------------- the values the units use

def devices(p):
    """vllm_server_device (and lmcache_server_device when it differs): the checked vLLM device, or None."""
    device = p.choice('vllm_server_device', fleet_rules.DEVICES)
    if p.cfg.get('lmcache_server_device') != p.cfg.get('vllm_server_device'):
        p.choice('lmcache_server_device', fleet_rules.DEVICES)
    return device


def service_values(p, device, hybrid, secrets):
    """(vLLM values, LMCache values): every variable the units use, checked with the names, paths, packages,
    exposure, environments and extra arguments of both services."""
    v = vllm_values(p, device)
    lm = lmcache_values(p, hybrid)
    _names_and_paths(p)
    for variable, value, problem, fix in package_spec.problems(p.cfg):
        if variable not in p.failed:
            p.error(variable, value, problem, fix)
    _check_exposure(p, secrets)
    v['env'] = _env_mapping(p, 'vllm_server_env', VLLM_MANAGED_ENV, 'vLLM')
    lm['env'] = _env_mapping(p, 'lmcache_server_env', LMCACHE_MANAGED_ENV, 'LMCache')
    v['extra'] = _extra_args(p, 'vllm_server_extra_args', VLLM_MANAGED_FLAGS, 'vllm_server_version')
    lm['extra'] = _extra_args(p, 'lmcache_server_extra_args', LMCACHE_MANAGED_FLAGS, 'lmcache_server_version')
    return v, lm


def _model_value(p):
    model = p.get('vllm_server_model')
    if not isinstance(model, str) or not model.strip():
        p.error('vllm_server_model', model, 'is empty', 'set a hub id (e.g. Qwen/Qwen3.6-27B) or a local model directory')
        return None
    if not (model.startswith('/') or HUB_ID_RE.match(model)):
        p.error('vllm_server_model', model, 'is neither a hub id nor an absolute directory',
                'use Org/Name (e.g. Qwen/Qwen3.6-27B) or an absolute path')
        return None
    return model


def _ports(p):
    ports = {}
    for name in ('lmcache_server_port', 'lmcache_server_http_port', 'vllm_server_port'):
        port = p.integer(name, 1, 65535, null=False, what='a TCP port')
        if port is None:
            continue
        if port in ports.values():
            other = [k for k, v in ports.items() if v == port][0]
            p.error(name, port, 'is already used by %s on this host' % other,
                    'give the LMCache ZMQ port, the LMCache HTTP port and the vLLM port distinct values')
        ports[name] = port
    return ports


def _speculative_config(p):
    spec = p.get('vllm_server_speculative_config')
    if spec in (None, '') or 'vllm_server_speculative_config' in p.failed:
        return None
    if not isinstance(spec, dict):
        p.error('vllm_server_speculative_config', spec, 'is not a mapping',
                'use null or a mapping such as {"method": "mtp", "num_speculative_tokens": 1}')
        return None
    if 'num_speculative_tokens' in spec and (as_int(spec['num_speculative_tokens']) is None
                                             or as_int(spec['num_speculative_tokens']) < 0):
        p.error('vllm_server_speculative_config', spec, 'has a num_speculative_tokens that is not an integer >= 0',
                'use a whole number such as 1')
    return spec


def _gpus(p, name):
    value = p.get(name)
    if value in (None, '', []):
        return []
    items = value
    if isinstance(value, str):
        items = value.split(',')
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    if not isinstance(items, (list, tuple)):
        p.error(name, value, 'is not a list of GPU ids', 'use a list of GPU indexes such as [0, 1]')
        return None
    ids = []
    for item in items:
        number = as_int(item.strip() if isinstance(item, str) else item)
        if isinstance(item, str) and not re.match(r'^\s*\d+\s*$', item):
            number = None
        if number is None or number < 0:
            p.error(name, value, 'has %s, which is not a GPU index' % json.dumps(item),
                    'use non-negative integers such as [0, 1] (nvidia-smi --query-gpu=index)')
            return None
        ids.append(number)
    if len(set(ids)) != len(ids):
        p.error(name, value, 'lists a GPU more than once', 'list each GPU index once, e.g. %s' % sorted(set(ids)))
        return None
    return ids


def vllm_values(p, device):
    """The clean values of the vLLM variables (None where a value was refused)."""
    v = {'device': device, 'model': _model_value(p), 'served': p.string('vllm_server_served_model_name'),
         'ports': _ports(p)}
    v['tp'] = p.integer('vllm_server_tensor_parallel_size', low=1, null=False, fix='use 1 or the number of GPUs')
    v['gpus'] = _gpus(p, 'vllm_server_gpus')
    v['lmcache_gpus'] = _gpus(p, 'lmcache_server_gpus')
    if v['tp'] is not None and v['gpus'] and len(v['gpus']) != v['tp']:
        p.error('vllm_server_tensor_parallel_size', v['tp'],
                'does not match the GPU list: TP=%d needs %d GPUs, vllm_server_gpus lists %d' % (v['tp'], v['tp'], len(v['gpus'])),
                'list exactly %d GPU ids in vllm_server_gpus, or leave it empty' % v['tp'])
    v['dtype'] = p.choice('vllm_server_dtype', VLLM_DTYPES)
    v['kv_dtype'] = p.choice('vllm_server_kv_cache_dtype', VLLM_KV_CACHE_DTYPES)
    v['ssm_dtype'] = p.choice('vllm_server_mamba_ssm_cache_dtype', VLLM_MAMBA_DTYPES)
    v['mamba_dtype'] = p.choice('vllm_server_mamba_cache_dtype', VLLM_MAMBA_DTYPES)
    v['block_size'] = p.integer('vllm_server_block_size', low=1)
    if v['block_size'] is not None and v['block_size'] % 16 and device == 'cuda':
        p.warn('vllm_server_block_size', v['block_size'], 'is not a multiple of 16', 'use 16, 32 or 64 (or null)')
    v['spec'] = _speculative_config(p)
    v['mnbt'] = p.integer('vllm_server_max_num_batched_tokens', low=1,
                          fix='leave it null (2N-1 for hybrid models) or use an integer >= N')
    v['max_seqs'] = p.integer('vllm_server_max_num_seqs', low=1)
    v['max_len'] = p.integer('vllm_server_max_model_len', low=1)
    v['gpu_util'] = p.number('vllm_server_gpu_memory_utilization', low_exclusive=0, high=1,
                             fix='use a fraction in (0, 1], e.g. 0.9, or null')
    v['prefix'] = p.boolean('vllm_server_enable_prefix_caching')
    v['mamba_mode'] = p.choice('vllm_server_mamba_cache_mode', fleet_rules.MAMBA_CACHE_MODES)
    v['lm_only'] = p.boolean('vllm_server_language_model_only')
    v['load_format'] = p.string('vllm_server_load_format', LOAD_FORMAT_RE, 'a vLLM load format',
                                'use auto, dummy, safetensors, ...', empty=False)
    v['eager'] = p.boolean('vllm_server_enforce_eager')
    v['kv_space'] = p.integer('vllm_server_cpu_kvcache_space_gb', low=1)
    v['connector'] = p.boolean('vllm_server_kv_connector')
    v['mq_timeout'] = p.number('vllm_server_lmcache_mq_timeout', low_exclusive=0,
                               fix='use null (LMCache default 300) or a positive number of seconds such as 30')
    p.number('vllm_server_prefetch_margin_gb', low_exclusive=-1e-9, null=False, fix='use a number of GiB >= 0, e.g. 5')
    for name in ('lmcache_server_venvs_keep', 'vllm_server_venvs_keep'):
        p.integer(name, low=1, null=False, fix='use 2 (the one serving and the one before) or more')
    v['timeouts'] = dict((name, p.integer(name, low=1, null=False)) for name in (
        'vllm_server_start_timeout', 'vllm_server_stop_timeout', 'vllm_server_restart_sec',
        'lmcache_server_start_timeout', 'lmcache_server_stop_timeout', 'lmcache_server_restart_sec',
        'vllm_server_probe_timeout'))
    return v


def lmcache_values(p, hybrid):
    """The clean values of the LMCache variables."""
    policy = p.get('lmcache_server_eviction_policy')
    if policy not in fleet_rules.EVICTION_POLICIES:
        fix = 'use one of %s' % ', '.join(fleet_rules.EVICTION_POLICIES)
        for option in fleet_rules.EVICTION_POLICIES:
            if isinstance(policy, str) and policy.lower() == option.lower():
                fix = 'use %s (lmcache server is case-sensitive)' % option
        p.error('lmcache_server_eviction_policy', policy, 'is not an eviction policy of lmcache server', fix)
    lm = {'l1': p.number('lmcache_server_l1_size_gb', low_exclusive=0, null=False, fix='use a number > 0, e.g. 1'),
          'multiple': p.integer('lmcache_server_chunk_multiple', low=1, null=False,
                                fix='use 1 (chunk size = N) or another whole number'),
          'explicit_chunk': p.integer('lmcache_server_chunk_size', low=1,
                                      fix='leave it null to derive it from N, or use a multiple of N'),
          'separate': p.boolean('lmcache_server_separate_object_groups')}
    if hybrid and lm['separate'] is False:
        p.error('lmcache_server_separate_object_groups', False,
                'turns separate object groups off, which hybrid models need (their Mamba layers get their own cache objects)',
                'use true')
    lm['workers'] = p.integer('lmcache_server_max_gpu_workers', low=1, fix='use null or at least the tensor parallel size')
    lm['log_level'] = p.choice('lmcache_server_log_level', LMCACHE_LOG_LEVELS)
    lm['track'] = p.boolean('lmcache_server_track_usage')
    lm['kv_timeout'] = p.number('lmcache_server_kv_request_timeout', low_exclusive=0, high=kv_pool.REQUEST_TIMEOUT_MAX,
                                null=False, fix='use seconds such as %g' % kv_pool.REQUEST_TIMEOUT_DEFAULT)
    lm['kv_prefill'] = p.number('lmcache_server_kv_prefill_tokens_per_second', low_exclusive=0,
                                fix='use the prefill tokens per second measured on this hardware (docs/kv-pools.md), '
                                    'or null')
    return lm


def _env_mapping(p, name, managed, role_label):
    value = p.get(name)
    if value in (None, ''):
        return {}
    if not isinstance(value, dict):
        p.error(name, value, 'is not a mapping', 'use a mapping of NAME: value')
        return {}
    out = {}
    for key, item in value.items():
        key = str(key)
        if not sq.ENV_NAME.match(key):
            p.error(name, value, 'has %s, which is not an environment variable name' % json.dumps(key),
                    'use names of letters, digits and _ that do not start with a digit')
            continue
        if key in SECRET_ENV:
            p.secret_error(name, 'sets %s, a secret' % key,
                           'put it in %s (written to a 0600 file, never logged)' % SECRET_ENV[key])
            continue
        if key in managed:
            p.error(name, value, 'sets %s, which the %s unit sets itself' % (key, role_label), 'use %s' % managed[key])
            continue
        if isinstance(item, (dict, list, tuple)) or item is None:
            p.error(name, value, 'gives %s a %s' % (key, 'null' if item is None else kind_name(item)),
                    'use a string or a number')
            continue
        out[key] = fmt_env_value(item)
    return out


def fmt_env_value(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return str(value)


def _extra_args(p, name, table, version_variable):
    """The checked items of extra_args: no managed setting, no file of flags, nothing the parser refuses."""
    value = p.get(name)
    if value in (None, ''):
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        p.error(name, value, 'is not a list', 'use a YAML list with one argument per item, e.g. ["--seed", "1"]')
        return []
    out = []
    for item in value:
        if isinstance(item, (dict, list, tuple)) or item is None:
            p.error(name, value, 'has an item that is not a string', 'use one string per argument')
            continue
        text = fmt_env_value(item)
        if _refused_extra_arg(p, name, value, text, table):
            continue
        out.append(text)
    if len(out) == len(value):
        # read as the parser reads the whole list (an item refused above may be a secret or a value's flag)
        _parser_checks(p, name, out, table[0], version_variable)
    return out


def _refused_extra_arg(p, name, value, text, table):
    """Record the error when one item of extra_args reaches a managed setting; True when refused."""
    dash = managed_flags.foreign_dash(text)
    if dash is not None:
        p.error(name, value, 'has %s, which starts with %s (U+%04X) instead of the ASCII "-" of a flag'
                % (json.dumps(text), json.dumps(dash), ord(dash)), 'write every flag with "-" (U+002D)')
        return True
    spelled = text.split('=', 1)[0]
    if managed_flags.file_option(text, table[0]) is not None:
        p.error(name, value, 'sets %s, which reads flags from a file that the plan and its rules never see' % spelled,
                'give each flag its own variable, or list it in %s' % name)
        return True
    hit = managed_flag(text, table)
    if hit is None:
        return False
    dest, dedicated = hit
    if dest in managed_flags.SECRET_DESTS:
        p.secret_error(name, 'sets %s' % spelled, 'use %s (written to a 0600 file, never logged)' % dedicated)
    else:
        p.error(name, value, 'sets %s, which the collection manages' % spelled, 'use %s instead' % dedicated)
    return True


def _parser_checks(p, name, args, table, version_variable):
    """What the pinned program's own parser would refuse in ``args`` (managed_flags.argument_problems).

    The table describes one release (``table['version']``): a host that installs that release gets
    an error per problem, before any host changes; a host that pins another release gets a warning
    (the table says nothing certain about that release's options), naming both versions."""
    problems = managed_flags.argument_problems(args, table)
    if not problems:
        return
    pinned = p.get(version_variable)
    same = package_spec.same_version(str(pinned), table['version'])
    for item, problem, fix in problems:
        if same:
            p.error(name, args, 'has %s, which %s' % (json.dumps(item), problem),
                    '%s; %s refuses the command line otherwise' % (fix, table['program']))
        else:
            p.warn(name, args, 'has %s, which %s (the table the collection checks with; this host pins %s=%s, '
                   'which is not checked)' % (json.dumps(item), problem, version_variable, pinned),
                   '%s, or check it against `%s --help` of %s' % (fix, table['program'], pinned))


def _check_exposure(p, secrets):
    vllm_host = p.get('vllm_server_host')
    if not addresses.is_loopback(vllm_host) and not secrets['vllm_server_api_key'] \
            and as_bool(p.get('vllm_server_allow_unauthenticated')) is not True:
        p.error('vllm_server_host', vllm_host, 'exposes vLLM beyond loopback without an API key',
                'set vllm_server_api_key (from a vault), or vllm_server_host=127.0.0.1, '
                'or vllm_server_allow_unauthenticated=true to accept an open endpoint')
    if as_bool(p.get('lmcache_server_allow_unauthenticated')) is not True:
        for name in ('lmcache_server_host', 'lmcache_server_http_host'):
            if not addresses.is_loopback(p.get(name)):
                p.error(name, p.get(name), 'exposes the LMCache server (which has no authentication) beyond loopback',
                        'use 127.0.0.1, or set lmcache_server_allow_unauthenticated=true when a remote vLLM must reach it '
                        'over a trusted network')


def _names_and_paths(p):
    before = len(p.errors)
    _names_and_paths_checks(p)
    p.ownership_errors = p.errors[before:]


def _names_and_paths_checks(p):
    for name in ('lmcache_server_service_name', 'vllm_server_service_name', 'vllm_server_lmcache_service_name'):
        problem = ownership.unit_name_problem(p.get(name))
        if problem:
            p.error(name, p.get(name), *problem)
            continue
        p.string(name, SERVICE_NAME_RE, 'a unit name', 'use letters, digits and _.:- (for example vllm)', empty=False)
    if p.get('lmcache_server_service_name') == p.get('vllm_server_service_name'):
        p.error('vllm_server_service_name', p.get('vllm_server_service_name'),
                'is also lmcache_server_service_name: the vLLM unit would overwrite the LMCache unit',
                'give the two roles different unit names (defaults: lmcache-server and vllm)')
    for name in ('lmcache_server_user', 'lmcache_server_group', 'vllm_server_user', 'vllm_server_group'):
        p.string(name, ACCOUNT_RE, 'a system account name', 'use lower-case letters, digits, _ and - (e.g. vllm)', empty=False)
        problem = ownership.account_name_problem(name.rsplit('_', 1)[1], p.get(name))
        if problem:
            p.error(name, p.get(name), *problem)
    for name in ('lmcache_server_venv', 'lmcache_server_home', 'lmcache_server_config_dir', 'lmcache_server_venvs_dir',
                 'vllm_server_venv', 'vllm_server_home', 'vllm_server_config_dir', 'vllm_server_hf_home',
                 'vllm_server_venvs_dir') + tuple(ownership.FLEET_PATHS):
        p.path(name)
    for name in ('lmcache_server_host', 'lmcache_server_http_host', 'vllm_server_host'):
        p.string(name, what='an address', empty=False, fix='use an IP address such as 127.0.0.1')
    p.string('vllm_server_lmcache_host', what='an address', empty=False, fix='use the LMCache server\'s address')
    p.integer('vllm_server_lmcache_port', 1, 65535, null=False, what='a TCP port')
