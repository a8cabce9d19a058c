# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-wide check of a deploy's stage 1b: ``fleet_unreachable_summary`` names the hosts a deploy could not
reach and the ``--limit`` that leaves them out. The checks of the inventory itself are the action ``fleet_check``'s
(module_utils/plan/fleet_check.py). Documentation: ``plugins/filter/<name>.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def _first_line(text, limit=160):
    lines = str(text or '').strip().splitlines()
    return (lines[0].strip() if lines else 'unreachable')[:limit]


def fleet_unreachable_summary(hosts, hostvars, result='__fleet_reach', limit=''):
    """The refusal of a run some of whose hosts could not be reached, or '' when every host answered.

    ``hosts``: the play's hosts; each one's registered ``result`` (in ``hostvars``) is unreachable or failed
    when its connection did not work. ``limit``: the run's ``--limit`` (empty: none), for the one that proceeds
    without them."""
    if isinstance(hosts, (str, dict)) or not all(isinstance(h, str) for h in hosts or []):
        raise AnsibleFilterError('fleet_unreachable_summary expects a list of host names')
    lost = []
    for host in hosts or []:
        reach = hostvars[host].get(result) or {}
        if reach.get('unreachable') or reach.get('failed'):
            lost.append((host, _first_line(reach.get('msg'))))
    if not lost:
        return ''
    proceed = '%s:%s' % (str(limit or 'all'), ':'.join('!' + host for host, _why in lost))
    return ('%d host(s) could not be reached, so nothing was changed on any host: %s. Fix the connection (ssh, '
            'ansible_host, the host is up) and run again, or deploy the others without them: --limit \'%s\''
            % (len(lost), '; '.join('%s (%s)' % item for item in lost), proceed))


class FilterModule:
    """lmcache_vllm.fleet inventory checks."""

    def filters(self):
        return {'fleet_unreachable_summary': fleet_unreachable_summary}
