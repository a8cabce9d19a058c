# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role kv_store creates on a store host (the store plan's ``ownership``), how each entry is classified
and removed (plugins/module_utils/shared/ownership.py), and the names and paths the store plan refuses."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership as own

GOOD = {'kv_store_password': 'correct-horse-battery-staple'}
DIR_ROOT = {'exists': True, 'link': False, 'type': 'dir', 'uid': 0, 'owner': 'root', 'mode': 0o755}
FILE_ROOT = {'exists': True, 'link': False, 'type': 'file', 'uid': 0, 'owner': 'root', 'mode': 0o640}


def entries(**settings):
    plan = ks.plan_store('kv-01', dict(GOOD, **settings), None)
    assert plan['errors'] == [], plan['errors']
    return plan['ownership']


def by_key(found):
    return dict((own.key_of(e), e) for e in found)


def test_the_plan_lists_everything_the_role_creates_once():
    found = by_key(entries())
    assert dict((key, e['kind']) for key, e in found.items()) == {
        '/etc/systemd/system/fleet-kv-store.service': 'unit',
        '/etc/fleet-kv-store/fleet-kv-store.conf': 'file',
        '/etc/fleet-kv-store/users.acl': 'file',
        '/etc/fleet-kv-store/installed-by-collection': 'file',
        '/etc/fleet-kv-store': 'config_dir',
        '/var/lib/fleet-kv-store': 'data_dir',
        'user:fleet-kv': 'user',
        'group:fleet-kv': 'group',
        '/etc/lmcache-vllm-fleet': 'manifest_dir',
    }
    assert found['/var/lib/fleet-kv-store']['user'] == 'fleet-kv'
    assert found['user:fleet-kv']['home'] == '/var/lib/fleet-kv-store'
    assert all(e['role'] == 'kv_store' for e in found.values())
    assert all(e['kind'] in own.REMOVE_WHEN for e in found.values())


def test_the_unit_carries_the_collections_marker():
    plan = ks.plan_store('kv-01', GOOD, None)
    assert plan['unit_marker'] == own.UNIT_MARKER
    assert plan['manifest_path'] == '/etc/lmcache-vllm-fleet/kv-store-manifest.json' != own.MANIFEST_PATH


def test_a_unit_the_host_has_is_refused_with_the_stores_default_name():
    unit = by_key(entries(kv_store_service_name='cache'))['/etc/systemd/system/cache.service']
    status, problem = own.classify('kv-01', unit, {'exists': False, 'load_state': 'loaded',
                                                   'fragment_path': '/usr/lib/systemd/system/cache.service'}, {}, {})
    assert status == 'foreign'
    assert problem == ('host kv-01: kv_store_service_name=cache names the unit cache.service, which the host already '
                       'has (/usr/lib/systemd/system/cache.service) and the collection did not create; choose another '
                       'name (the default is fleet-kv-store)')


def test_a_data_directory_of_another_user_is_refused_never_chowned():
    home = by_key(entries(kv_store_home='/var/lib/postgresql'))['/var/lib/postgresql']
    status, problem = own.classify('kv-01', home, dict(DIR_ROOT, uid=105, owner='postgres'), {}, {})
    assert status == 'foreign'
    assert problem == ('host kv-01: kv_store_home=/var/lib/postgresql exists and belongs to postgres (uid 105), not '
                       'to the service user fleet-kv; the collection never chowns it: choose a directory of its own, '
                       'or remove it first')
    assert own.classify('kv-01', home, dict(DIR_ROOT, uid=990, owner='fleet-kv'), {}, {})[0] == 'use'


def test_a_file_in_place_is_never_overwritten_unless_the_manifest_lists_it():
    acl = by_key(entries())['/etc/fleet-kv-store/users.acl']
    status, problem = own.classify('kv-01', acl, FILE_ROOT, {}, {'legacy_host': True})
    assert status == 'foreign'
    assert problem == ('host kv-01: kv_store_config_dir=/etc/fleet-kv-store /etc/fleet-kv-store/users.acl exists and '
                       'was not created by the collection; the collection never overwrites it: move it away or choose '
                       'another path')
    assert own.classify('kv-01', acl, FILE_ROOT, {acl['path']: acl}, {})[0] == 'ours'


def test_removal_deletes_the_stores_files_and_data_then_the_empty_directories_then_the_account():
    manifest = by_key(entries())
    observed = dict((key, dict(FILE_ROOT if e['kind'] in ('unit', 'file') else DIR_ROOT)) for key, e in manifest.items())
    order = [(own.key_of(e), how) for e, how in own.removal(manifest, observed)]
    assert order == [
        ('/etc/systemd/system/fleet-kv-store.service', 'file'),
        ('/etc/fleet-kv-store/fleet-kv-store.conf', 'file'),
        ('/etc/fleet-kv-store/installed-by-collection', 'file'),
        ('/etc/fleet-kv-store/users.acl', 'file'),
        ('/var/lib/fleet-kv-store', 'tree'),
        ('/etc/fleet-kv-store', 'if_empty'),
        ('/etc/lmcache-vllm-fleet', 'if_empty'),
        ('user:fleet-kv', 'account'),
        ('group:fleet-kv', 'account'),
    ]
    kept = own.removal(manifest, observed, remove_users=False)
    assert ('user:fleet-kv', 'account') not in [(own.key_of(e), how) for e, how in kept]


@pytest.mark.parametrize('settings, message', [
    ({'kv_store_service_name': 'redis-server'},
     'host kv-01: kv_store_service_name=redis-server is the unit of a server package (redis-server or valkey-server), '
     'which the role stops and disables when it installs the package; use a name of its own such as fleet-kv-store'),
    ({'kv_store_service_name': 'valkey'}, 'host kv-01: kv_store_service_name=valkey is the unit of a server package'),
    ({'kv_store_service_name': 'store.socket'},
     'host kv-01: kv_store_service_name=store.socket ends in the unit type suffix .socket'),
    ({'kv_store_user': 'redis'}, 'host kv-01: kv_store_user=redis is the account of a server package; use an account '
                                 'of its own such as fleet-kv'),
    ({'kv_store_group': 'valkey'}, 'host kv-01: kv_store_group=valkey is the account of a server package'),
    ({'kv_store_home': '/var/lib'}, 'host kv-01: kv_store_home=/var/lib is the system directory /var/lib; use a '
                                    'directory of its own such as /var/lib/fleet-kv-store'),
    ({'kv_store_home': '/'}, 'host kv-01: kv_store_home=/ is the system directory /'),
    ({'kv_store_home': '/home/alice'}, 'host kv-01: kv_store_home=/home/alice lies directly inside the system '
                                       'directory /home'),
    ({'kv_store_home': '/var/lib/fleet-kv/'}, 'host kv-01: kv_store_home=/var/lib/fleet-kv/ is not written in normal '
                                              'form (no ".", "..", "//" or trailing "/"); write it as /var/lib/fleet-kv'),
    ({'kv_store_home': '/var/lib/x/../postgresql'}, 'host kv-01: kv_store_home=/var/lib/x/../postgresql contains ..; '
                                                    'use an absolute path without .. such as /var/lib/fleet-kv-store'),
    ({'kv_store_home': 'data'}, 'host kv-01: kv_store_home=data is not an absolute path of plain characters; use an '
                                'absolute path of letters, digits and ._+@/- such as /var/lib/fleet-kv-store'),
    ({'kv_store_home': '/var/lib/redis'}, 'host kv-01: kv_store_home=/var/lib/redis is or holds /var/lib/redis, a '
                                          'directory of a server package; use a directory of its own such as '
                                          '/var/lib/fleet-kv-store'),
    ({'kv_store_config_dir': '/etc'}, 'host kv-01: kv_store_config_dir=/etc is the system directory /etc; use a '
                                      'directory of its own such as /etc/fleet-kv-store'),
    ({'kv_store_config_dir': '/etc/valkey'}, 'host kv-01: kv_store_config_dir=/etc/valkey is or holds /etc/valkey'),
    ({'kv_store_config_dir': '/usr/local/etc'}, 'host kv-01: kv_store_config_dir=/usr/local/etc is the system directory'),
    ({'kv_store_home': '/etc/fleet-kv-store/data'},
     'host kv-01: kv_store_home=/etc/fleet-kv-store/data is, holds or lies inside kv_store_config_dir '
     '(/etc/fleet-kv-store); use two separate directories such as /var/lib/fleet-kv-store and /etc/fleet-kv-store'),
    ({'kv_store_manifest_path': '/etc'}, 'host kv-01: kv_store_manifest_path=/etc is the system directory /etc'),
])
def test_names_and_paths_are_refused_and_nothing_is_listed(settings, message):
    plan = ks.plan_store('kv-01', dict(GOOD, **settings), None)
    assert [e for e in plan['ownership_errors'] if e.startswith(message)], plan['ownership_errors']
    assert set(plan['ownership_errors']) <= set(plan['errors'])
    assert 'ownership' not in plan and 'unit_path' not in plan


def test_a_missing_password_does_not_hide_what_removal_needs():
    plan = ks.plan_store('kv-01', {}, None)
    assert plan['errors'] and plan['ownership_errors'] == []
    assert by_key(plan['ownership'])['/var/lib/fleet-kv-store']['kind'] == 'data_dir'
