# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Expose the repository as ``ansible_collections.lmcache_vllm.fleet`` for the unit tests
(see ``tests/fleet_collection.py``)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fleet_collection import REPO_ROOT, expose_collection

expose_collection()


@pytest.fixture(scope='session')
def repo_script():
    """Load a script of the repository (e.g. ``benchmarks/fleet_benchmark.py``) as a module; its
    directory goes on ``sys.path`` as when the script runs, so that its sibling modules import."""
    def load(relpath):
        path = os.path.join(REPO_ROOT, relpath)
        if os.path.dirname(path) not in sys.path:
            sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load
