# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every entry point of every role has an argument spec: each tasks file that a playbook, a role or a molecule
scenario enters with ``include_role`` / ``import_role`` and ``tasks_from`` (and ``main``) has its entry in the role's
``meta/argument_specs.yml``, so that Ansible checks the role's variables on every way into the role."""

from __future__ import annotations

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SEARCHED = ('playbooks', 'roles', os.path.join('extensions', 'molecule'))
COLLECTION = 'lmcache_vllm.fleet.'
INCLUDES = tuple(prefix + action for action in ('include_role', 'import_role')
                 for prefix in ('', 'ansible.builtin.', 'ansible.legacy.'))


class _Loader(yaml.SafeLoader):
    """safe_load that reads any tag (!vault, !unsafe) as the plain value under it."""


def _untagged(loader, _suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_Loader.add_multi_constructor('!', _untagged)


def _yaml_files():
    for top in SEARCHED:
        for folder, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith(('.yml', '.yaml')):
                    yield os.path.join(folder, name)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def entry_points():
    """``{(role, tasks_from): [files that enter it]}`` over playbooks/, roles/ and extensions/molecule/."""
    found = {}
    for path in _yaml_files():
        with open(path, encoding='utf-8') as handle:
            documents = list(yaml.load_all(handle, Loader=_Loader))
        for task in (t for document in documents for t in _walk(document)):
            for action in INCLUDES:
                args = task.get(action)
                if isinstance(args, dict) and args.get('tasks_from'):
                    role = str(args.get('name') or args.get('role'))
                    key = (role[len(COLLECTION):] if role.startswith(COLLECTION) else role, str(args['tasks_from']))
                    found.setdefault(key, []).append(os.path.relpath(path, ROOT))
    return found


def _specs(role):
    with open(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)['argument_specs']


def _roles():
    return sorted(name for name in os.listdir(os.path.join(ROOT, 'roles'))
                  if os.path.isdir(os.path.join(ROOT, 'roles', name, 'tasks')))


def test_the_walk_finds_the_entry_points():
    found = entry_points()
    assert ('vllm_server', 'probe') in found and ('common', 'account') in found and ('kv_store', 'remove') in found
    assert 'playbooks/remove.yml' in found[('kv_store', 'remove')]
    assert 'extensions/molecule/default/converged_check.yml' in found[('vllm_server', 'probe')]


def test_entry_points_are_named_plainly():
    """A templated role or tasks file could not be checked here (nor read by a person)."""
    templated = sorted(key for key in entry_points() if '{{' in key[0] or '{{' in key[1])
    assert not templated


def test_every_entry_point_has_an_argument_spec():
    missing = ['%s: tasks_from %s (entered from %s)' % (role, name, ', '.join(sorted(set(files))))
               for (role, name), files in sorted(entry_points().items())
               if not os.path.isdir(os.path.join(ROOT, 'roles', role)) or name not in _specs(role)]
    assert not missing, 'entry points without an argument spec in meta/argument_specs.yml: %s' % missing


@pytest.mark.parametrize('role', _roles())
def test_every_role_has_a_spec_for_main_or_is_internal(role):
    specs = _specs(role)
    tasks = os.listdir(os.path.join(ROOT, 'roles', role, 'tasks'))
    assert ('main' in specs) == ('main.yml' in tasks), role
    for name, spec in specs.items():
        assert name + '.yml' in tasks, '%s: a spec for %s, which has no tasks file' % (role, name)
        assert spec.get('short_description'), (role, name)
        assert all(option.startswith(role + '_') for option in spec.get('options') or {}), (role, name)


@pytest.mark.parametrize('role', ['kv_store', 'vllm_router'])
def test_the_names_and_paths_entry_points_hold_what_their_plan_checks_first(role):
    """ownership and remove read the names and paths only (a wrong value of anything else never keeps what the
    collection created from being removed); plan reads every variable of main."""
    specs = _specs(role)
    assert specs['plan']['options'] == specs['main']['options']
    for name in ('ownership', 'remove'):
        options = specs[name]['options']
        assert sorted(options) == sorted(o for o in specs['main']['options'] if o.endswith(
            ('_service_name', '_service_prefix', '_user', '_group', '_home', '_dir', '_manifest_path'))), name
        assert all(options[o] == specs['main']['options'][o] for o in options), name


@pytest.mark.parametrize('role', [r for r in _roles() if os.path.isfile(os.path.join(ROOT, 'roles', r, 'defaults', 'main.yml'))])
def test_the_roles_defaults_pass_every_entry_points_spec(role):
    """Ansible validates the variables against the entry point's spec on every include_role: the role's defaults
    (null ones included) pass each of them."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml'), encoding='utf-8') as handle:
        defaults = yaml.safe_load(handle)
    for name, spec in _specs(role).items():
        options = {option: {key: value for key, value in value.items() if key not in ('description', 'version_added')}
                   for option, value in (spec.get('options') or {}).items()}
        result = ArgumentSpecValidator(options).validate({k: v for k, v in defaults.items() if k in options})
        assert result.error_messages == [], (role, name)
