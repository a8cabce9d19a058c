# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet-wide checks of the inventory (the logic lives in module_utils/fleet_hosts.py).

``fleet_duplicate_hosts`` names the inventory hosts that reach one machine. Documentation:
``plugins/filter/fleet_duplicate_hosts.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.fleet_hosts import duplicate_hosts


def fleet_duplicate_hosts(entries):
    """One error per machine that several inventory hosts reach."""
    if entries is None:
        return []
    if not isinstance(entries, (list, tuple)) or not all(isinstance(e, dict) for e in entries):
        raise AnsibleFilterError('fleet_duplicate_hosts expects a list of dictionaries')
    return duplicate_hosts([dict(e) for e in entries])


class FilterModule:
    """lmcache_vllm.fleet inventory checks."""

    def filters(self):
        return {'fleet_duplicate_hosts': fleet_duplicate_hosts}
