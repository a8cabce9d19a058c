# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""L2 pools in the playbooks: plan.yml shows and renders them, validate.yml refuses a pool whose hosts differ
and a store without its password, all before any host is contacted."""

from __future__ import annotations

import json
import os

import pytest

from fleet_playbook_helpers import EXAMPLE, assert_no_contact, fail_messages, read
from systemd_unit import parse_exec, parse_unit, values

PASSWORD = 'a-store-password-for-the-test'


def exec_start(text):
    (value,) = values(parse_unit(text), 'Service', 'ExecStart')
    return value


def test_plan_shows_and_renders_the_pools(runner, hf_env, tmp_path):
    plan = tmp_path / 'plan'
    code, output = runner.run('plan.yml', EXAMPLE, '-e', 'fleet_plan_dir=%s' % plan,
                              env={'FLEET_KV_STORE_PASSWORD': PASSWORD})
    assert code == 0, output[-6000:]
    assert_no_contact(output)
    prefixes = {}
    for host, pool in (('gpu-01', 'qwen36'), ('gpu-03', 'qwen35')):
        record = json.loads(read(str(plan / host / 'plan.json')))
        prefixes[host] = record['kv_pool']['key_prefix']
        assert record['kv_pool']['pool'] == pool
        assert record['kv_pool']['adapter_shown']['startup_nodes'] == '10.20.0.50:6379'
        assert record['kv_pool']['adapter_shown']['key_prefix'] == prefixes[host]
        assert 'pool %s: %s -> store 10.20.0.50:6379, key prefix %s' % (pool, host, prefixes[host]) in output
        argv = parse_exec(exec_start(read(str(plan / host / 'etc' / 'systemd' / 'system' / 'lmcache-server.service'))), {})[1]
        # The launcher adds --l2-adapter from the 0600 environment file (never on a command line).
        assert argv[1].endswith('/bin/fleet-lmcache-l2') and argv[2] == 'server' and '--l2-adapter' not in argv
        env = read(str(plan / host / 'etc' / 'lmcache-vllm-fleet' / 'lmcache-server.env'))
        assert 'LMCACHE_FLEET_L2_ADAPTER="<redacted>"' in env
    assert prefixes['gpu-01'] != prefixes['gpu-03']
    # the pools' sizes from the models' config.json (every layer's page per token) and the store sized from them:
    # the 27B at TP 2 writes 784 x 131,072 B per key and rank, the largest value of store kv-01
    sizing = json.loads(read(str(plan / 'gpu-01' / 'plan.json')))['kv_pool']['sizing']
    assert (sizing['bytes_per_token'], sizing['value_bytes']) == (262144, 784 * 131072)
    assert 'lmcache_server_kv_prefill_tokens_per_second is not set' in sizing['break_even_unknown']
    assert '262144 B per token, %d B per key, break-even unknown' % (784 * 131072) in output
    assert 'store kv-01: largest value %d B (gpu-01), proto-max-bulk-len 536870912' % (784 * 131072) in output
    assert prefixes['gpu-01'].startswith('qwen36.qwen3.6-27b.n784.c784.tp2.')
    gpu02 = read(str(plan / 'gpu-02' / 'etc' / 'systemd' / 'system' / 'lmcache-server.service'))
    assert 'fleet-lmcache-l2' not in gpu02
    for root, _dirs, files in os.walk(str(plan)):
        for name in files:
            assert PASSWORD not in read(os.path.join(root, name)), name
    assert PASSWORD not in output


@pytest.mark.parametrize('playbook', ['validate.yml', 'plan.yml'])
def test_a_pool_whose_hosts_differ_is_refused_before_contact(runner, tmp_path, playbook):
    extra = tmp_path / 'pool.yml'
    extra.write_text('all:\n  children:\n    qwen36_hosts:\n      hosts:\n        gpu-02:\n'
                     '          lmcache_server_kv_pool: qwen36\n')
    code, output = runner.run(playbook, EXAMPLE, '-i', str(extra), '-e', 'ansible_ssh_executable=/nonexistent/ssh',
                              '-e', 'fleet_plan_dir=%s' % (tmp_path / 'plan'))
    assert code != 0, output[-4000:]
    assert_no_contact(output)
    assert ("pool qwen36: hosts gpu-01 and gpu-02 differ in block_size (784 vs 1568), chunk_size (784 vs 3136), "
            "kv_cache_dtype (auto vs fp8), tensor_parallel_size (2 vs 4), attention_backend (auto vs FLASHINFER), so "
            "they could never read each other's pages; put them in different pools (lmcache_server_kv_pool) or give "
            "them the same values") in ' '.join(fail_messages(output))


def test_a_store_without_its_password_is_refused_before_contact(runner):
    code, output = runner.run('validate.yml', EXAMPLE, '-e', 'ansible_ssh_executable=/nonexistent/ssh',
                              env={'FLEET_KV_STORE_PASSWORD': None})
    assert code != 0, output[-4000:]
    assert_no_contact(output)
    messages = ' '.join(fail_messages(output))
    assert 'host gpu-01: lmcache_server_kv_pool=qwen36 uses store kv-01, whose kv_store_password (value hidden) is ' \
           'not set; set it from a vault' in messages


@pytest.mark.parametrize('playbook', ['validate.yml', 'plan.yml'])
def test_a_misspelt_store_variable_is_refused_by_validate_and_plan(runner, hf_env, tmp_path, playbook):
    extra = tmp_path / 'store.yml'
    extra.write_text('all:\n  children:\n    kv_stores:\n      hosts:\n        kv-01:\n'
                     '          kv_store_maxmemory: 2048\n')
    code, output = runner.run(playbook, EXAMPLE, '-i', str(extra), '-e', 'ansible_ssh_executable=/nonexistent/ssh',
                              '-e', 'fleet_plan_dir=%s' % (tmp_path / 'plan'))
    assert code != 0, output[-4000:]
    assert_no_contact(output)
    assert ('host kv-01: kv_store_maxmemory=2048 is not a variable of the kv_store role; did you mean '
            'kv_store_maxmemory_mb?') in ' '.join(fail_messages(output)), output[-4000:]
    assert not (tmp_path / 'plan').exists(), 'plan.yml writes nothing when a store value is wrong'


def test_plan_renders_a_p2p_pool_with_its_coordinator_unit(runner, hf_env, tmp_path):
    """gpu-03's pool qwen35 as a P2P pool (no store): the coordinator unit on its coordinator host, the peer flags in
    its LMCache unit, the pool line; no store adapter."""
    plan = tmp_path / 'plan'
    extra = tmp_path / 'p2p.yml'
    extra.write_text('all:\n  children:\n    qwen35_hosts:\n      hosts:\n        gpu-03:\n'
                     '          lmcache_server_kv_transport: p2p\n          lmcache_server_kv_coordinator: gpu-03\n'
                     '          lmcache_server_host: 0.0.0.0\n          lmcache_server_allow_unauthenticated: true\n')
    code, output = runner.run('plan.yml', EXAMPLE, '-i', str(extra), '-e', 'fleet_plan_dir=%s' % plan,
                              env={'FLEET_KV_STORE_PASSWORD': PASSWORD})
    assert code == 0, output[-6000:]
    assert_no_contact(output)
    units = plan / 'gpu-03' / 'etc' / 'systemd' / 'system'
    coordinator = parse_exec(exec_start(read(str(units / 'lmcache-server-coordinator.service'))), {})[1]
    assert coordinator[1:] == ['coordinator', '--host', '0.0.0.0', '--port', '9300', '--chunk-size',
                               coordinator[-1]] and coordinator[0].endswith('/bin/lmcache')
    argv = parse_exec(exec_start(read(str(units / 'lmcache-server.service'))), {})[1]
    assert argv[1] == 'server' and '--l2-adapter' not in argv
    assert argv[argv.index('--coordinator-url') + 1] == 'http://gpu-03.example.internal:9300'
    assert argv[argv.index('--p2p-advertise-url') + 1] == 'gpu-03.example.internal:5560'
    assert argv[argv.index('--chunk-size') + 1] == coordinator[-1]
    assert 'LMCACHE_FLEET_L2_ADAPTER' not in read(str(plan / 'gpu-03' / 'etc' / 'lmcache-vllm-fleet' / 'lmcache-server.env'))
    assert ('pool qwen35: gpu-03 -> P2P (no store), coordinator gpu-03 (http://gpu-03.example.internal:9300); '
            'NIXL keeps one CPU core of each member busy; ') in output
    # gpu-01's store pool is unchanged, and only the coordinator host has a coordinator unit
    assert not (plan / 'gpu-01' / 'etc' / 'systemd' / 'system' / 'lmcache-server-coordinator.service').exists()
    assert 'pool qwen36: gpu-01 -> store 10.20.0.50:6379' in output
