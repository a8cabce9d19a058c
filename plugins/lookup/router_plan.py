# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: router_plan
author: lmcache_vllm.fleet maintainers (@lmcache-vllm)
short_description: The plan of the current router host - its checks, routers, workers, argv and unit lines
description:
  - Collects every C(vllm_router_*) variable the current task sees and the ports of the host's own services
    (C(vllm_server_port), C(lmcache_server_port), C(lmcache_server_http_port), C(kv_store_port),
    C(kv_store_exporter_port)), fills the missing ones from the role C(vllm_router)'s C(defaults/main.yml), reads
    the workers' C(vllm_server_model), C(vllm_server_served_model_name), C(vllm_server_host), C(vllm_server_port)
    and C(ansible_host) from the inventory (the groups named by C(vllm_router_instances)), and returns the router
    host's plan (one mapping), computed on the control node.
  - The plan holds C(errors) (each naming the host, the variable and a valid value), C(instances) (per router its
    unit name and path, argv, unit lines, listen address, workers), C(venv), C(pip), C(ownership) and C(summary).
extends_documentation_fragment:
  - lmcache_vllm.fleet.lookup_terms
"""

EXAMPLES = r"""
- name: Plan the router host
  ansible.builtin.set_fact:
    vllm_router_plan: "{{ lookup('lmcache_vllm.fleet.router_plan') }}"
"""

RETURN = r"""
_raw:
  description: One mapping, the router host's plan (keys host, errors, values, instances, venv, pip, ownership, summary).
  type: list
  elements: dict
"""

from ansible_collections.lmcache_vllm.fleet.plugins.plugin_utils.fleet_lookup import FleetLookupBase


class LookupModule(FleetLookupBase):

    NAME = 'router_plan'

    def run(self, terms, variables=None, **kwargs):
        variables = self.task_variables(variables, kwargs)
        return [self.router_plan(variables.get('inventory_hostname'), variables, variables)]
