# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Expose the repository as ``ansible_collections.lmcache_vllm.fleet`` for the unit tests
(see ``tests/fleet_collection.py``)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fleet_collection import expose_collection

expose_collection()
