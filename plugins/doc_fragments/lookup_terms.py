# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The positional terms of the collection's planning lookups, which read the task's variables instead."""

from __future__ import annotations


class ModuleDocFragment:
    """The lookups' unused terms."""

    DOCUMENTATION = r'''
options:
  _terms:
    description: Not used.
    type: list
    elements: str
    required: false
'''
