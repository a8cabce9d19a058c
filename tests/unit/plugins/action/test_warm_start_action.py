# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The warm_start action's decisions that contact no host: check mode, a host without a key or a group, a seed whose
first host did not start, a differing key, a first host with nothing packed, and a pack that the control node's
tarball makes unnecessary. The transfers themselves run through real modules in
tests/playbooks/test_compile_cache_transfer.py and test_compile_cache_hostile.py."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.lmcache_vllm.fleet.plugins.action.warm_start import ActionModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import plan_host

INPUTS = {'vllm_version': '0.32.0', 'model': {'kind': 'hub', 'id': 'm/x', 'revision': 'main'},
          'hardware': {'kind': 'cuda', 'driver_version': '580.159.04', 'gpus': [{'architecture': 'sm90'}]}}
GROUP = {'members': ['a', 'b']}


def host_vars(name, inputs=None, **extra):
    return dict({'inventory_hostname': name, '__vllm_server_plan': plan_host(name, {'vllm_server_model': 'm/x'}),
                 '__vllm_server_probe_inputs': {'inputs': inputs or INPUTS}, '__vllm_server_probe_group': GROUP}, **extra)


def _run(args, task_vars, check_mode=False):
    task = mock.MagicMock(args=dict(args), async_val=0, check_mode=check_mode)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    # nothing here may reach a host: every module or action call fails the test
    action._execute_module = mock.Mock(side_effect=AssertionError('a host was contacted'))
    action._remove_tmp_path = mock.Mock()
    return action.run(task_vars=task_vars)


def test_check_mode_copies_nothing():
    assert _run({'step': 'seed'}, host_vars('b'), check_mode=True)['skipped'] is True


def test_a_host_without_a_group_or_probe_inputs_is_refused_naming_it():
    with pytest.raises(AnsibleActionFail, match='host b: no probe group'):
        _run({'step': 'seed'}, host_vars('b', __vllm_server_probe_group={}))
    with pytest.raises(AnsibleActionFail, match='host b: no compile-cache key'):
        _run({'step': 'seed'}, host_vars('b', __vllm_server_probe_inputs={}))


def test_a_seed_copies_nothing_when_the_first_host_did_not_start_or_its_key_differs():
    task_vars = host_vars('b', hostvars={'a': {}})
    result = _run({'step': 'seed'}, task_vars)
    assert result['ansible_facts']['__fleet_cc_seeded'] == (
        "host b: no compile caches to seed, the group's first host a did not start in this run")
    assert result['changed'] is False and result['ansible_facts']['__fleet_cc_key']['hash']
    other = compile_cache.host_key(task_vars['__vllm_server_plan'], dict(INPUTS, vllm_version='0.33.0'))
    result = _run({'step': 'seed'}, dict(task_vars, hostvars={'a': {'__fleet_cc_key': other}}))
    assert result['msg'].startswith('host b: the compile caches of a are not copied, their key differs: vllm_version')
    same = result['ansible_facts']['__fleet_cc_key']
    result = _run({'step': 'seed'}, dict(task_vars, hostvars={'a': {'__fleet_cc_key': same, '__fleet_cc_packed': {
        'report': 'host a: no compile cache to pack'}}}))
    assert result['msg'] == 'host b: a had no compile cache to copy' and result['changed'] is False


def test_a_pack_uses_the_control_nodes_tarball_when_vllm_did_not_restart(tmp_path):
    task_vars = host_vars('a')
    key = compile_cache.host_key(task_vars['__vllm_server_plan'], INPUTS)
    (tmp_path / key['tarball']).write_bytes(b'x' * 10)
    result = _run({'step': 'pack', 'cache_dir': str(tmp_path), 'restarted': False}, task_vars)
    assert result['ansible_facts']['__fleet_cc_packed'] == {'path': str(tmp_path / key['tarball']), 'size': 10}
    assert result['changed'] is False
    with pytest.raises(AssertionError, match='a host was contacted'):
        _run({'step': 'pack', 'cache_dir': str(tmp_path), 'restarted': True}, task_vars)
