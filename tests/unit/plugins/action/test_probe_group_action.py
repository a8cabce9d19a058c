# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe_group action: deploy.yml's probe groups formed on the control node (step form) and a group's N and M
taken from its canary (step take, hardware_groups.take_from_canary). deploy.yml's own task files run it in
tests/playbooks/test_deploy_probe_groups.py; here its arguments, its facts and each rule of the take."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.lmcache_vllm.fleet.plugins.action.probe_group import ActionModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import hardware_identity
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import fingerprint_inputs
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import hardware_groups

M_INPUTS = {'gpu_memory_utilization': 0.9, 'max_model_len': 8192}


def probe_inputs(uuid, tp=1):
    gpus = [{'index': i, 'uuid': '%s-%d' % (uuid, i), 'name': 'NVIDIA H200', 'memory_total_mib': 143771,
             'driver_version': '580.159.04', 'compute_cap': '9.0'} for i in range(tp)]
    inputs = fingerprint_inputs({'kind': 'hub', 'id': 'Qwen/Qwen3.6-27B', 'revision': 'main'}, '0.32.0',
                                tensor_parallel_size=tp, hardware=hardware_identity('cuda', gpus=gpus))
    return {'inputs': inputs, 'fingerprint': 'fp-' + uuid, 'service_fingerprint': 'sfp-' + uuid}


def _run(args, task_vars):
    task = mock.MagicMock(args=dict(args), async_val=0, check_mode=False)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    return action.run(task_vars=task_vars)


def test_form_groups_the_play_hosts_by_their_inputs_and_prefers_a_host_with_n_as_canary():
    hostvars = {'a': {'__vllm_server_probe_inputs': probe_inputs('GPU-a')},
                'b': {'__vllm_server_probe_inputs': probe_inputs('GPU-b'), 'vllm_block_size': 784},
                'c': {'__vllm_server_probe_inputs': probe_inputs('GPU-c', tp=2)}, 'd': {}}
    result = _run({'step': 'form', 'hosts': ['a', 'b', 'c', 'd']}, {'hostvars': hostvars})
    groups = result['ansible_facts']['__vllm_server_probe_groups']
    assert [(g['name'], g['canary'], g['members']) for g in groups] == [
        ('G1', 'b', ['b', 'a']), ('G2', 'c', ['c']), ('G3', 'd', ['d'])]
    assert groups[0]['line'] == 'probe group G1: 2 host(s), probed on b, taken by a' and result['changed'] is False
    alone = _run({'step': 'form', 'hosts': ['a', 'b'], 'per_group': False}, {'hostvars': hostvars})
    assert [g['members'] for g in alone['groups']] == [['a'], ['b']]


def _take(own, canary, group=None):
    group = group or {'name': 'G1', 'canary': 'a-1', 'members': ['a-1', 'a-2']}
    hostvars = {'a-1': canary}
    return _run({'step': 'take'}, dict(own, hostvars=hostvars, inventory_hostname='a-2', __vllm_server_probe_group=group))


def test_take_gives_a_host_without_n_the_canarys_n_with_its_own_fingerprints_and_the_canarys_m():
    canary = {'vllm_block_size': 544, 'vllm_block_size_probe': {'outcome': 'found', 'source': 'probe', 'fingerprint': 'x'},
              'vllm_mamba_blocks': {'mamba_cache_blocks': 604, 'source': 'refusal'},
              '__vllm_server_plan': {'derived': {'mamba_inputs': M_INPUTS}}}
    own = {'__vllm_server_probe_inputs': probe_inputs('GPU-b'), '__vllm_server_plan': {'derived': {'mamba_inputs': M_INPUTS}}}
    facts = _take(own, canary)['ansible_facts']
    probe = facts['vllm_block_size_probe']
    assert facts['vllm_block_size'] == 544
    assert (probe['source'], probe['group'], probe['canary'], probe['changed']) == ('group', 'G1', 'a-1', False)
    assert (probe['fingerprint'], probe['service_fingerprint']) == ('fp-GPU-b', 'sfp-GPU-b')
    assert facts['vllm_mamba_blocks'] == {'mamba_cache_blocks': 604, 'source': 'refusal', 'group': 'G1',
                                          'canary': 'a-1'}


def test_take_keeps_a_hosts_own_n_and_m_and_other_inputs_of_m():
    canary = {'vllm_block_size': 544, 'vllm_block_size_probe': {'source': 'probe'},
              'vllm_mamba_blocks': {'mamba_cache_blocks': 604, 'source': 'refusal'},
              '__vllm_server_plan': {'derived': {'mamba_inputs': M_INPUTS}}}
    own_n = {'vllm_block_size': 560, 'vllm_block_size_probe': {'source': 'cache'}}
    assert _take(own_n, canary)['ansible_facts'] == {}
    other_m = {'__vllm_server_probe_inputs': probe_inputs('GPU-b'),
               '__vllm_server_plan': {'derived': {'mamba_inputs': dict(M_INPUTS, max_model_len=4096)}}}
    facts = _take(other_m, canary)['ansible_facts']
    assert facts['vllm_block_size'] == 544 and 'vllm_mamba_blocks' not in facts
    # a canary whose probe failed gives nothing: the host probes on its own
    assert _take(other_m, {'vllm_block_size_probe': None})['taken'] == []


def test_take_needs_the_hosts_group_and_bad_arguments_are_refused():
    with pytest.raises(AnsibleActionFail, match='form the groups first'):
        _run({'step': 'take'}, {'hostvars': {}, 'inventory_hostname': 'a'})
    with pytest.raises(AnsibleActionFail, match='value of step must be one of: form, take'):
        _run({'step': 'merge'}, {'hostvars': {}})


def test_take_from_canary_is_the_rule_the_action_applies():
    group = {'name': 'G2', 'canary': 'b-1', 'members': ['b-1', 'b-2']}
    assert hardware_groups.take_from_canary('b-1', group, {}, {'vllm_block_size': 784}) == {}
