# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of lmcache_vllm.fleet.probe_group: deploy.yml's probe groups, computed on the control node.

Documented in plugins/modules/probe_group.py. ``step: form`` forms the groups of the play's hosts from their inputs of
N (``hardware_groups.form_groups``; run it once); ``step: take`` gives this host what it takes from its group's canary,
N and M (``hardware_groups.take_from_canary``). Nothing is contacted; the results are facts.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import hardware_groups
from ansible_collections.lmcache_vllm.fleet.plugins.modules.probe_group import ARGUMENT_SPEC

# The facts of a host that the take step reads (its own and its canary's).
TAKEN_FROM = ('vllm_block_size', 'vllm_block_size_probe', '__vllm_server_probe_inputs', 'vllm_mamba_blocks')


def _facts(variables):
    """The take step's view of one host's variables (``hostvars[host]`` or the task's own)."""
    known = dict((name, variables.get(name)) for name in TAKEN_FROM if name in variables)
    plan = variables.get('__vllm_server_plan') if '__vllm_server_plan' in variables else None
    known['mamba_inputs'] = ((plan or {}).get('derived') or {}).get('mamba_inputs')
    return known


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hostvars = task_vars['hostvars']
        if params['step'] == 'form':
            hosts = params['hosts'] or []
            pairs = [(h, (hostvars[h].get('__vllm_server_probe_inputs') or {}).get('inputs')) for h in hosts]
            cached = [h for h in hosts if hostvars[h].get('vllm_block_size') is not None]
            groups = hardware_groups.form_groups(pairs, cached=cached, per_group=params['per_group'])
            for group in groups:
                group['line'] = hardware_groups.describe(group)
            result.update(changed=False, groups=groups, ansible_facts={'__vllm_server_probe_groups': groups})
            return result
        group = task_vars.get('__vllm_server_probe_group')
        if not isinstance(group, dict) or 'canary' not in group:
            raise AnsibleActionFail('probe_group: step take needs this host\'s group (__vllm_server_probe_group, from step '
                                    'form); form the groups first')
        facts = hardware_groups.take_from_canary(task_vars['inventory_hostname'], group, _facts(task_vars),
                                                 _facts(hostvars[group['canary']]))
        result.update(changed=False, taken=sorted(facts), ansible_facts=facts)
        return result
