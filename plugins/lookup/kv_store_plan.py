# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: kv_store_plan
author: lmcache_vllm.fleet maintainers (@lmcache-vllm)
short_description: The plan of the current KV store host - its checks, server, configuration, ACL and unit lines
description:
  - Collects every C(kv_store_*) variable the current task sees, fills the missing ones from the role
    C(kv_store)'s C(defaults/main.yml) and returns the store host's plan (one mapping), computed on the control
    node.
  - The plan holds C(errors) (each naming the host, the variable and a valid value), C(server) (Valkey where
    packaged, Redis otherwise), C(config_lines), C(acl_lines) (the password only as its SHA-256), C(unit_lines),
    C(health) (the PING command and, in C(health.stdin), the password it reads with C(--askpass)), C(cluster) (with
    C(kv_store_cluster), the
    cluster administrator's CLI and C(CLUSTER INFO), its password in C(cluster.stdin); else null), C(exporter) (with
    C(kv_store_exporter) on, the exporter's unit lines, command, environment file lines with its password, ACL
    line) and C(summary); register it with C(no_log).
extends_documentation_fragment:
  - lmcache_vllm.fleet.lookup_terms
options:
  apt_policy:
    description:
      - The output of C(apt-cache policy valkey-server redis-server) on the host; the server is chosen from it.
      - Not given, the variables only are checked (the server is then the preferred one, Valkey); given but
        empty, no server package is available.
    type: str
  pool_values:
    description:
      - The largest values the serving hosts of the store's pools write, C([{host, pool, value_bytes}]) (filter
        C(lmcache_vllm.fleet.kv_pool_values) of their host plans); the store's C(proto-max-bulk-len), client buffers and
        C(maxmemory) (C(kv_store_maxmemory_keys)) are sized from the largest.
      - Not given, only C(kv_store_max_value_bytes) sizes them.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Plan the store host
  ansible.builtin.set_fact:
    kv_plan: "{{ lookup('lmcache_vllm.fleet.kv_store_plan', apt_policy=apt_out.stdout) }}"
  no_log: true
"""

RETURN = r"""
_raw:
  description: One mapping, the store host's plan (keys host, errors, warnings, server, config_lines, acl_lines, unit_lines, health, cluster, summary).
  type: list
  elements: dict
"""

from ansible_collections.lmcache_vllm.fleet.plugins.plugin_utils.fleet_lookup import FleetLookupBase
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv.kv_store_config import (
    SERVING_HOMES, VARIABLE_RE, parse_apt_policy, plan_store)


class LookupModule(FleetLookupBase):

    NAME = 'kv_store_plan'

    def run(self, terms, variables=None, **kwargs):
        variables = self.task_variables(variables, kwargs)
        names = sorted(name for name in variables if VARIABLE_RE.match(name) or name == 'ansible_host'
                       or name in SERVING_HOMES)
        values = self._templar.template([variables[name] for name in names])
        policy = self.get_option('apt_policy')
        candidates = parse_apt_policy(policy) if policy is not None else None
        settings = dict(zip(names, values))
        groups = variables.get('groups') or {}
        fleet = variables.get('fleet_hosts') if variables.get('fleet_hosts') in groups else 'vllm_hosts'
        settings['_serving_host'] = variables.get('inventory_hostname') in (groups.get(fleet) or [])
        return [plan_store(variables.get('inventory_hostname'), settings, candidates,
                           pool_values=self.get_option('pool_values'))]
