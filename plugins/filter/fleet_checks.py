# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet-wide checks of the inventory (the logic lives in module_utils/fleet_hosts.py).

``fleet_duplicate_hosts`` names the inventory hosts that reach one machine. Documentation:
``plugins/filter/fleet_duplicate_hosts.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.fleet_hosts import (
    REACH_VARIABLES, duplicate_hosts, machine_entry)


def fleet_duplicate_hosts(entries, hostvars=None):
    """One error per machine that several inventory hosts reach.

    ``entries``: dicts (``host``, ``address``, ``port``, ``connection``), or host names when ``hostvars``
    is given (each host's ``ansible_host``, ``ansible_port`` and ``ansible_connection`` are read there)."""
    if entries is None:
        return []
    if hostvars is not None:
        if isinstance(entries, (str, dict)) or not all(isinstance(e, str) for e in entries):
            raise AnsibleFilterError('fleet_duplicate_hosts with hostvars expects a list of host names')
        entries = [machine_entry(host, dict((name, hostvars[host][name]) for name, _key in REACH_VARIABLES
                                            if name in hostvars[host])) for host in entries]
    if not isinstance(entries, (list, tuple)) or not all(isinstance(e, dict) for e in entries):
        raise AnsibleFilterError('fleet_duplicate_hosts expects a list of dictionaries')
    return duplicate_hosts([dict(e) for e in entries])


class FilterModule:
    """lmcache_vllm.fleet inventory checks."""

    def filters(self):
        return {'fleet_duplicate_hosts': fleet_duplicate_hosts}
