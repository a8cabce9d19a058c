# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's checks on the control node (pure), as the action ``fleet_check`` runs them for validate.yml, plan.yml
and deploy.yml's stage 3: the inventory names a fleet, the rollout's variables, then the plans of each kind of host
- serving (with one machine listed under two names and the L2 pools' agreement), KV store, router - in that order,
every problem of the first kind that has one at once; and the sentence of a fleet that passed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_hosts import (
    REACH_VARIABLES, duplicate_hosts, machine_entry)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.rollout import rollout_errors

# Each kind of host: the plan fact validate.yml sets and the words of its refusal.
KINDS = (
    ('serving', '__fleet_plan', None),
    ('store', '__kv_store_check', "in the stores' variables"),
    ('router', '__vllm_router_check', "in the routers' variables"),
)


def refusal(errors, what, spared='nothing was changed'):
    """The failure of a check that found ``errors`` (every one, in validate.yml's words), or None without any."""
    if not errors:
        return None
    return '%d problem(s) %s, %s: %s' % (len(errors), what, spared, ' | '.join(errors))


def fleet_problem(pattern, members, hosts_with_model, groups):
    """The refusal of an inventory that names no fleet, or has a host with a model outside it; None when fine.

    ``pattern``: fleet_hosts (default vllm_hosts); ``members``: the hosts it matches; ``hosts_with_model``: every
    inventory host that sets vllm_server_model; ``groups``: the inventory's group names."""
    if not members:
        named = [name for name in groups if name not in ('all', 'ungrouped')]
        return ('no host matches fleet_hosts=%s (groups in this inventory: %s); put the GPU hosts in group vllm_hosts '
                'or set fleet_hosts to their group' % (pattern, ', '.join(named) or 'none'))
    strays = [host for host in hosts_with_model if host not in members]
    if strays:
        return ('host(s) %s set vllm_server_model but are not in fleet_hosts=%s, so nothing would be deployed there; '
                'add them to that group or set fleet_hosts to a pattern that includes them' % (', '.join(strays), pattern))
    return None


def rollout_problem(values):
    """The refusal of wrong rollout variables (``{name: effective value}``), or None."""
    return refusal(rollout_errors(values), "in the rollout's variables")


def serving_errors(hosts, hostvars):
    """Every serving host's plan errors, the machines several hosts reach and the pools whose hosts disagree."""
    plans = [hostvars[host]['__fleet_plan'] for host in hosts]
    entries = [machine_entry(host, dict((name, hostvars[host][name]) for name, _key in REACH_VARIABLES
                                        if name in hostvars[host])) for host in hosts]
    return [error for plan in plans for error in plan['errors']] + duplicate_hosts(entries) + kv_pool.plans_errors(plans)


def kind_problems(kinds, hostvars, what='in the inventory', spared='nothing was changed'):
    """(the refusal of the first kind with a problem or None, every warning of the serving plans once)."""
    serving = list(kinds.get('serving') or [])
    warnings = list(dict.fromkeys(w for host in serving for w in hostvars[host]['__fleet_plan']['warnings']))
    for kind, fact, words in KINDS:
        hosts = list(kinds.get(kind) or [])
        if not hosts:
            continue
        if kind == 'serving':
            errors = serving_errors(hosts, hostvars)
        else:
            errors = [error for host in hosts for error in hostvars[host][fact]['errors']]
        if errors:
            return refusal(errors, words or what, spared), warnings
    return None, warnings


def valid_summary(hosts, hostvars, stores=()):
    """The sentence of a valid fleet: how many hosts, inventory groups, L2 pools and KV stores were checked."""
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
