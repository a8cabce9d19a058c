# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one filter of the fleet tables (the logic lives in module_utils/report/fleet_report.py).

``fleet_table`` builds the deploy summary, the status table or the GPU table of the hosts it is given,
from their host variables. Documentation: ``plugins/filter/fleet_table.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report


def fleet_table(hosts, kind, hostvars):
    """``{'rows', 'lines', ...}`` of the table ``kind`` for ``hosts``, read from ``hostvars``."""
    if kind not in fleet_report.INPUTS:
        raise AnsibleFilterError('fleet_table: unknown table %r; one of: %s' % (kind, ', '.join(sorted(fleet_report.INPUTS))))
    if isinstance(hosts, (str, dict)) or not hasattr(hosts, '__iter__'):
        raise AnsibleFilterError('fleet_table expects a list of host names')
    hosts = list(hosts)
    host_vars = {}
    for host in hosts:
        known = hostvars[host] if host in hostvars else {}
        host_vars[host] = dict((name, known[name]) for name in fleet_report.INPUTS[kind] if name in known)
    return fleet_report.fleet_table(kind, hosts, host_vars)


class FilterModule:
    """lmcache_vllm.fleet fleet tables."""

    def filters(self):
        return {'fleet_table': fleet_table}
