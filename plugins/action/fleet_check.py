# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of lmcache_vllm.fleet.fleet_check: the fleet's checks on the control node, in one task run once
(documented in plugins/modules/fleet_check.py; the rules are module_utils/plan/fleet_check.py's). Nothing is
contacted; a problem fails the task with every problem of its kind at once."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_check
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.rollout import ROLLOUT_DEFAULTS
from ansible_collections.lmcache_vllm.fleet.plugins.modules.fleet_check import ARGUMENT_SPEC

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hostvars = task_vars['hostvars']
        problem, warnings, summary = None, [], None
        if params['fleet_members'] is not None:
            with_model = [host for host in task_vars['groups'].get('all') or [] if 'vllm_server_model' in hostvars[host]]
            problem = fleet_check.fleet_problem(params['fleet_pattern'], params['fleet_members'], with_model,
                                                list(task_vars['groups']))
        if problem is None and params['rollout']:
            problem = fleet_check.rollout_problem(self._rollout_values(task_vars))
        if problem is None and params['kinds'] is not None:
            kinds = params['kinds']
            problem, warnings = fleet_check.kind_problems(kinds, hostvars, params['what'], params['spared'])
            if problem is None:
                summary = fleet_check.valid_summary(kinds.get('serving') or [], hostvars, kinds.get('store') or [])
        for warning in warnings:
            display.warning(warning)
        result.update(changed=False, warnings_found=warnings)
        if problem:
            result.update(failed=True, msg=problem)
        elif summary is not None:
            result.update(summary=summary)
        return result

    def _rollout_values(self, task_vars):
        """deploy.yml's rollout variables as it reads them: extra variables, else their environment, else defaults."""
        values = {}
        for name, (env, default) in ROLLOUT_DEFAULTS.items():
            value = task_vars[name] if name in task_vars else os.environ.get(env, default) if env else default
            values[name] = self._templar.template(value)
        return values
