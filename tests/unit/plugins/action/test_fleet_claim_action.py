# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_claim action: deploy.yml's stage 1b claims every kind a host is (serving, KV store, router) with the
module fleet_ownership, each from its own validated plan and into its own manifest, stops at the first refusal and
records only the claims that ran. Here the module is replaced by a recorder (TEST DOUBLE: the module's own rules are
tested in test_ownership.py and against real files in tests/playbooks/test_ownership_module.py); deploy.yml runs the
action for real in tests/playbooks (test_deploy_tags.py, the day-two playbooks) and in the molecule scenario."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.lmcache_vllm.fleet.plugins.action.fleet_claim import ActionModule

SERVING = {'ownership': [{'kind': 'unit', 'path': '/etc/systemd/system/vllm.service'}],
           'manifest_path': '/etc/lmcache-vllm-fleet/manifest.json',
           'files': ['/etc/systemd/system/vllm.service', '/etc/lmcache-vllm-fleet/vllm.env']}
STORE = {'ownership': [{'kind': 'unit', 'path': '/etc/systemd/system/fleet-kv-store.service'}],
         'manifest_path': '/etc/lmcache-vllm-fleet/kv-store-manifest.json'}
ROUTER = {'ownership': [{'kind': 'unit', 'path': '/etc/systemd/system/vllm-router-small.service'}],
          'manifest_path': '/etc/lmcache-vllm-fleet/router-manifest.json'}


def _run(kinds, task_vars, answers=None):
    """The action's result and the module arguments it sent, in order; ``answers``: the module's result per kind
    of manifest (default: a claim that changed the manifest)."""
    return _run_args({'kinds': kinds}, task_vars, answers)


def _run_args(args, task_vars, answers=None):
    calls = []

    def module(module_name, module_args, task_vars):
        assert module_name == 'lmcache_vllm.fleet.fleet_ownership'
        calls.append(module_args)
        return dict((answers or {}).get(module_args['manifest'], {'changed': True, 'status': {'k': 'absent'}}))
    task = mock.MagicMock(args=args, async_val=0, check_mode=False)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    action._execute_module = module
    action._remove_tmp_path = mock.Mock()
    return action.run(task_vars=dict(task_vars, inventory_hostname='h1')), calls


def test_a_host_of_every_kind_claims_each_in_its_own_manifest():
    kinds = {'serving': ['h1'], 'store': ['h1', 'h2'], 'router': ['h1']}
    result, calls = _run(kinds, {'__fleet_plan': SERVING, '__kv_store_check': STORE, '__vllm_router_check': ROUTER})
    assert [(c['manifest'], c['entries'], c['state'], c['host']) for c in calls] == [
        (SERVING['manifest_path'], SERVING['ownership'], 'claim', 'h1'),
        (STORE['manifest_path'], STORE['ownership'], 'claim', 'h1'),
        (ROUTER['manifest_path'], ROUTER['ownership'], 'claim', 'h1')]
    assert calls[0]['backup_names'] == ['vllm.service', 'vllm.env'] and 'backup_names' not in calls[1]
    assert result['ansible_facts'] == {'__fleet_claimed': True, '__vllm_router_claimed': True}
    assert result['changed'] is True and not result.get('failed')
    assert [c['kind'] for c in result['claims']] == ['serving', 'store', 'router']


def test_a_host_claims_only_the_kinds_it_is():
    result, calls = _run({'serving': ['h2'], 'store': ['h1'], 'router': []}, {'__kv_store_check': STORE})
    assert [c['manifest'] for c in calls] == [STORE['manifest_path']]
    assert result['ansible_facts'] == {}


def test_a_refusal_fails_the_host_and_claims_nothing_after_it():
    refusal = 'host h1: vllm_server_service_name=vllm is a unit the collection did not create; fix: ...'
    answers = {SERVING['manifest_path']: {'failed': True, 'msg': refusal, 'problems': [refusal], 'changed': False}}
    kinds = {'serving': ['h1'], 'store': ['h1'], 'router': ['h1']}
    result, calls = _run(kinds, {'__fleet_plan': SERVING, '__kv_store_check': STORE, '__vllm_router_check': ROUTER},
                         answers)
    assert result['failed'] is True and result['msg'] == refusal and result['problems'] == [refusal]
    assert len(calls) == 1 and result['ansible_facts'] == {}


def test_a_kind_without_its_validated_plan_is_refused_naming_the_fact():
    with pytest.raises(AnsibleActionFail, match='host h1: no router plan \\(__vllm_router_check'):
        _run({'router': ['h1']}, {})


@pytest.mark.parametrize('kind, fact, spared', [('serving', '__fleet_claimed', 'nothing is installed or restarted'),
                                                ('router', '__vllm_router_claimed', 'no router is installed')])
def test_require_refuses_a_host_whose_claim_did_not_run_and_claims_nothing(kind, fact, spared):
    result, calls = _run_args({'require': kind}, {})
    assert calls == [] and result['failed'] is True and result['changed'] is False
    assert result['msg'].startswith('host h1: stage 1b of deploy.yml (the refusal of what the collection did not create')
    assert spared in result['msg'] and '--skip-tags always' in result['msg']
    result, calls = _run_args({'require': kind}, {fact: True})
    assert calls == [] and not result.get('failed')
    # another kind's claim is not this one's
    other = '__vllm_router_claimed' if kind == 'serving' else '__fleet_claimed'
    assert _run_args({'require': kind}, {other: True})[0]['failed'] is True


@pytest.mark.parametrize('args', [{}, {'kinds': {}, 'require': 'serving'}, {'require': 'store'}])
def test_exactly_one_of_kinds_and_require(args):
    with pytest.raises(AnsibleActionFail):
        _run_args(args, {})
