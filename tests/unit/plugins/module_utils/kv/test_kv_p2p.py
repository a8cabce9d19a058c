# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/kv/kv_p2p.py: a P2P pool in the host plan (flags, coordinator unit, NIXL,
validation, the fleet-level checks)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_p2p, kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership

P2P = {'vllm_server_model': '/srv/models/qwen3-tiny', 'vllm_server_device': 'cpu', 'vllm_server_hybrid': False,
       'lmcache_server_kv_pool': 'peers', 'lmcache_server_kv_transport': 'p2p', 'lmcache_server_kv_coordinator': 'a',
       'lmcache_server_host': '0.0.0.0', 'lmcache_server_allow_unauthenticated': True}
PEERS = {'a': {'ansible_host': '10.0.0.1'}, 'b': {'ansible_host': '10.0.0.2'}}


def plan(host, cfg=None, peers=None):
    return host_plan.plan_host(host, dict(P2P, **(cfg or {})), n=16, n_kind='probed', probe={'outcome': 'not_hybrid'},
                               kv_stores=PEERS if peers is None else peers)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_a_peer_gets_the_p2p_flags_and_no_store_adapter():
    result = plan('b')
    assert result['errors'] == []
    lm = result['lmcache']
    argv = lm['argv']
    # lmcache server itself (no L2 launcher, no adapter in the environment file)
    assert argv[:2] == [lm['bin'], 'server'] and kv_pool.ADAPTER_ENV not in lm['env_file']
    assert flag(argv, '--instance-id') == 'b'
    assert flag(argv, '--coordinator-url') == 'http://10.0.0.1:9300'
    assert flag(argv, '--coordinator-advertise-ip') == '10.0.0.2'
    assert flag(argv, '--p2p-advertise-url') == '10.0.0.2:5560'
    # ZeroMQ binds an address: the server's own bind, not the advertised name
    assert flag(argv, '--p2p-listen-url') == '0.0.0.0:5560'
    assert flag(argv, '--p2p-transfer-engine') == 'nixl'
    assert 'coordinator' not in lm
    assert lm['pip']['kv_p2p'][-1] == 'nixl-cu12==%s' % kv_p2p.NIXL_VERSION
    assert 'kv_client' not in lm['pip'] and 'nixl-cu12' in lm['pip']['names']
    assert result['summary']['kv_store'] == 'p2p via http://10.0.0.1:9300'


def test_the_coordinator_host_runs_the_coordinator_in_its_own_claimed_unit():
    result = plan('a', {'lmcache_server_kv_coordinator_port': 9400})
    assert result['errors'] == []
    coordinator = result['lmcache']['coordinator']
    assert coordinator['argv'] == [result['lmcache']['bin'], 'coordinator', '--host', '0.0.0.0', '--port', '9400',
                                   '--chunk-size', str(result['derived']['chunk_size'])]
    assert coordinator['unit_path'] == '/etc/systemd/system/lmcache-server-coordinator.service'
    assert coordinator['health_url'] == 'http://127.0.0.1:9400/healthz'
    lines = coordinator['unit_lines']
    assert 'User=lmcache' in lines and 'ProtectSystem=strict' in lines
    assert any(line.startswith('ExecStart=') and 'coordinator' in line for line in lines)
    units = [e['path'] for e in result['ownership'] if e['kind'] == 'unit']
    assert coordinator['unit_path'] in units
    assert coordinator['unit_path'] in [r['dest'] for r in result['rendered']]
    # the peers dial the coordinator's port
    assert flag(result['lmcache']['argv'], '--coordinator-url') == 'http://10.0.0.1:9400'
    # a host without a coordinator claims no coordinator unit
    assert coordinator['unit_path'] not in [e['path'] for e in plan('b')['ownership']]


def test_a_cuda_host_installs_the_cuda_13_build():
    result = plan('b', {'vllm_server_device': 'cuda', 'vllm_server_hybrid': None})
    assert result['lmcache']['pip']['kv_p2p'][-1] == 'nixl-cu13==%s' % kv_p2p.NIXL_VERSION


def test_bad_p2p_settings_are_refused_with_host_variable_and_fix():
    errors = plan('b', {'lmcache_server_host': '127.0.0.1', 'lmcache_server_kv_coordinator': None,
                        'lmcache_server_kv_p2p_port': 70000,
                        'lmcache_server_extra_args': ['--p2p-advertise-url=x:1']})['errors']
    text = '\n'.join(errors)
    assert 'host b: lmcache_server_kv_coordinator=null is not set while lmcache_server_kv_transport=p2p' in text
    assert 'host b: lmcache_server_host=127.0.0.1 is loopback' in text
    assert 'host b: lmcache_server_kv_p2p_port=70000 is not a TCP port' in text
    assert 'host b: lmcache_server_extra_args=--p2p-advertise-url sets what a P2P pool sets itself' in text
    unknown = plan('b', {'lmcache_server_kv_coordinator': 'nowhere'})['errors']
    assert unknown and 'lmcache_server_kv_coordinator=nowhere is not a host of the inventory' in unknown[0]
    wrong = plan('b', {'lmcache_server_kv_transport': 'rdma'})['errors']
    assert any('lmcache_server_kv_transport' in e for e in wrong)


def test_a_store_pool_is_unchanged_by_the_p2p_variables():
    store = {'kv_store_bind': '0.0.0.0', 'kv_store_allow_network': True, 'kv_store_password': 'x' * 20,
             'ansible_host': '10.0.0.9', 'kv_store_pools': ['peers']}
    result = plan('b', {'lmcache_server_kv_transport': 'store'}, {'store-1': store})
    assert result['errors'] == []
    assert '--p2p-advertise-url' not in result['lmcache']['argv'] and 'kv_client' in result['lmcache']['pip']


def test_the_fleet_checks_refuse_mixed_transports_and_a_coordinator_outside_the_pool():
    a, b = plan('a'), plan('b')
    assert kv_pool.plans_errors([a, b]) == []
    other = plan('a', {'lmcache_server_kv_coordinator': 'b'})
    assert any('different coordinators' in e for e in kv_pool.plans_errors([other, b]))
    outside = plan('a', {'lmcache_server_kv_pool': 'elsewhere', 'lmcache_server_kv_coordinator': 'a'})
    assert any('lmcache_server_kv_coordinator=a is not a host of pool peers' in e
               for e in kv_pool.plans_errors([outside, b]))
    store = {'kv_store_bind': '0.0.0.0', 'kv_store_allow_network': True, 'kv_store_password': 'x' * 20,
             'kv_store_pools': ['peers']}
    mixed = plan('a', {'lmcache_server_kv_transport': 'store'}, {'s': store})
    assert any('mix lmcache_server_kv_transport store and p2p' in e for e in kv_pool.plans_errors([mixed, b]))


def test_pool_hosts_names_what_each_transport_reads():
    groups = {'kv_stores': ['s1', 's2']}
    assert kv_pool.pool_hosts(P2P, 'b', groups) == ['a', 'b']
    assert kv_pool.pool_hosts(dict(P2P, lmcache_server_kv_transport='store'), 'b', groups) == ['s1', 's2']
    assert kv_pool.pool_hosts({'lmcache_server_kv_pool': None}, 'b', groups) is None
    stores = kv_pool.store_variables(['a'], lambda name: {'ansible_host': '10.0.0.1', 'lmcache_server_host': '0.0.0.0',
                                                          'vllm_server_api_key': 'secret'})
    assert stores == {'a': {'ansible_host': '10.0.0.1', 'lmcache_server_host': '0.0.0.0'}}


def test_remove_stops_the_coordinator_unit_it_created():
    entries = ownership.candidates(plan('a')['lmcache'], plan('a')['vllm'], '/var/backups/x', '/etc/ansible/facts.d/x')
    assert ('unit', '/etc/systemd/system/lmcache-server-coordinator.service') in [(e['kind'], e['path']) for e in entries]
    assert plan('b')['lmcache']['coordinator_service_name'] == 'lmcache-server-coordinator'


def test_status_asks_a_p2p_member_for_its_peers_and_the_coordinator_host_for_its_coordinator():
    assert plan('b')['lmcache']['p2p_status'] == {'p2p': True, 'coordinator_service': None,
                                                  'coordinator_health_url': None}
    assert plan('a')['lmcache']['p2p_status'] == {'p2p': True, 'coordinator_service': 'lmcache-server-coordinator',
                                                  'coordinator_health_url': 'http://127.0.0.1:9300/healthz'}
    outside = host_plan.plan_host('c', {'vllm_server_model': '/srv/models/qwen3-tiny', 'vllm_server_device': 'cpu',
                                        'vllm_server_hybrid': False}, n=16, n_kind='probed')
    assert outside['lmcache']['p2p_status']['p2p'] is False


def test_a_failed_rollout_on_the_coordinator_host_puts_the_coordinator_back_too():
    coordinator_host, peer = plan('a'), plan('b')
    unit = '/etc/systemd/system/lmcache-server-coordinator.service'
    # backup.yml copies these aside and rollback.yml restores them (or removes the new ones)
    assert unit in coordinator_host['files'] and unit not in peer['files']
    # the units rollback.yml stops, disables when new and starts again when they ran before: coordinator first
    assert [s['name'] for s in coordinator_host['services']] == ['lmcache-server-coordinator', 'lmcache-server', 'vllm']
    assert [s['name'] for s in peer['services']] == ['lmcache-server', 'vllm']
    assert coordinator_host['services'][0] == {'name': 'lmcache-server-coordinator',
                                               'unit_name': 'lmcache-server-coordinator.service', 'unit_path': unit}
    # every unit a rollback handles is one its backup recorded
    for result in (coordinator_host, peer):
        assert set(s['unit_path'] for s in result['services']) <= set(result['files'])
