# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the LMCache L2 pools (``plugins/module_utils/kv/kv_pool.py``).

Documentation of each filter lives in ``plugins/filter/<filter name>.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool, kv_store_config, kv_store_status
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_p2p, kv_pool_breakeven


def kv_pool_values(plans):
    """``[{host, pool, value_bytes}]`` of the host plans in a pool whose largest value is known (the stores' sizing)."""
    if not isinstance(plans, list):
        raise AnsibleFilterError('kv_pool_values expects a list of host plans (lookup lmcache_vllm.fleet.host_plan)')
    return kv_pool.pool_values(plans)


def kv_pool_break_even_rules(endpoints):
    """The Prometheus rules file of the pooled hosts' break-even series (playbooks/monitoring.yml)."""
    if not isinstance(endpoints, list):
        raise AnsibleFilterError('kv_pool_break_even_rules expects a list of host endpoints, each with host and kv_pool')
    return kv_pool_breakeven.rules_file(endpoints)


def kv_pool_line(row):
    """One line of the plan for a host in an L2 pool (a row of the plan's summary)."""
    if not isinstance(row, dict):
        raise AnsibleFilterError('kv_pool_line expects a row of the plan (the host plan\'s summary)')
    if row.get('kv_transport') == 'p2p':
        return 'pool %s: %s -> P2P (no store), coordinator %s; %s; %s' % (
            row.get('kv_pool'), row.get('host'), row.get('kv_coordinator'), kv_p2p.IDLE_COST, kv_pool.sizing_text(row))
    return 'pool %s: %s -> store %s, key prefix %s; %s' % (
        row.get('kv_pool'), row.get('host'), row.get('kv_store') or '-', row.get('kv_prefix') or '(after N is known)',
        kv_pool.sizing_text(row))


def kv_store_status_row(info_result, host, active, exporter=None):
    """The status row of a store host, from the registered result of its INFO command, its unit state and its
    exporter unit's state (None: no exporter). An unreachable host's result (of any task) gives its row."""
    result = info_result if isinstance(info_result, dict) else {}
    if result.get('unreachable'):
        return kv_store_status.unreachable_row(host, result.get('msg'))
    error = None
    if result.get('failed') or result.get('rc', 0) != 0:
        error = (result.get('stderr') or result.get('msg') or 'failed').strip()[:200]
    text = result.get('stdout') or ''
    if text.startswith(('NOAUTH', 'WRONGPASS', 'NOPERM', 'ERR')):
        error = text.strip()[:200]
    return kv_store_status.status_row(host, active, text, error, exporter=exporter)


def kv_store_status_line(row):
    """One printed line of a store's status row."""
    return kv_store_status.status_line(row)


def kv_store_cluster_create(plans):
    """The cluster's create command (argv, env, the host that runs it, errors) from the store plans of the play."""
    if not isinstance(plans, list):
        raise AnsibleFilterError('kv_store_cluster_create expects a list of store plans (lookup '
                                 'lmcache_vllm.fleet.kv_store_plan)')
    return kv_store_config.cluster_create(plans)


def kv_store_cluster_problem(text, nodes):
    """Why a node's CLUSTER INFO does not show a formed cluster of ``nodes`` primaries, or ''."""
    return kv_store_config.cluster_problem(text, nodes)


class FilterModule(object):

    def filters(self):
        return {'kv_pool_line': kv_pool_line, 'kv_pool_values': kv_pool_values,
                'kv_pool_break_even_rules': kv_pool_break_even_rules,
                'kv_store_status_row': kv_store_status_row, 'kv_store_status_line': kv_store_status_line,
                'kv_store_cluster_create': kv_store_cluster_create, 'kv_store_cluster_problem': kv_store_cluster_problem}
