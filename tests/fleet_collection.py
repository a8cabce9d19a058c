# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Expose the repository as ``ansible_collections.lmcache_vllm.fleet`` for the tests (unit and real).

When the collection is not importable yet (no ``ANSIBLE_COLLECTIONS_PATH``/``PYTHONPATH``
pointing at a collections tree), a temporary tree with a symlink to the repository is
created and put first on ``sys.path``.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def expose_collection():
    try:
        importlib.import_module('ansible_collections.lmcache_vllm.fleet.plugins.module_utils.fleet_rules')
        return
    except ImportError:
        pass
    tmp = tempfile.mkdtemp(prefix='lmcache-vllm-fleet-collections-')
    atexit.register(shutil.rmtree, tmp, True)
    namespace = os.path.join(tmp, 'ansible_collections', 'lmcache_vllm')
    os.makedirs(namespace)
    os.symlink(REPO_ROOT, os.path.join(namespace, 'fleet'))
    sys.path.insert(0, tmp)
    for name in [mod for mod in sys.modules if mod == 'ansible_collections' or mod.startswith('ansible_collections.')]:
        del sys.modules[name]
