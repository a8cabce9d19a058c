# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The service_info action: the module reads the host, the control node explains, and a second round trip reads
only the journals the explanation needs.

The module's side runs in this process on the simulated host of tests/service_host_double.py (a test double: no
systemd here); the action's own code, argument validation and the module's own entry points (gather, journals) are
the real ones. playbooks/status.yml runs the whole of it against this machine in tests/playbooks/test_day2.py.
"""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.lmcache_vllm.fleet.plugins.action.service_info import ActionModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_gather
from ansible_collections.lmcache_vllm.fleet.plugins.modules.service_info import ARGUMENT_SPEC

from service_host_double import PARAMS, VLLM_METRICS, Host


def _action(host, args):
    task = mock.MagicMock(args=dict(args), async_val=0, check_mode=False)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    calls = []

    def execute_module(module_name, module_args, task_vars):
        """The module on the simulated host: its own argument spec, then gather or journals."""
        calls.append(dict(module_args))
        if host is None:
            return {'unreachable': True, 'msg': 'host gpu-01 is down'}
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(dict(module_args))
        assert module_name == 'lmcache_vllm.fleet.service_info' and checked.error_messages == []
        params = checked.validated_parameters
        if params['journals'] is not None:
            return {'changed': False, 'journals': service_gather.journals(host.run, params['journals'])}
        return {'changed': False, 'warnings': ['a warning from the host'],
                'raw': service_gather.gather(params, host.run, host.http_get, host.read_text, host.which)}
    action._execute_module = execute_module
    action._remove_tmp_path = lambda path: None
    return action, calls


def test_a_serving_host_whose_metric_says_n_is_one_round_trip():
    host = Host()
    host.http['http://127.0.0.1:8000/metrics'] = (200, VLLM_METRICS + (
        'vllm:cache_config_info{block_size="784",engine="0",mamba_cache_mode="align",num_gpu_blocks="604"} 1.0\n'))
    action, calls = _action(host, PARAMS)
    result = action.run(task_vars={})
    # the module gets the task's own arguments; the explanation read the checked ones
    assert len(calls) == 1 and calls[0] == PARAMS
    assert result['state'] == 'serving' and result['changed'] is False
    assert (result['block_size']['live']['n'], result['block_size']['live']['source']) == (784, 'metric')
    assert result == dict(host.collect(), changed=False, warnings=['a warning from the host'])
    assert not any(c[0] == 'journalctl' for c in host.calls)


def test_the_journals_the_explanation_needs_are_a_second_round_trip():
    host = Host()
    host.units['lmcache-server.service'].update(ActiveState='failed', SubState='failed', MainPID='0')
    host.journal['lmcache-server.service'] = 'OSError: [Errno 98] Address already in use\n'
    host.journal['vllm.service'] = ('(EngineCore pid=187) INFO 12-01 08:00:09 [interface.py:606] Setting attention block '
                                    'size to 784 tokens to ensure that attention page size is >= mamba page size.\n'
                                    '(APIServer pid=4211) INFO:     Application startup complete.\n')
    action, calls = _action(host, dict(PARAMS, journal_lines=50))
    result = action.run(task_vars={})
    assert [c.get('journals') for c in calls] == [None, [
        {'unit': 'lmcache-server.service', 'lines': 50},
        {'unit': 'vllm.service', 'invocation': '0123abcd'}]]
    assert [f['cause'] for f in result['findings']] == ['port_in_use']
    assert (result['block_size']['live']['n'], result['block_size']['live']['source']) == (784, 'journal')
    assert result['state'] == 'down'


def test_an_unreachable_host_and_bad_arguments():
    action, calls = _action(None, PARAMS)
    assert action.run(task_vars={})['unreachable'] is True
    action, calls = _action(Host(), dict(PARAMS, vllm_port='eighty'))
    with pytest.raises(AnsibleActionFail, match='vllm_port'):
        action.run(task_vars={})
    assert calls == []


def test_a_task_with_only_the_host_reads_the_modules_defaults():
    host = Host()
    host.units['vllm-server.service'] = host.units.pop('vllm.service')
    action, calls = _action(host, {'host': 'gpu-01', 'vllm_service': 'vllm-server', 'gpus': False})
    result = action.run(task_vars={})
    task = {'host': 'gpu-01', 'vllm_service': 'vllm-server', 'gpus': False}
    # the metric does not say N here: the second round trip reads the running vLLM's start
    assert calls == [task, dict(task, journals=[{'unit': 'vllm-server.service', 'invocation': '0123abcd'}])]
    # the defaults: vLLM on 127.0.0.1:8000, LMCache's HTTP on 127.0.0.1:8080, the venvs under /opt
    assert result['services']['vllm']['unit'] == 'vllm-server.service'
    assert result['services']['vllm']['health']['url'] == 'http://127.0.0.1:8000/health'
    assert result['versions']['vllm'] == '0.32.0' and result['state'] == 'serving'
