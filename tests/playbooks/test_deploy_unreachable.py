# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deploy with hosts that cannot be reached stops at stage 1b before any host changes: one message names every
unreachable host, store and router host, says nothing was changed, and gives the --limit that proceeds without them.

This machine is a reachable fleet host (local connection, every path under tmp_path): its manifest, the first
thing stage 1b writes, must not appear."""

from __future__ import annotations

import json

from fleet_playbook_helpers import NO_CONTACT
from test_day2 import local_host


def test_unreachable_hosts_are_named_with_the_limit_and_nothing_changes(runner, tmp_path):
    store = dict(NO_CONTACT, ansible_host='192.0.2.44', kv_store_pools=['default'],
                 kv_store_password='a-store-password-for-the-test')
    hosts = {'localhost': local_host(tmp_path), 'gone-01': dict(NO_CONTACT, ansible_host='192.0.2.41',
                                                                vllm_server_model='Qwen/Qwen3.5-0.8B',
                                                                vllm_server_expected_block_size=544)}
    router = dict(NO_CONTACT, ansible_host='192.0.2.45',
                  vllm_router_instances=[{'group': 'vllm_hosts', 'port': 30000, 'metrics_port': 29000,
                                          'workers': ['gone-01']}])
    hosts['gone-01'].update(vllm_server_host='0.0.0.0', vllm_server_api_key='an-api-key-for-the-test')
    inventory = {'all': {'children': {'vllm_hosts': {'hosts': hosts}, 'kv_stores': {'hosts': {'kv-gone': store}},
                                      'routers': {'hosts': {'rt-gone': router}}}}}
    (tmp_path / 'hosts.json').write_text(json.dumps(inventory))
    code, output = runner.run('deploy.yml', str(tmp_path / 'hosts.json'), '-e', 'ansible_become=false')
    assert code != 0
    assert ('3 host(s) could not be reached, so nothing was changed on any host: gone-01 (' in output), output[-6000:]
    assert '; kv-gone (' in output and '; rt-gone (' in output
    assert "--limit 'all:!gone-01:!kv-gone:!rt-gone'" in output
    assert 'PLAY [Stage 2' not in output
    assert not (tmp_path / 'manifest' / 'manifest.json').exists()
