# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's lookups share: the task's variables with the options set, and a router host's plan from
the inventory (the lookups ``router_plan`` and ``router_drain``)."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_hosts import template_error
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router.router_config import plan_from_inventory


class FleetLookupBase(LookupBase):
    """A lookup that plans from the task's variables (``NAME``: the lookup's name in its errors)."""

    NAME = 'lookup'

    def task_variables(self, variables, kwargs):
        """The task's variables, after setting the options from them and from the call's keywords."""
        if variables is None:
            raise AnsibleLookupError('%s needs the task variables' % self.NAME)
        self.set_options(var_options=variables, direct=kwargs)
        return variables

    def router_plan(self, host, host_variables, variables):
        """The plan of router host ``host`` (its variables ``host_variables``), its workers from the inventory."""
        return plan_from_inventory(host, host_variables, variables.get('hostvars') or {},
                                   variables.get('groups') or {}, self._templar.template, template_error, AnsibleError)
