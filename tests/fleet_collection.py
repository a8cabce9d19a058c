# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way to expose this checkout as ``ansible_collections.lmcache_vllm.fleet``.

Used by the tests (unit, playbooks, real, gpu) and the benchmarks; standard library only, no pytest.

``collections_tree(root)``
    ``<root>/ansible_collections/lmcache_vllm/fleet`` -> the checkout (a symlink, made once);
    returns ``root``: a collections path for ``ansible-playbook``.
``expose_collection()``
    makes the collection importable in this Python: when it is not importable yet (no
    ``PYTHONPATH`` pointing at a collections tree), a temporary tree is made and put first on
    ``sys.path``.
``ansible_env(collections, local=True)``
    the environment of an ``ansible-playbook`` run that finds this checkout first (then the
    collections the environment already names, for connection plugins such as containers.podman).
``ansible_playbook_argv()``
    the ``ansible-playbook`` of this Python (beside it, else ``python -m ansible.cli.playbook``,
    else the one on PATH).
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_COLLECTIONS_PATHS = [os.path.expanduser('~/.ansible/collections'), '/usr/share/ansible/collections']


def collections_tree(root):
    """``<root>/ansible_collections/lmcache_vllm/fleet`` -> the checkout; returns ``root`` as a string."""
    root = str(root)
    link = os.path.join(root, 'ansible_collections', 'lmcache_vllm', 'fleet')
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(REPO_ROOT, link)
    return root


def expose_collection():
    """Make ``ansible_collections.lmcache_vllm.fleet`` importable in this Python."""
    try:
        importlib.import_module('ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules')
        return
    except ImportError:
        pass
    tmp = tempfile.mkdtemp(prefix='lmcache-vllm-fleet-collections-')
    atexit.register(shutil.rmtree, tmp, True)
    sys.path.insert(0, collections_tree(tmp))
    for name in [mod for mod in sys.modules if mod == 'ansible_collections' or mod.startswith('ansible_collections.')]:
        del sys.modules[name]


def ansible_env(collections, local=True, base=None):
    """Environment for ansible-playbook with ``collections`` (a :func:`collections_tree`) first.

    ``local``: the play runs on localhost with this Python as the module interpreter."""
    env = dict(os.environ if base is None else base)
    known = [p for p in env.get('ANSIBLE_COLLECTIONS_PATH', '').split(os.pathsep) if p] or DEFAULT_COLLECTIONS_PATHS
    env.update(ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(collections)] + known), ANSIBLE_NOCOLOR='1',
               ANSIBLE_FORCE_COLOR='false', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0',
               ANSIBLE_RETRY_FILES_ENABLED='false',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable if local else 'auto_silent')
    env.setdefault('LC_ALL', 'C.UTF-8')
    return env


def ansible_playbook_argv():
    """argv prefix that runs ansible-playbook with this Python's ansible-core where it has one."""
    beside = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    if os.access(beside, os.X_OK):
        return [beside]
    try:
        importlib.import_module('ansible.cli.playbook')
        return [sys.executable, '-m', 'ansible.cli.playbook']
    except ImportError:
        pass
    on_path = shutil.which('ansible-playbook')
    if on_path:
        return [on_path]
    tool_venv = os.path.join(REPO_ROOT, '.venv', 'bin', 'ansible-playbook')
    if os.access(tool_venv, os.X_OK):
        return [tool_venv]
    raise SystemExit('no ansible-playbook beside %s, on PATH or in %s/.venv/bin; run `bash scripts/setup-tools.sh` '
                     '(or `make setup`) first' % (sys.executable, REPO_ROOT))
