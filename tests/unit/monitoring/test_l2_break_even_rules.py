# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The break-even rules monitoring.yml writes from the plans (filter kv_pool_break_even_rules) pass `promtool check
rules`, and with them the alert LmcacheL2SlowerThanRecompute of lmcache_vllm_fleet.rules.yml fires for a pooled 27B
host whose store loads below the plan's break-even and stays silent for one above it (promtool test rules)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from fleet_collection import REPO_ROOT
from prometheus_tools import prometheus_program

from ansible_collections.lmcache_vllm.fleet.plugins.filter.kv_pool import kv_pool_break_even_rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size

RULES = os.path.join(REPO_ROOT, 'playbooks', 'files', 'prometheus', 'lmcache_vllm_fleet.rules.yml')
MODEL = os.path.join(REPO_ROOT, 'tests', 'unit', 'fixtures', 'models', 'qwen3.6-27b', 'config.json')
STORE = {'kv_store_bind': '0.0.0.0', 'kv_store_allow_network': True, 'kv_store_password': 'correct-horse-battery',
         'ansible_host': '10.0.0.9', 'kv_store_pools': ['p27']}


def endpoint(host, prefill):
    with open(MODEL, encoding='utf-8') as handle:
        prediction = explain_block_size(json.load(handle), platform='cuda')
    cfg = {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_device': 'cuda', 'lmcache_server_kv_pool': 'p27',
           'lmcache_server_kv_prefill_tokens_per_second': prefill}
    plan = host_plan.plan_host(host, cfg, prediction=prediction, kv_stores={'kv-1': STORE})
    assert plan['errors'] == []
    return {'host': host, 'kv_pool': plan['kv_pool']}


def histogram(host, per_minute):
    labels = ('cluster="eu-1", host="%s", instance="%s:8080", job="lmcache_vllm_fleet", l2_name="valkey", model="m", '
              'service="lmcache"' % (host, host))
    return [{'series': 'lmcache_mp_l2_load_throughput_GB_per_second_sum{%s}' % labels, 'values': '0+%sx60' % per_minute},
            {'series': 'lmcache_mp_l2_load_throughput_GB_per_second_count{%s}' % labels, 'values': '0+1x60'}]


def annotations(host):
    """The alert's annotations for ``host`` loading 0.875 GB/s against the 27B's break-even of 2.884 GB/s."""
    return {
        'summary': 'The L2 store of pool p27 is slower than recompute on %s' % host,
        'description': 'LMCache on %s loads 0.875 GB/s from the store of pool p27 (mean of 15 minutes), below the '
                       'break-even 2.884 GB/s (bytes per token x the prefill tokens per second of '
                       'lmcache_server_kv_prefill_tokens_per_second): an L2 hit costs more than computing the prompt '
                       'again.' % host,
        'runbook': 'Run `ansible-playbook -i <inventory> playbooks/status.yml --limit %s` for the numbers. Fix: more '
                   'shards (kv_store_cluster with more stores listing the pool), a faster link to the store, a larger '
                   'chunk multiple (lmcache_server_chunk_multiple), a P2P pool over RDMA (lmcache_server_kv_transport: '
                   'p2p), or no L2 for this pool (lmcache_server_kv_pool: null); then `ansible-playbook -i <inventory> playbooks/deploy.yml`.' % host}


def test_the_plans_break_even_rules_make_the_alert_fire_for_the_throttled_host_only(tmp_path):
    promtool = prometheus_program('promtool')
    # break-even 262,144 B per token x 11,000 tokens/s = 2.884 GB/s; no prefill rate: no rule for gpu-3
    document = kv_pool_break_even_rules([endpoint('gpu-1', 11000), endpoint('gpu-2', 11000), endpoint('gpu-3', None)])
    rules = document['groups'][0]['rules']
    assert [(r['labels']['host'], r['labels']['break_even'], r['expr']) for r in rules] == [
        ('gpu-1', '2.884', 'vector(2.884)'), ('gpu-2', '2.884', 'vector(2.884)')]
    generated = tmp_path / 'lmcache_vllm_fleet_l2.rules.yml'
    generated.write_text(yaml.safe_dump(document))
    checked = subprocess.run([promtool, 'check', 'rules', str(generated)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and 'SUCCESS: 2 rules found' in checked.stdout + checked.stderr, checked.stderr
    # gpu-1 loads 0.875 GB/s per task (as measured on an H200 with one Redis), gpu-2 3.5 GB/s
    test = {'rule_files': [RULES, str(generated)], 'evaluation_interval': '1m', 'tests': [{
        'interval': '1m', 'input_series': histogram('gpu-1', '0.875') + histogram('gpu-2', '3.5'),
        'alert_rule_test': [
            {'eval_time': '10m', 'alertname': 'LmcacheL2SlowerThanRecompute', 'exp_alerts': []},
            {'eval_time': '40m', 'alertname': 'LmcacheL2SlowerThanRecompute', 'exp_alerts': [{
                'exp_labels': {'job': 'lmcache_vllm_fleet', 'cluster': 'eu-1', 'host': 'gpu-1', 'model': 'm',
                               'service': 'lmcache', 'pool': 'p27', 'break_even': '2.884', 'severity': 'warning'},
                'exp_annotations': annotations('gpu-1')}]}]}]}
    (tmp_path / 'test.yml').write_text(yaml.safe_dump(test))
    proc = subprocess.run([promtool, 'test', 'rules', 'test.yml'], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize('bad', [None, 'x', 3])
def test_the_filter_refuses_what_is_not_a_list(bad):
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError):
        kv_pool_break_even_rules(bad)
