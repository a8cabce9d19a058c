# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet-wide checks of the inventory (the logic lives in module_utils/plan/fleet_hosts.py).

``fleet_duplicate_hosts`` names the inventory hosts that reach one machine; ``fleet_valid_summary`` says what a
validation that found nothing wrong checked; ``fleet_unreachable_summary`` names the hosts a deploy could not
reach and the ``--limit`` that leaves them out; ``fleet_rollout_errors`` checks the deploy's rollout variables
(module_utils/plan/rollout.py). Documentation: ``plugins/filter/<name>.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_hosts import (
    REACH_VARIABLES, duplicate_hosts, machine_entry)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.rollout import rollout_errors


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


def fleet_valid_summary(hosts, hostvars, stores=None):
    """The sentence of a valid fleet: how many hosts, inventory groups, L2 pools and KV stores were checked.

    ``hosts``: the fleet's host names; ``hostvars``: the play's hostvars (each host's ``group_names`` and the
    pool of its plan, ``__fleet_plan.summary.kv_pool``); ``stores``: the KV store hosts checked."""
    if isinstance(hosts, (str, dict)) or not all(isinstance(h, str) for h in hosts or []):
        raise AnsibleFilterError('fleet_valid_summary expects a list of host names')
    hosts, stores = list(hosts or []), list(stores or [])
    groups, pools = set(), set()
    for host in hosts:
        variables = hostvars[host]
        groups.update(g for g in (variables.get('group_names') or []) if g not in ('all', 'ungrouped'))
        pool = ((variables.get('__fleet_plan') or {}).get('summary') or {}).get('kv_pool')
        if pool:
            pools.add(str(pool))
    named_pools = ' (%s)' % ', '.join(sorted(pools)) if pools else ''
    return ('The fleet is valid: %d host(s) in %d group(s) (%s), %d L2 pool(s)%s and %d KV store(s) checked; '
            'no host was contacted.' % (len(hosts), len(groups), ', '.join(sorted(groups)) or 'none', len(pools),
                                        named_pools, len(stores)))


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


def fleet_rollout_errors(values):
    """One message per wrong rollout variable (``{name: effective value}``)."""
    if not isinstance(values, dict):
        raise AnsibleFilterError('fleet_rollout_errors expects a mapping of the rollout variables')
    return rollout_errors(values)


class FilterModule:
    """lmcache_vllm.fleet inventory checks."""

    def filters(self):
        return {'fleet_duplicate_hosts': fleet_duplicate_hosts, 'fleet_valid_summary': fleet_valid_summary,
                'fleet_unreachable_summary': fleet_unreachable_summary, 'fleet_rollout_errors': fleet_rollout_errors}
