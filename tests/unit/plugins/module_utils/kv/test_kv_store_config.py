# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/kv/kv_store_config.py: one store host's checks and files."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

import systemd_unit as su

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks

PASSWORD = 'correct-horse-battery-staple'
GOOD = {'kv_store_password': PASSWORD}
BOOKWORM = """redis-server:
  Installed: (none)
  Candidate: 5:7.0.15-1~deb12u7
  Version table:
     5:7.0.15-1~deb12u7 500
        500 http://mirror.example/debian bookworm/main amd64 Packages
"""
BOTH = """valkey-server:
  Installed: (none)
  Candidate: 8.1.1+dfsg1-1
redis-server:
  Installed: (none)
  Candidate: 5:7.0.15-1~deb12u7
"""


def test_apt_policy_is_read():
    assert ks.parse_apt_policy(BOOKWORM) == {'redis-server': '5:7.0.15-1~deb12u7'}
    assert ks.parse_apt_policy('valkey-server:\n  Installed: (none)\n  Candidate: (none)\n') == {'valkey-server': None}


@pytest.mark.parametrize('policy, requested, server', [
    (BOOKWORM, 'auto', 'redis'),
    (BOTH, 'auto', 'valkey'),
    (BOTH, 'redis', 'redis'),
])
def test_valkey_where_packaged_redis_otherwise(policy, requested, server):
    result = ks.plan_store('s', dict(GOOD, kv_store_server=requested), ks.parse_apt_policy(policy))
    assert result['errors'] == []
    assert result['server']['name'] == server
    assert result['unit_lines'][result['unit_lines'].index('[Service]') + 5] == \
        'ExecStart=%s /etc/fleet-kv-store/fleet-kv-store.conf' % ks.SERVERS[server]['binary']


def test_a_server_that_is_not_packaged_is_refused():
    result = ks.plan_store('s', dict(GOOD, kv_store_server='valkey'), ks.parse_apt_policy(BOOKWORM))
    assert result['errors'] == ["host s: kv_store_server=valkey valkey-server is not packaged for this host (apt-cache "
                                "policy); use auto, or install the package's source; Valkey is preferred where "
                                "packaged, Redis otherwise"]
    assert ks.plan_store('s', GOOD, {})['errors'][0].startswith('host s: kv_store_server=auto neither valkey-server nor')


def test_config_sizes_and_evicts_and_keeps_nothing_on_disk():
    lines = ks.plan_store('s', dict(GOOD, kv_store_maxmemory_mb=2048, kv_store_maxmemory_policy='allkeys-lfu'),
                          None)['config_lines']
    for line in ('maxmemory %d' % (2048 << 20), 'maxmemory-policy allkeys-lfu', 'save ""', 'appendonly no', 'bind 127.0.0.1',
                 'port 6379', 'aclfile /etc/fleet-kv-store/users.acl', 'supervised systemd'):
        assert line in lines
    assert not any(line.startswith('cluster-') for line in lines)


def test_cluster_lines():
    lines = ks.plan_store('s', dict(GOOD, kv_store_cluster=True, kv_store_cluster_admin_password='c' * 20),
                          None)['config_lines']
    assert 'cluster-enabled yes' in lines and 'cluster-config-file /var/lib/fleet-kv-store/nodes.conf' in lines


def test_the_acl_file_holds_only_the_hash():
    result = ks.plan_store('s', GOOD, None)
    text = '\n'.join(result['acl_lines'])
    assert PASSWORD not in text
    assert '#' + hashlib.sha256(PASSWORD.encode()).hexdigest() in text
    assert result['acl_lines'][0] == 'user default off'
    assert PASSWORD not in '\n'.join(result['config_lines'] + result['unit_lines'])
    assert result['health']['stdin'] == PASSWORD and result['health']['argv'][-1] == '--askpass'
    assert 'env' not in result['health'], 'a task environment is printed by -vvv even under no_log'
    assert PASSWORD not in ' '.join(result['health']['argv'])


@pytest.mark.parametrize('settings, message', [
    ({'kv_store_bind': '0.0.0.0'},
     'host s: kv_store_bind=0.0.0.0 exposes the store beyond loopback (RESP without TLS: pages and the password cross '
     'the network in clear); use 127.0.0.1 for LMCache servers on this host, or set kv_store_allow_network=true when '
     'other hosts must reach it over a trusted network'),
    ({'kv_store_maxmemory_policy': 'noeviction'},
     'host s: kv_store_maxmemory_policy=noeviction would let a full store refuse writes (LMCache sets no TTL); use '
     'one of allkeys-lru, allkeys-lfu, allkeys-random'),
    ({'kv_store_maxmemory_policy': 'volatile-lru'},
     'host s: kv_store_maxmemory_policy=volatile-lru would let a full store refuse writes (LMCache sets no TTL); use '
     'one of allkeys-lru, allkeys-lfu, allkeys-random'),
    ({'kv_store_maxmemory_mb': 4},
     'host s: kv_store_maxmemory_mb=4 is not an integer >= 16; use the MiB the store may hold, e.g. 1024'),
    ({'kv_store_port': 70000}, 'host s: kv_store_port=70000 is not an integer >= 1 and <= 65535; use a TCP port such as '
                               '6379'),
    ({'kv_store_username': 'default'},
     "host s: kv_store_username=default is the store's unauthenticated user, which the collection turns off; use "
     'another name, e.g. lmcache'),
    ({'kv_store_pools': ['a', 'a']}, 'host s: kv_store_pools=["a", "a"] is not a list of unique pool names; use e.g. '
                                     '[default] (lower-case letters, digits, _ and -, up to 32 characters)'),
    ({'kv_store_home': '/var/lib/../etc'}, 'host s: kv_store_home=/var/lib/../etc contains ..; use an absolute path '
                                           'without .. such as /var/lib/fleet-kv-store'),
    ({'kv_store_pools': ['ok\nbad']}, None),
])
def test_bad_values_are_refused(settings, message):
    errors = ks.plan_store('s', dict(GOOD, **settings), None)['errors']
    assert errors, settings
    if message:
        assert message in errors


@pytest.mark.parametrize('password', ['', 'zq9x', None, 12345678901234567890, 'has a space in it 123'])
def test_a_bad_password_is_refused_without_its_value(password):
    errors = ks.plan_store('s', {'kv_store_password': password}, None)['errors']
    assert len(errors) == 1 and 'kv_store_password (value hidden)' in errors[0]
    if password:
        assert str(password) not in errors[0]


def test_network_bind_with_the_opt_in():
    result = ks.plan_store('s', dict(GOOD, kv_store_bind='10.1.2.3', kv_store_allow_network=True), None)
    assert result['errors'] == []
    assert result['endpoint'] == '10.1.2.3:6379'
    assert result['health']['argv'][:3] == ['/usr/bin/valkey-cli', '-h', '10.1.2.3']


def test_unit_is_hardened_and_parses_back():
    lines = ks.plan_store('s', GOOD, ks.parse_apt_policy(BOOKWORM))['unit_lines']
    for setting in ('ProtectSystem=strict', 'PrivateDevices=true', 'MemoryDenyWriteExecute=true',
                    'CapabilityBoundingSet=', 'User=fleet-kv', 'Type=notify', 'ReadWritePaths=-/var/lib/fleet-kv-store'):
        assert setting in lines
    exec_start = [line for line in lines if line.startswith('ExecStart=')][0][len('ExecStart='):]
    assert su.parse_exec(exec_start, {})[1] == ['/usr/bin/redis-server', '/etc/fleet-kv-store/fleet-kv-store.conf']


@pytest.mark.skipif(not os.path.exists('/usr/bin/redis-server'), reason='redis-server is not installed here')
def test_redis_accepts_the_configuration(tmp_path):
    """The real redis-server reads the rendered configuration and ACL file (--test-memory is not used: a real start)."""
    (tmp_path / 'data').mkdir()
    (tmp_path / 'etc').mkdir()
    plan = ks.plan_store('s', dict(GOOD, kv_store_home=str(tmp_path / 'data'), kv_store_config_dir=str(tmp_path / 'etc'),
                                   kv_store_port=16379), ks.parse_apt_policy(BOOKWORM))
    conf = tmp_path / 'etc' / 'fleet-kv-store.conf'
    conf.write_text('\n'.join(line for line in plan['config_lines'] if line != 'supervised systemd') + '\n')
    (tmp_path / 'etc' / 'users.acl').write_text('\n'.join(plan['acl_lines']) + '\n')
    server = subprocess.Popen(['/usr/bin/redis-server', str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        env = dict(os.environ)
        env.pop('REDISCLI_AUTH', None)
        argv = [a if a != '/usr/bin/valkey-cli' else '/usr/bin/redis-cli' for a in plan['health']['argv']]
        secret = plan['health']['stdin'] + '\n'  # as the command module's stdin (stdin_add_newline)
        for attempt in range(50):
            ping = subprocess.run(check=False, args=argv + ['PING'], env=env, input=secret, capture_output=True, text=True)
            if ping.stdout.strip() == 'PONG':
                break
            subprocess.run(check=False, args=['sleep', '0.1'])
        assert ping.stdout.strip() == 'PONG'
        anonymous = subprocess.run(check=False, args=['/usr/bin/redis-cli', '-p', '16379', 'PING'], capture_output=True, text=True)
        assert 'NOAUTH' in anonymous.stdout + anonymous.stderr
        denied = subprocess.run(check=False, args=argv + ['FLUSHALL'], env=env, input=secret, capture_output=True, text=True)
        assert 'NOPERM' in denied.stdout + denied.stderr
        info = subprocess.run(check=False, args=argv + ['CONFIG', 'GET', 'maxmemory'], env=env, input=secret, capture_output=True, text=True)
        assert 'NOPERM' in info.stdout + info.stderr
        memory = subprocess.run(check=False, args=argv + ['INFO', 'memory'], env=env, input=secret, capture_output=True, text=True).stdout
        assert 'maxmemory:1073741824' in memory and 'maxmemory_policy:allkeys-lru' in memory
    finally:
        server.terminate()
        server.wait(10)


ADMIN_PASSWORD = 'cluster-admin-password-0123'
CLUSTER = dict(GOOD, kv_store_cluster=True, kv_store_cluster_admin_password=ADMIN_PASSWORD)


def cluster_plans(count=3, **settings):
    return [ks.plan_store('kv-%d' % i, dict(CLUSTER, kv_store_port=7000 + i, **settings), ks.parse_apt_policy(BOOKWORM))
            for i in range(count)]


def test_a_cluster_has_an_administrator_of_its_own_in_the_acl_file():
    plan = ks.plan_store('s', CLUSTER, None)
    assert plan['errors'] == []
    admin = 'user fleet-cluster-admin on %s resetkeys resetchannels -@all +cluster +info +ping' % ks.password_hash(
        ADMIN_PASSWORD)
    assert plan['acl_lines'][2] == admin and len(plan['acl_lines']) == 3
    # LMCache's user keeps no @admin: it cannot create or change the cluster.
    assert plan['acl_lines'][1].endswith(' -@admin -flushall -flushdb')
    assert ADMIN_PASSWORD not in '\n'.join(plan['acl_lines'] + plan['config_lines'] + plan['unit_lines'])
    assert ADMIN_PASSWORD not in repr(plan['values']) and ADMIN_PASSWORD not in repr(plan['summary'])
    assert ADMIN_PASSWORD not in repr(plan['health'])
    assert ks.plan_store('s', GOOD, None)['cluster'] is None
    assert len(ks.plan_store('s', GOOD, None)['acl_lines']) == 2


def test_the_cluster_step_is_the_administrators_cli():
    plan = cluster_plans()[0]
    assert plan['cluster']['admin_argv'] == ['/usr/bin/redis-cli', '--user', 'fleet-cluster-admin', '--no-auth-warning',
                                             '--askpass']
    assert plan['cluster']['stdin'] == ADMIN_PASSWORD and plan['cluster']['info']['stdin'] == ADMIN_PASSWORD
    assert plan['cluster']['info']['argv'] == ['/usr/bin/redis-cli', '-h', '127.0.0.1', '-p', '7000', '--user',
                                               'fleet-cluster-admin', '--no-auth-warning', '--askpass', 'CLUSTER', 'INFO']
    assert plan['cluster']['unformed'] == 'cluster_slots_assigned:0'


@pytest.mark.parametrize('settings', [
    {'kv_store_cluster_admin_password': ''},
    {'kv_store_cluster_admin_password': 'zq9x'},
    {'kv_store_cluster_admin_password': PASSWORD},
    {'kv_store_cluster_admin_password': 'has a space in it 0123'},
    {'kv_store_cluster_admin_password': 'control\x07character-0123'},
])
def test_the_administrators_password_is_required_and_never_shown(settings):
    errors = ks.plan_store('s', dict(CLUSTER, **settings), None)['errors']
    assert len(errors) == 1 and 'kv_store_cluster_admin_password (value hidden)' in errors[0], errors
    assert 'vault' in errors[0]
    if settings['kv_store_cluster_admin_password']:
        assert settings['kv_store_cluster_admin_password'] not in errors[0]


@pytest.mark.parametrize('name', ['lmcache', 'default', 'bad name', None])
def test_the_administrator_is_not_lmcaches_user(name):
    errors = ks.plan_store('s', dict(CLUSTER, kv_store_cluster_admin_username=name), None)['errors']
    assert len(errors) == 1 and errors[0].startswith('host s: kv_store_cluster_admin_username=')


def test_without_cluster_the_administrator_is_not_asked_for():
    assert ks.plan_store('s', dict(GOOD, kv_store_cluster_admin_username=None), None)['errors'] == []


def test_cluster_create_runs_on_the_first_store_against_every_store():
    plans = cluster_plans() + [ks.plan_store('single', GOOD, None)]
    create = ks.cluster_create(plans)
    assert create['host'] == 'kv-0' and create['errors'] == []
    assert create['nodes'] == ['127.0.0.1:7000', '127.0.0.1:7001', '127.0.0.1:7002']
    assert create['argv'] == ['/usr/bin/redis-cli', '--user', 'fleet-cluster-admin', '--no-auth-warning', '--askpass',
                              '--cluster', 'create', '127.0.0.1:7000', '127.0.0.1:7001', '127.0.0.1:7002', '--cluster-yes']
    assert create['stdin'] == ADMIN_PASSWORD
    assert ADMIN_PASSWORD not in ' '.join(create['argv'])


def test_cluster_create_refuses_stores_that_disagree():
    plans = cluster_plans()
    plans[2] = ks.plan_store('kv-2', dict(CLUSTER, kv_store_port=7002, kv_store_cluster_admin_password='x' * 20),
                             ks.parse_apt_policy(BOOKWORM))
    errors = ks.cluster_create(plans)['errors']
    assert errors == ["host kv-2: kv_store_cluster_admin_username or kv_store_cluster_admin_password (value hidden) "
                      "differs from kv-0's; every store of one cluster needs the same"]
    assert ks.cluster_create(cluster_plans(2))['errors'] == [
        'the play has 2 store(s) with kv_store_cluster (kv-0, kv-1); a cluster needs at least 3']
    assert ks.cluster_create([ks.plan_store('single', GOOD, None)])['argv'] == []


FORMED = 'cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_known_nodes:3\r\n'


def test_cluster_problem_reads_cluster_info():
    assert ks.cluster_problem(FORMED, 3) == ''
    assert ks.cluster_fields(FORMED)['cluster_known_nodes'] == '3'
    problem = ks.cluster_problem('cluster_state:fail\ncluster_slots_assigned:0\ncluster_known_nodes:1\n', 3)
    assert problem.startswith('the cluster is not formed: cluster_state:fail (not ok), cluster_slots_assigned:0 (not '
                              '16384), cluster_known_nodes:1 (not 3); ')
    assert 'CLUSTER RESET' in problem
    assert 'cluster_known_nodes:3 (not 4)' in ks.cluster_problem(FORMED, 4)
    assert 'cluster_state:? (not ok)' in ks.cluster_problem('NOAUTH Authentication required.', 3)
