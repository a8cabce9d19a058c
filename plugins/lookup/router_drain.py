# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: router_drain
author: lmcache_vllm.fleet maintainers (@lmcache-vllm)
short_description: The routers the current serving host is a worker of (drained around its restart)
description:
  - Plans every host of the router group (option O(routers), default C(routers)) from the inventory, as the lookup
    C(lmcache_vllm.fleet.router_plan) plans it on that host, and returns the router instances whose workers include
    the current host (C(inventory_hostname)), computed on the control node.
  - Each entry holds C(router_host) (where the administration call runs), C(router) (the unit), C(router_url) (the
    router's address on its own host), C(worker_url) (the host as the router knows it) and C(wait_idle) (seconds to
    wait for the host's running requests after it left every router; set on the last entry only).
  - A host no router routes to, or an inventory without routers, gives an empty list.
extends_documentation_fragment:
  - lmcache_vllm.fleet.lookup_terms
options:
  routers:
    description: The inventory group of the router hosts (C(fleet_routers) of the playbooks).
    type: str
    default: routers
"""

EXAMPLES = r"""
- name: Find the routers of this host
  ansible.builtin.set_fact:
    routers_of_host: "{{ lookup('lmcache_vllm.fleet.router_drain', routers=fleet_routers | default('routers')) }}"
"""

RETURN = r"""
_raw:
  description: One list of entries (router_host, router, router_url, worker_url, wait_idle).
  type: list
  elements: list
"""

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_drain
from ansible_collections.lmcache_vllm.fleet.plugins.plugin_utils.fleet_lookup import FleetLookupBase


class LookupModule(FleetLookupBase):

    NAME = 'router_drain'

    def run(self, terms, variables=None, **kwargs):
        variables = self.task_variables(variables, kwargs)
        hostvars = variables.get('hostvars') or {}
        plans = [self.router_plan(router, hostvars.get(router) or {}, variables)
                 for router in (variables.get('groups') or {}).get(self.get_option('routers')) or []]
        return [router_drain.targets(variables.get('inventory_hostname'), plans)]
