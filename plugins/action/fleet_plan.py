# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of lmcache_vllm.fleet.fleet_plan: the whole fleet's plan in one pass on the control node.

Documented in plugins/modules/fleet_plan.py. The rules are host_plan.plan_host's, the prediction
block_size_predict's, the files the roles' own templates; plan_tree holds the pass's pure logic,
fleet_report the fleet table (its rows, the play's lines, fleet.md and fleet.html).
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.filter.core import to_nice_json
from ansible.template import generate_ansible_template_vars, trust_as_template
from ansible.utils.display import Display

from ansible_collections.lmcache_vllm.fleet.plugins.lookup.model_config import read_model_config
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import hardware_groups, plan_tree
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import public_view
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import VARIABLE_RE

display = Display()

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('hosts', 'dest'))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        hosts = self._task.args.get('hosts')
        dest = self._task.args.get('dest')
        if not isinstance(hosts, list) or not hosts or not dest:
            raise AnsibleActionFail('fleet_plan needs hosts (the play hosts) and dest (the plan directory)')
        hostvars = task_vars['hostvars']
        self._stores = lambda names: kv_pool.store_variables([n for n in names if n in hostvars], hostvars.get)
        self._groups = task_vars['groups']
        self._reader = plan_tree.ConfigReader(read_model_config)
        self._check = bool(self._task.check_mode)
        planned = [self._plan_one(host, hostvars[host]) for host in hosts]
        warnings = self._checked(planned)
        for warning in warnings:
            display.warning(warning)
        self._templates = {}
        rows, changed = [], False
        made = set()
        for host, plan, prediction, problem, host_vars in planned:
            public = public_view(plan)
            changed |= self._write_host(dest, host, public, prediction, problem, host_vars, made)
            rows.append(fleet_report.plan_row(public, prediction))
        names, groups = hardware_groups.plan_groups(
            [dict(row, n_inputs=plan['n_inputs']) for row, (_h, plan, _p, _q, _v) in zip(rows, planned)])
        for row in rows:
            row['group'] = names[row['host']]
        table = fleet_report.plan_table(rows, groups, warnings, dest)
        for name, key in (('fleet.md', 'markdown'), ('fleet.html', 'html')):
            changed |= plan_tree.write_file(os.path.join(dest, name), table[key], '0644', made, self._check)
        result.update(changed=changed, rows=rows, groups=groups, warnings_shown=warnings, lines=table['lines'])
        return result

    def _plan_one(self, host, host_vars):
        """The host's plan through the pipeline every stage uses (plan_tree.plan_one) with the predicted N."""
        settings = {name: host_vars[name] for name in host_vars if VARIABLE_RE.match(name)}
        names = kv_pool.pool_hosts(settings, host, self._groups)
        facts = {'n_kind': 'predicted', 'gpus': host_vars['fleet_gpus'] if 'fleet_gpus' in host_vars else None}
        paths = host_vars['fleet_plan_model_paths'] if 'fleet_plan_model_paths' in host_vars else []
        static, plan = plan_tree.plan_one(
            host, settings, self._reader, facts, kv_stores=self._stores(names) if names is not None else None, paths=paths or [],
            override=host_vars['vllm_server_model_config'] if 'vllm_server_model_config' in host_vars else None)
        managed = host_vars['ansible_managed'] if 'ansible_managed' in host_vars else None
        return host, plan, plan['prediction'], plan['prediction_problem'], {'static': static, 'ansible_managed': managed}

    @staticmethod
    def _checked(planned):
        """Stop on any problem (validate.yml's check first, then with the predicted N); the warnings, each once."""
        static = [entry[4]['static'] for entry in planned]
        static.append({'errors': kv_pool.plans_errors(static), 'warnings': []})
        _errors, static_warnings, message = plan_tree.check(static, 'in the inventory')
        if message:
            raise AnsibleActionFail(message)
        predicted = [entry[1] for entry in planned]
        predicted.append({'errors': kv_pool.plans_errors(predicted), 'warnings': []})
        _errors, warnings, message = plan_tree.check(predicted, 'with the predicted N',
                                                     'nothing was planned')
        if message:
            raise AnsibleActionFail(message)
        return list(dict.fromkeys(static_warnings + warnings))

    def _template(self, path):
        """The template's text (trusted, read once) and its template variables (ansible_managed...)."""
        if path not in self._templates:
            text = trust_as_template(self._loader.get_text_file_contents(path))
            self._templates[path] = (text, generate_ansible_template_vars(path=path, fullpath=path))
        return self._templates[path]

    def _render(self, path, variables):
        text, template_vars = self._template(path)
        available = dict(template_vars)
        if variables.get('ansible_managed') is None:
            variables.pop('ansible_managed', None)
        available.update(variables)
        templar = self._templar.copy_with_new_env(available_variables=available)
        return templar.template(text, escape_backslashes=False) or ''

    def _write_host(self, dest, host, public, prediction, problem, host_vars, made):
        changed = False
        for item in public['rendered']:
            source = os.path.join(COLLECTION_ROOT, 'roles', item['role'], 'templates', item['template'])
            content = self._render(source, {'__lmcache_server_plan': public, '__vllm_server_plan': public,
                                            'ansible_managed': host_vars['ansible_managed']})
            changed |= plan_tree.write_file(plan_tree.host_path(dest, host, item['dest']), content, item['mode'], made,
                                            self._check)
        content = to_nice_json(plan_tree.record(public, prediction, problem), sort_keys=True) + '\n'
        changed |= plan_tree.write_file(plan_tree.host_path(dest, host, '/plan.json'), content, '0644', made, self._check)
        return changed
