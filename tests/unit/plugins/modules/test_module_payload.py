# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each host module ships: the collection's module_utils files Ansible's module packer puts into its payload.

The packer reads a module's imports with ``ast`` (it never runs them) and follows every
``ansible_collections.lmcache_vllm.fleet.plugins.module_utils`` import, at any depth and also inside functions, to
the file that defines it (``a.b`` is ``a/b.py``, else ``a.py`` with ``b`` a name in it), with the ``__init__.py`` of
every package on the way. This test reads the same way and holds each module to a bound, so that host modules ship
host code only: the plan, the lookups' and filters' helpers, the KV store's and the router's configuration stay on
the controller.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins'))
MODULES = os.path.join(ROOT, 'modules')
MODULE_UTILS = os.path.join(ROOT, 'module_utils')
PREFIX = 'ansible_collections.lmcache_vllm.fleet.plugins.module_utils'

# The most module_utils files each module may ship (measured, then held; the empty ``__init__.py`` of each package
# on the way is shipped too and not counted). A new module needs a row here.
BOUNDS = {
    # _probe/confirm.py: the option expected; _probe/mamba.py, cli/mamba_clamp.py: M; _probe/readback.py,
    # block_size/block_size_readback.py, status/prometheus_text.py: the option readback
    'block_size_probe': 25,
    'compile_cache_archive': 1,
    'fleet_ownership': 8,
    'fleet_check': 1,  # shared/action_only.py: the module side of an action plugin
    'fleet_claim': 1,
    'fleet_plan': 1,
    'gpu_facts': 3,
    'probe_group': 1,
    'router_worker': 2,
    'service_info': 6,
    'warm_start': 1,
}
# What runs on the controller only (the plan and its validation, the KV store's configuration, the fleet report,
# the router's configuration, the status's explanation of what service_info read): no host module may ship one of
# these packages or files.
CONTROLLER_ONLY_PACKAGES = ('plan', 'kv', 'report')
CONTROLLER_ONLY = (
    'router/router_config.py', 'router/router_drain.py', 'router/router_monitoring.py', 'router/router_status.py',
    'router/router_units.py', 'status/service_status.py',
)


def _file_of(dotted):
    """The module_utils file that ``dotted`` (a full import name) names, or None for a name inside a file."""
    parts = dotted[len(PREFIX):].strip('.').split('.') if dotted != PREFIX else []
    path = os.path.join(MODULE_UTILS, *parts)
    if os.path.isfile(path + '.py'):
        return path + '.py'
    if parts and os.path.isfile(os.path.join(path, '__init__.py')):
        return os.path.join(path, '__init__.py')
    return None


def _imported(path):
    """The module_utils files ``path`` imports (every import statement, as the packer reads them)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update('%s.%s' % (node.module, alias.name) for alias in node.names)
    files = set()
    for name in names:
        if name.startswith(PREFIX):
            found = _file_of(name)
            if found:
                files.add(found)
    return files


def _packages(path):
    """The ``__init__.py`` files of the packages inside module_utils that hold ``path``."""
    found, folder = [], os.path.dirname(path)
    while folder != MODULE_UTILS and folder.startswith(MODULE_UTILS):
        init = os.path.join(folder, '__init__.py')
        if os.path.isfile(init):
            found.append(init)
        folder = os.path.dirname(folder)
    return found


def payload(module_path):
    """The module_utils files (relative to module_utils/) the packer ships with ``module_path``."""
    seen, todo = set(), [module_path]
    while todo:
        for found in _imported(todo.pop()):
            for path in [found] + _packages(found):
                if path not in seen:
                    seen.add(path)
                    todo.append(path)
    return sorted(os.path.relpath(path, MODULE_UTILS) for path in seen)


def _modules():
    return sorted(name[:-3] for name in os.listdir(MODULES) if name.endswith('.py') and not name.startswith('_'))


def test_every_module_has_a_bound():
    assert sorted(BOUNDS) == _modules()


def test_controller_only_files_exist():
    missing = [name for name in CONTROLLER_ONLY if not os.path.isfile(os.path.join(MODULE_UTILS, name))]
    missing += [name for name in CONTROLLER_ONLY_PACKAGES if not os.path.isfile(os.path.join(MODULE_UTILS, name,
                                                                                             '__init__.py'))]
    assert not missing, 'renamed or moved? update CONTROLLER_ONLY: %s' % missing


@pytest.mark.parametrize('module', _modules())
def test_a_module_ships_host_code_only(module):
    files = payload(os.path.join(MODULES, module + '.py'))
    controller = sorted(f for f in files if f in CONTROLLER_ONLY or f.split('/')[0] in CONTROLLER_ONLY_PACKAGES)
    assert not controller, '%s ships controller-only module_utils: %s' % (module, controller)
    code = [f for f in files if os.path.getsize(os.path.join(MODULE_UTILS, f)) > 0]
    assert len(code) <= BOUNDS[module], '%s ships %d module_utils files (bound %d): %s' % (
        module, len(code), BOUNDS[module], code)


def test_the_reader_follows_what_the_packer_follows():
    # service_info reads a host through service_gather, which reaches the GPU reader (and through it the hardware
    # table) and, for the address of a wildcard bind, only the address helper; the explanation stays behind.
    files = payload(os.path.join(MODULES, 'service_info.py'))
    assert {'status/service_gather.py', 'status/__init__.py', 'shared/addresses.py', 'shared/__init__.py',
            'block_size/gpu_facts.py', 'block_size/hardware.py', 'block_size/__init__.py'} <= set(files)
    assert 'status/service_status.py' not in files and '_probe/cache.py' not in files
    assert payload(os.path.join(MODULE_UTILS, 'shared', 'addresses.py')) == []
