# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes of the collection's read-only modules (gpu_facts, service_info)."""

from __future__ import annotations


class ModuleDocFragment:
    """Read-only: check mode runs the same way, there is no diff."""

    DOCUMENTATION = r'''
attributes:
  check_mode:
    support: full
    description: Only reads; check mode runs it the same way.
  diff_mode:
    support: none
    description: Nothing changes, there is no diff.
'''
