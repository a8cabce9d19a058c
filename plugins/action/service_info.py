# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action of lmcache_vllm.fleet.service_info: the host reads, the control node explains.

Documented in plugins/modules/service_info.py. The module (status/service_gather.py) reads the host's units,
endpoints, files, versions and GPUs in one round trip; a second round trip, only when
``service_status.wanted_journals`` names one (a failed unit, a running vLLM whose metric does not say N), reads those
journals; ``service_status.explain`` turns both answers into the report here, so the module ships no explanation.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_status
from ansible_collections.lmcache_vllm.fleet.plugins.modules.service_info import ARGUMENT_SPEC

MODULE = 'lmcache_vllm.fleet.service_info'
# What a module's answer carries that the task's result keeps as it is.
PASSED_ON = ('warnings', 'deprecations')


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # Checked here before the host is contacted; the module gets the task's own arguments (a path is expanded
        # on the host, not here) and the explanation reads the checked ones with their defaults.
        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        args = dict((k, v) for k, v in self._task.args.items() if k != 'journals')
        try:
            answer = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
            if answer.get('failed') or answer.get('unreachable') or 'raw' not in answer:
                result.update(answer)
                return result
            wanted = service_status.wanted_journals(params, answer['raw'])
            texts, read = {}, {}
            if wanted:
                requests = [dict((k, w[k]) for k in ('unit', 'lines', 'invocation') if k in w) for w in wanted]
                read = self._execute_module(module_name=MODULE, module_args=dict(args, journals=requests),
                                            task_vars=task_vars)
                if read.get('failed') or read.get('unreachable'):
                    result.update(read)
                    return result
                texts = dict((w['key'], text) for w, text in zip(wanted, read.get('journals') or []))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(service_status.explain(params, answer['raw'], texts))
        for key in PASSED_ON:
            found = (answer.get(key) or []) + (read.get(key) or [])
            if found:
                result[key] = found
        result['changed'] = False
        return result
