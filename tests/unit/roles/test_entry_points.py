# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every tasks_from entry point of a role has an argument spec, and the role's README names exactly those."""

from __future__ import annotations

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = ('lmcache_server', 'vllm_server')


def entry_points(role):
    return sorted(name[:-4] for name in os.listdir(os.path.join(ROOT, 'roles', role, 'tasks')) if name.endswith('.yml'))


@pytest.mark.parametrize('role', ROLES)
def test_every_entry_point_has_an_argument_spec(role):
    with open(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    assert sorted(specs) == entry_points(role)
    for name, spec in specs.items():
        assert spec['short_description'], name
        assert spec['options'] == specs['main']['options'], name


@pytest.mark.parametrize('role', ROLES)
def test_readme_names_the_entry_points(role):
    with open(os.path.join(ROOT, 'roles', role, 'README.md'), encoding='utf-8') as handle:
        text = handle.read()
    paragraph = re.search(r'Entry points[^\n]*`tasks_from`.*?(?:\n\n|$)', text, re.S).group(0)
    named = sorted(set(re.findall(r'`(\w+)`', paragraph)) - {'include_role', 'tasks_from'})
    assert named == sorted(set(entry_points(role)) - {'main'})


@pytest.mark.parametrize('role', ROLES)
def test_the_roles_defaults_pass_their_argument_spec(role):
    """Ansible validates the host's variables against the entry point's spec on every include_role: the defaults
    (null ones included) must pass it, as deploy.yml includes the entry points with them."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    with open(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
        options = yaml.safe_load(handle)['argument_specs']['main']['options']
    with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml'), encoding='utf-8') as handle:
        defaults = yaml.safe_load(handle)
    spec = {name: {key: value for key, value in option.items() if key not in ('description', 'version_added')}
            for name, option in options.items()}
    result = ArgumentSpecValidator(spec).validate(dict(defaults))
    assert result.error_messages == []


def test_the_internal_role_has_a_spec_per_entry_point_and_the_roles_include_it():
    """roles/common (internal): every tasks file is an entry point with its argument spec and named in the README; the two roles
    include its entry points and no longer read each other's files."""
    with open(os.path.join(ROOT, 'roles', 'common', 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    assert sorted(specs) == entry_points('common') == ['account', 'helper', 'package']
    for name, spec in specs.items():
        assert spec['short_description'].startswith('Internal'), name
        assert all(option.startswith('common_') and value['required'] for option, value in spec['options'].items())
    with open(os.path.join(ROOT, 'roles', 'common', 'README.md'), encoding='utf-8') as handle:
        readme = handle.read()
    assert all('`%s`' % name in readme for name in specs)
    for role in ROLES:
        with open(os.path.join(ROOT, 'roles', role, 'tasks', 'install.yml'), encoding='utf-8') as handle:
            tasks = yaml.safe_load(handle)
        included = [t['ansible.builtin.include_role']['tasks_from'] for t in tasks if 'ansible.builtin.include_role' in t]
        assert included == ['account', 'helper'], role
        with open(os.path.join(ROOT, 'roles', role, 'tasks', 'install.yml'), encoding='utf-8') as handle:
            assert '../' not in handle.read(), role
    # the KV store installs its server package and its exporter's through the one package-install task file
    for name, want in (('install.yml', ['package', 'account']), ('exporter.yml', ['package'])):
        with open(os.path.join(ROOT, 'roles', 'kv_store', 'tasks', name), encoding='utf-8') as handle:
            text = handle.read()
        assert re.findall(r'tasks_from: (\w+)', text) == want, name
        assert 'ansible.builtin.apt' not in text and 'dpkg-query' not in text, name
