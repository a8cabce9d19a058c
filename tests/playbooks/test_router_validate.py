# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The routers' variables are checked by validate.yml (stage 1 of deploy.yml) before any host is contacted;
an inventory without a routers group runs no router play at all."""

from __future__ import annotations

import yaml

from fleet_playbook_helpers import CONTACT_MARKERS, NO_CONTACT

MODEL = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_expected_block_size': 544,
         'vllm_server_host': '0.0.0.0', 'vllm_server_api_key': 'an-api-key-for-tests'}
OTHER = dict(MODEL, vllm_server_model='Qwen/Qwen3.6-27B', vllm_server_tensor_parallel_size=2,
             vllm_server_gpus=['0', '1'], vllm_server_expected_block_size=784)


def write(runner, router_vars):
    inventory = {'all': {'children': {
        'vllm_hosts': {'children': {
            'small_hosts': {'hosts': {'gpu-01': dict(NO_CONTACT, ansible_host='192.0.2.11', **MODEL),
                                      'gpu-02': dict(NO_CONTACT, ansible_host='192.0.2.12', **MODEL)}},
            'large_hosts': {'hosts': {'gpu-03': dict(NO_CONTACT, ansible_host='192.0.2.13', **OTHER)}}}},
        'routers': {'hosts': {'rt-01': dict(NO_CONTACT, ansible_host='192.0.2.20', **router_vars)}}}}}
    path = runner.workdir / 'hosts.yml'
    path.write_text(yaml.safe_dump(inventory))
    return str(path)


def test_a_good_router_passes(runner):
    inventory = write(runner, {'vllm_router_instances': [{'group': 'small_hosts', 'port': 30000,
                                                          'metrics_port': 29000}]})
    rc, out = runner.run('validate.yml', inventory)
    assert rc == 0, out
    assert 'ok: [rt-01]' in out, out


def test_router_problems_are_listed_before_any_host_is_contacted(runner):
    inventory = write(runner, {
        'vllm_router_bind': '0.0.0.0',
        'vllm_router_instances': [{'group': 'small_hosts', 'port': 30000, 'metrics_port': 29000,
                                   'workers': ['gpu-01', 'gpu-03']},
                                  {'group': 'large_hosts', 'port': 30001, 'metrics_port': 30000}]})
    rc, out = runner.run('deploy.yml', inventory)
    assert rc != 0, out
    for marker in CONTACT_MARKERS:
        assert marker not in out, out
    assert 'PLAY [Stage 2' not in out, out
    assert '3 problem(s) in the routers\' variables, nothing was changed' in out, out
    for part in ('host rt-01: vllm_router_bind=0.0.0.0 exposes the router beyond loopback',
                 'gpu-03 outside the model group small_hosts',
                 'vllm_router_instances[large_hosts].metrics_port=30000 collides with '
                 'vllm_router_instances[small_hosts].port'):
        assert part in out, (part, out)


def test_without_routers_no_router_is_planned(runner, tmp_path):
    """A serving host that is no router gets no router plan (so stage 1b claims no router manifest on it)."""
    inventory = runner.write_inventory({'gpu-01': MODEL})
    playbook = tmp_path / 'validate_then_show.yml'
    playbook.write_text(
        '- ansible.builtin.import_playbook: lmcache_vllm.fleet.validate\n'
        '- hosts: gpu-01\n  gather_facts: false\n  tasks:\n'
        '    - ansible.builtin.debug:\n        msg: "plans: {{ __fleet_plan is defined }} '
        '{{ __kv_store_check is defined }} {{ __vllm_router_check is defined }}"\n')
    rc, out = runner.run(str(playbook), inventory)
    assert rc == 0, out
    assert '"msg": "plans: True False False"' in out, out


def test_monitoring_writes_the_routers_targets_and_names_a_loopback_one(runner, tmp_path):
    import json
    inventory = write(runner, {
        'vllm_router_metrics_bind': '0.0.0.0', 'vllm_router_allow_network': True,
        'vllm_router_instances': [{'group': 'small_hosts', 'port': 30000, 'metrics_port': 29000},
                                  {'group': 'large_hosts', 'port': 30001, 'metrics_port': 29001}]})
    out_dir = tmp_path / 'mon'
    rc, out = runner.run('monitoring.yml', inventory, '-e', 'fleet_monitoring_dir=%s' % out_dir)
    assert rc == 0, out
    targets = json.loads((out_dir / 'router_targets.json').read_text())
    assert [t['targets'] for t in targets] == [['192.0.2.20:29000'], ['192.0.2.20:29001']]
    assert targets[0]['labels'] == {'host': 'rt-01', 'service': 'router', 'model_group': 'small_hosts',
                                    'router': 'vllm-router-small-hosts'}
    assert (out_dir / 'vllm_router.rules.yml').exists()
    inventory = write(runner, {'vllm_router_instances': [{'group': 'small_hosts', 'port': 30000,
                                                          'metrics_port': 29000}]})
    rc, out = runner.run('monitoring.yml', inventory, '-e', 'fleet_monitoring_dir=%s' % out_dir)
    assert rc == 0, out
    assert json.loads((out_dir / 'router_targets.json').read_text()) == []
    assert 'serves its metrics on loopback (vllm_router_metrics_bind=127.0.0.1)' in out
