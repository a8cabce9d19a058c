# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/kv/kv_store_exporter.py: the KV store's Prometheus exporter in the store plan.

The last test runs Debian's real prometheus-redis-exporter 1.45 against the real redis-server, both started from
the rendered files (configuration, ACL file, the exporter's environment file and command). A missing binary skips
it, or fails it where CI or FLEET_REQUIRE_REAL=1 asks for the real programs (scripts/setup-tools.sh installs both).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

import systemd_unit as su
from prometheus_tools import prometheus_program

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_exporter as kx

PASSWORD = 'correct-horse-battery-staple'
EXPORTER_PASSWORD = 'an-exporter-"$`\\-password'
ON = {'kv_store_password': PASSWORD, 'kv_store_exporter': True, 'kv_store_exporter_password': EXPORTER_PASSWORD}


def plan(**settings):
    return ks.plan_store('s', dict(ON, **settings), None)


def test_off_by_default_nothing_of_the_exporter_is_written_or_claimed():
    result = ks.plan_store('s', {'kv_store_password': PASSWORD}, None)
    assert result['errors'] == []
    assert result['exporter']['enabled'] is False
    assert 'unit_lines' not in result['exporter'] and 'env_lines' not in result['exporter']
    assert [line.split()[1] for line in result['acl_lines']] == ['default', 'lmcache']
    exporter_paths = set(result['exporter_paths'][k] for k in ('unit_path', 'env_path', 'marker_path'))
    assert not exporter_paths & set(e['path'] for e in result['ownership'])
    # remove.yml still looks for them (an exporter that was on before)
    assert exporter_paths <= set(e['path'] for e in result['ownership_all'])
    assert result['summary']['exporter'] is None


def test_the_exporter_unit_is_hardened_and_holds_no_secret():
    result = plan()
    assert result['errors'] == []
    e = result['exporter']
    assert e['unit_path'] == '/etc/systemd/system/fleet-kv-store-exporter.service'
    sections = su.parse_unit('\n'.join(e['unit_lines']))
    for key, value in (('DynamicUser', 'true'), ('EnvironmentFile', '/etc/fleet-kv-store/exporter.env'),
                       ('ProtectSystem', 'strict'), ('MemoryDenyWriteExecute', 'true'), ('ProtectHome', 'true'),
                       ('PrivateDevices', 'true'), ('Type', 'exec')):
        assert su.values(sections, 'Service', key) == [value], key
    for setting in ks.HARDENING:
        assert setting in e['unit_lines']
    (exec_start,) = su.values(sections, 'Service', 'ExecStart')
    assert su.parse_exec(exec_start, {})[1] == ['/usr/bin/prometheus-redis-exporter', '-redis.addr=redis://127.0.0.1:6379',
                                                '-web.listen-address=127.0.0.1:9121']
    assert 'After=network-online.target fleet-kv-store.service' in e['unit_lines']
    everything = '\n'.join(e['unit_lines'] + e['argv'] + result['config_lines'] + result['acl_lines'])
    assert EXPORTER_PASSWORD not in everything and PASSWORD not in everything
    assert result['summary']['exporter'] == '127.0.0.1:9121'


def test_the_environment_file_reads_back_as_systemd_reads_it():
    env = su.parse_env_file('\n'.join(plan()['exporter']['env_lines']) + '\n')
    assert env == {'REDIS_USER': 'fleet-exporter', 'REDIS_PASSWORD': EXPORTER_PASSWORD}


def test_the_exporter_user_may_run_only_what_the_exporter_runs():
    lines = plan()['acl_lines']
    assert lines[:2] == ks.acl_lines('lmcache', PASSWORD)
    assert lines[2] == 'user fleet-exporter on #%s resetkeys resetchannels -@all +info +ping +config|get ' \
                       '+client|setname +latency|latest +slowlog|get +slowlog|len +cluster|info' % (
                           hashlib.sha256(EXPORTER_PASSWORD.encode()).hexdigest())
    assert ks.ACL_RULES == '~* &* +@all -@admin -flushall -flushdb'


@pytest.mark.parametrize('bind, exporter_bind, allow, listen, addr', [
    ('0.0.0.0', None, True, '0.0.0.0:9121', 'redis://127.0.0.1:6379'),
    ('::', None, True, '[::]:9121', 'redis://[::1]:6379'),
    ('10.1.2.3', None, True, '10.1.2.3:9121', 'redis://10.1.2.3:6379'),
    ('127.0.0.1', '10.1.2.3', True, '10.1.2.3:9121', 'redis://127.0.0.1:6379'),
])
def test_where_it_listens_and_dials(bind, exporter_bind, allow, listen, addr):
    e = plan(kv_store_bind=bind, kv_store_exporter_bind=exporter_bind, kv_store_allow_network=allow)['exporter']
    assert (e['listen'], e['redis_addr']) == (listen, addr)
    assert e['argv'][1:] == ['-redis.addr=%s' % addr, '-web.listen-address=%s' % listen]


@pytest.mark.parametrize('settings, message', [
    ({'kv_store_exporter_password': ''},
     'host s: kv_store_exporter_password (value hidden) is missing, not a string, shorter than 16 characters or holds '
     'spaces or control characters; set it from a vault, e.g. kv_store_exporter_password: '
     '"{{ vault_kv_store_exporter_password }}", or set kv_store_exporter=false'),
    ({'kv_store_exporter_password': PASSWORD},
     "host s: kv_store_exporter_password (value hidden) is the LMCache user's password (kv_store_password); give the "
     'exporter a password of its own (a second vault variable)'),
    ({'kv_store_exporter_username': 'lmcache'},
     'host s: kv_store_exporter_username=lmcache is the LMCache user (kv_store_username); use a user of its own, '
     'e.g. fleet-exporter'),
    ({'kv_store_exporter_username': 'default'},
     "host s: kv_store_exporter_username=default is the store's unauthenticated user; use a user of its own, e.g. "
     'fleet-exporter'),
    ({'kv_store_exporter_port': 6379},
     "host s: kv_store_exporter_port=6379 is the store's own port (kv_store_port); use another port, e.g. 9121"),
    ({'kv_store_exporter_port': 0}, 'host s: kv_store_exporter_port=0 is not an integer >= 1 and <= 65535; use a TCP '
                                    'port such as 9121'),
    ({'kv_store_exporter_bind': '0.0.0.0'},
     'host s: kv_store_exporter_bind=0.0.0.0 exposes the exporter beyond loopback (its /metrics has no authentication); '
     'use 127.0.0.1 for a Prometheus on this host, or set kv_store_allow_network=true when Prometheus scrapes it over '
     'a trusted network'),
    ({'kv_store_service_name': 'prometheus-redis'},
     'host s: kv_store_service_name=prometheus-redis names the unit of the package prometheus-redis-exporter (or its '
     'exporter would); use a name of its own such as fleet-kv-store'),
    ({'kv_store_user': 'prometheus'}, 'host s: kv_store_user=prometheus is the account of a server package; use an '
                                      'account of its own such as fleet-kv'),
    ({'kv_store_home': '/var/lib/prometheus/kv'}, None),
    ({'kv_store_exporter': 'sometimes'}, 'host s: kv_store_exporter=sometimes is not a boolean; use true or false'),
])
def test_bad_values_are_refused(settings, message):
    errors = plan(**settings)['errors']
    assert errors, settings
    if message:
        assert message in errors
    assert all(EXPORTER_PASSWORD not in e for e in errors)


def test_a_password_with_a_control_character_is_refused_without_its_value():
    secret = 'line-one-of-a-secret\nline-two'
    errors = plan(kv_store_exporter_password=secret)['errors']
    assert len(errors) == 1 and 'kv_store_exporter_password (value hidden)' in errors[0]
    assert 'line-one' not in errors[0]


def test_the_password_is_not_asked_for_while_the_exporter_is_off():
    assert ks.plan_store('s', {'kv_store_password': PASSWORD, 'kv_store_exporter': False}, None)['errors'] == []
    # nor is its port kept free
    assert ks.plan_store('s', {'kv_store_password': PASSWORD, 'kv_store_port': 9121}, None)['errors'] == []


def test_the_store_manifest_claims_the_exporter_unit_its_environment_file_and_marker():
    result = plan()
    by_path = dict((e['path'], e) for e in result['ownership'])
    unit = by_path['/etc/systemd/system/fleet-kv-store-exporter.service']
    assert (unit['kind'], unit['value'], unit['unit']) == ('unit', 'fleet-kv-store-exporter', 'fleet-kv-store-exporter')
    assert by_path['/etc/fleet-kv-store/exporter.env']['kind'] == 'env'
    assert by_path['/etc/fleet-kv-store/exporter-installed-by-collection']['kind'] == 'file'
    assert result['ownership'] == result['ownership_all']
    assert result['exporter_paths']['package'] == 'prometheus-redis-exporter'


def test_scrape_targets():
    stores = [
        {'host': 'kv-1', 'address': '10.0.0.5', 'pools': ['a', 'b'],
         'exporter': {'enabled': True, 'bind': '0.0.0.0', 'port': 9121}, 'labels': {'cluster': 'eu-1'}},
        {'host': 'kv-2', 'address': 'kv-2', 'pools': ['a'], 'exporter': {'enabled': True, 'bind': 'fd00::7', 'port': 9122}},
        {'host': 'kv-3', 'pools': ['a'], 'exporter': {'enabled': True, 'bind': '127.0.0.1', 'port': 9121}},
        {'host': 'kv-4', 'pools': ['a'], 'exporter': {'enabled': False, 'bind': '0.0.0.0', 'port': 9121}},
    ]
    result = kx.scrape_targets(stores)
    assert result['targets'] == [
        {'targets': ['10.0.0.5:9121'], 'labels': {'host': 'kv-1', 'service': 'kv_store', 'pools': 'a,b', 'cluster': 'eu-1'}},
        {'targets': ['[fd00::7]:9122'], 'labels': {'host': 'kv-2', 'service': 'kv_store', 'pools': 'a'}}]
    assert result['skipped'] == [
        "host kv-3: the KV store's exporter listens on 127.0.0.1 (kv_store_exporter_bind, else kv_store_bind), which "
        "Prometheus cannot reach from another machine; set kv_store_exporter_bind to the host's private address and "
        'kv_store_allow_network=true']


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _real_programs():
    missing = [p for p in ('/usr/bin/redis-server', kx.BINARY) if not os.access(p, os.X_OK)]
    if missing:
        text = '%s missing (scripts/setup-tools.sh installs redis-server and prometheus-redis-exporter)' % ', '.join(missing)
        if os.environ.get('CI') or os.environ.get('FLEET_REQUIRE_REAL') == '1':
            pytest.fail(text)
        pytest.skip(text)


def _scrape(url, deadline):
    text = ''
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
            if '\nredis_up 1\n' in text:
                return text
        except OSError:
            pass
        time.sleep(0.2)
    return text


def test_the_real_exporter_reads_the_real_store_as_its_own_user(tmp_path):
    """redis-server from the rendered configuration and ACL file; the exporter with the rendered command and the
    environment file read back as systemd reads it. Every scrape command is allowed (no scrape error), no key is."""
    _real_programs()
    (tmp_path / 'data').mkdir()
    (tmp_path / 'etc').mkdir()
    port, metrics_port = _free_port(), _free_port()
    result = ks.plan_store('s', dict(ON, kv_store_home=str(tmp_path / 'data'), kv_store_config_dir=str(tmp_path / 'etc'),
                                     kv_store_port=port, kv_store_exporter_port=metrics_port), None)
    assert result['errors'] == []
    conf = tmp_path / 'etc' / 'fleet-kv-store.conf'
    conf.write_text('\n'.join(line for line in result['config_lines'] if line != 'supervised systemd') + '\n')
    (tmp_path / 'etc' / 'users.acl').write_text('\n'.join(result['acl_lines']) + '\n')
    e = result['exporter']
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('REDIS'))
    env.update(su.parse_env_file('\n'.join(e['env_lines']) + '\n'))
    server = subprocess.Popen(['/usr/bin/redis-server', str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    log = open(str(tmp_path / 'exporter.log'), 'w')
    exporter = subprocess.Popen(e['argv'], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        text = _scrape('http://%s/metrics' % e['listen'], time.time() + 30)
        assert '\nredis_up 1\n' in text, (tmp_path / 'exporter.log').read_text()
        samples = dict(line.rsplit(' ', 1) for line in text.splitlines() if line and not line.startswith('#'))
        assert float(samples['redis_memory_used_bytes']) > 0
        assert float(samples['redis_memory_max_bytes']) == 1024 * 1048576
        assert float(samples['redis_evicted_keys_total']) == 0
        assert 'redis_keyspace_hits_total' in samples and 'redis_keyspace_misses_total' in samples
        assert samples['redis_exporter_last_scrape_error{err=""}'] == '0'
        assert 'redis_slowlog_last_id' in samples  # SLOWLOG GET answered
        # every command of a scrape is allowed to the exporter's user: the store refused none (the exporter itself
        # leaves a refused command's metrics out silently)
        cli = ['/usr/bin/redis-cli', '-p', str(port), '--user', 'fleet-exporter', '--no-auth-warning']
        auth = dict(os.environ, REDISCLI_AUTH=EXPORTER_PASSWORD)
        errors = subprocess.run(cli + ['INFO', 'errorstats'], env=auth, capture_output=True, text=True, check=False)
        assert errors.returncode == 0 and '# Errorstats' in errors.stdout
        assert 'NOPERM' not in errors.stdout, errors.stdout
        with open('/proc/%d/cmdline' % exporter.pid, 'rb') as handle:
            assert EXPORTER_PASSWORD.encode() not in handle.read()
        for denied in (['GET', 'k'], ['SET', 'k', 'v'], ['KEYS', '*'], ['CONFIG', 'SET', 'maxmemory', '1']):
            answer = subprocess.run(cli + denied, env=auth, capture_output=True, text=True, check=False)
            assert 'NOPERM' in answer.stdout + answer.stderr, denied
        assert 'PASSWORD' not in (tmp_path / 'exporter.log').read_text().upper()
        if shutil.which('promtool') or os.environ.get('FLEET_REQUIRE_PROMTOOL') == '1':
            checked = subprocess.run([prometheus_program('promtool'), 'check', 'metrics'], input=text,
                                     capture_output=True, text=True, check=False)
            # 3: the exporter's own names draw lint findings (units, _total suffixes); 1: the text does not parse
            assert checked.returncode in (0, 3), checked.stdout + checked.stderr
            assert 'error while linting' not in checked.stdout + checked.stderr
    finally:
        exporter.terminate()
        exporter.wait(10)
        log.close()
        server.terminate()
        server.wait(10)


def test_the_exporter_and_the_cluster_administrator_are_two_users():
    result = plan(kv_store_cluster=True, kv_store_cluster_admin_password='c' * 20,
                  kv_store_exporter_username='fleet-cluster-admin')
    assert [e for e in result['errors'] if 'kv_store_exporter_username' in e] == [
        "host s: kv_store_exporter_username=fleet-cluster-admin is the cluster's administrator "
        "(kv_store_cluster_admin_username); use a user of its own, e.g. fleet-exporter"]
    both = plan(kv_store_cluster=True, kv_store_cluster_admin_password='c' * 20)
    assert both['errors'] == []
    users = [line.split()[1] for line in both['acl_lines']]
    assert users == ['default', 'lmcache', 'fleet-cluster-admin', 'fleet-exporter']
