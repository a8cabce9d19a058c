# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_check action (module_utils/plan/fleet_check.py): the inventory names a fleet, the rollout's variables as
deploy.yml reads them, and the plans of each kind of host in order - serving, KV store, router - every problem of the
first kind that has one at once, the serving warnings once each. validate.yml, plan.yml and deploy.yml run it for real
in tests/playbooks (test_bad_input.py, test_deploy_probed_n.py, test_kv_pools.py, test_router*.py)."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.lmcache_vllm.fleet.plugins.action.fleet_check import ActionModule


def _plan(errors=(), warnings=(), pool=None):
    return {'errors': list(errors), 'warnings': list(warnings), 'summary': {'kv_pool': pool}}


def _run(args, hostvars, groups=None, **task_vars):
    task = mock.MagicMock(args=args, async_val=0, check_mode=False)
    templar = mock.MagicMock()
    templar.template.side_effect = lambda value: value
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=templar,
                          shared_loader_obj=None)
    variables = dict(task_vars, hostvars=hostvars, groups=groups or {'all': sorted(hostvars)})
    return action.run(task_vars=variables)


def test_an_inventory_without_a_fleet_names_its_groups():
    result = _run({'fleet_pattern': 'vlm_hosts', 'fleet_members': []}, {},
                  {'all': [], 'ungrouped': [], 'vllm_hosts': []})
    assert result['failed'] is True
    assert result['msg'].startswith('no host matches fleet_hosts=vlm_hosts (groups in this inventory: vllm_hosts);')


def test_a_host_with_a_model_outside_the_fleet_is_refused():
    hostvars = {'gpu-01': {'vllm_server_model': 'm'}, 'gpu-09': {'vllm_server_model': 'm'}, 'kv-01': {}}
    result = _run({'fleet_members': ['gpu-01']}, hostvars)
    assert result['msg'].startswith('host(s) gpu-09 set vllm_server_model but are not in fleet_hosts=vllm_hosts')
    assert not _run({'fleet_members': ['gpu-01', 'gpu-09']}, hostvars).get('failed')


def test_the_rollout_variables_are_read_as_deploy_reads_them(monkeypatch):
    hostvars = {'gpu-01': {'vllm_server_model': 'm'}}
    args = {'fleet_members': ['gpu-01'], 'rollout': True}
    monkeypatch.setenv('FLEET_SERIAL', '0%')
    result = _run(args, hostvars)
    assert result['msg'].startswith("1 problem(s) in the rollout's variables, nothing was changed: fleet_serial='0%'")
    # an extra variable wins over the environment
    assert not _run(args, hostvars, fleet_serial=2).get('failed')
    result = _run(args, hostvars, fleet_serial=2, fleet_max_fail_percentage='half', fleet_warm_first_start='maybe')
    assert result['msg'].startswith("2 problem(s) in the rollout's variables")
    # without rollout the variables are not read
    assert not _run({'fleet_members': ['gpu-01']}, hostvars).get('failed')


def test_serving_problems_come_first_with_machines_listed_twice():
    hostvars = {'a': {'__fleet_plan': _plan(['host a: vllm_server_port=0 is not a port; use 8000']),
                      'ansible_host': '10.0.0.1'},
                'b': {'__fleet_plan': _plan(), 'ansible_host': '10.0.0.1'},
                's': {'__kv_store_check': {'errors': ['host s: kv_store_port=0 ...']}}}
    result = _run({'kinds': {'serving': ['a', 'b'], 'store': ['s'], 'router': []}}, hostvars)
    assert result['msg'].startswith('2 problem(s) in the inventory, nothing was changed: host a: vllm_server_port=0')
    assert 'hosts a and b reach one machine' in result['msg'] and 'kv_store_port' not in result['msg']


def test_then_the_stores_then_the_routers():
    hostvars = {'a': {'__fleet_plan': _plan()},
                's': {'__kv_store_check': {'errors': ['host s: kv_store_port=0 is not a port']}},
                'r': {'__vllm_router_check': {'errors': ['host r: vllm_router_instances=[] is empty']}}}
    kinds = {'serving': ['a'], 'store': ['s'], 'router': ['r']}
    assert _run({'kinds': kinds}, hostvars)['msg'] == (
        "1 problem(s) in the stores' variables, nothing was changed: host s: kv_store_port=0 is not a port")
    hostvars['s']['__kv_store_check']['errors'] = []
    assert _run({'kinds': kinds}, hostvars)['msg'] == (
        "1 problem(s) in the routers' variables, nothing was changed: host r: vllm_router_instances=[] is empty")


def test_after_the_probe_the_words_change_and_warnings_show_once():
    hostvars = {'a': {'__fleet_plan': _plan(['host a: vllm_server_expected_block_size=544 does not match'],
                                            ['the probed N=560 differs'])},
                'b': {'__fleet_plan': _plan([], ['the probed N=560 differs'])}}
    with mock.patch('ansible_collections.lmcache_vllm.fleet.plugins.action.fleet_check.display') as display:
        result = _run({'kinds': {'serving': ['a', 'b']}, 'what': 'with the probed N',
                       'spared': 'no service was changed'}, hostvars)
    assert result['msg'] == ('1 problem(s) with the probed N, no service was changed: '
                             'host a: vllm_server_expected_block_size=544 does not match')
    assert result['warnings_found'] == ['the probed N=560 differs']
    display.warning.assert_called_once_with('the probed N=560 differs')


def test_a_valid_fleet_says_what_was_checked():
    hostvars = {
        'gpu-01': {'group_names': ['vllm_hosts', 'h200'], '__fleet_plan': _plan(pool='p1')},
        'gpu-02': {'group_names': ['vllm_hosts'], '__fleet_plan': _plan(pool='p1')},
        'gpu-03': {'group_names': ['vllm_hosts', 'ungrouped'], '__fleet_plan': _plan()},
        'kv-01': {'group_names': ['kv_stores'], '__kv_store_check': {'errors': []}},
    }
    result = _run({'kinds': {'serving': ['gpu-01', 'gpu-02', 'gpu-03'], 'store': ['kv-01']}}, hostvars)
    assert not result.get('failed')
    assert result['summary'] == (
        'The fleet is valid: 3 host(s) in 2 group(s) (h200, vllm_hosts), 1 L2 pool(s) (p1) and 1 KV store(s) '
        'checked; no host was contacted.')


@pytest.mark.parametrize('args', [{'kinds': 'serving'}, {'rollout': 'maybe'}])
def test_wrong_arguments_fail(args):
    with pytest.raises(AnsibleActionFail, match=sorted(args)[0]):
        _run(args, {})
