# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes of the collection's action plugins that run on the control node only (fleet_plan, probe_group)."""

from __future__ import annotations


class ModuleDocFragment:
    """On the control node only: no host contacted, no diff (each module says what check mode does)."""

    DOCUMENTATION = r'''
attributes:
  diff_mode:
    support: none
    description: No diff is shown.
  action:
    support: full
    description: Runs as an action plugin on the control node.
  platform:
    support: full
    platforms: posix
    description: The control node.
'''
