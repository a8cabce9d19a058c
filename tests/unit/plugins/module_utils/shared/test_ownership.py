# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The manifest logic (plugins/module_utils/shared/ownership.py): what a deploy claims, what it refuses, what it
adopts from the previous release, and what remove.yml deletes. The observations are what the module's
``observe`` reads from a host (written out here as plain dicts)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership as own

HOST = 'gpu-07'


def plan(**overrides):
    settings = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}
    settings.update(overrides)
    return host_plan.plan_host(HOST, settings, n=544, n_kind='probed')


def entry_of(kind, entries=None, role=None):
    found = [e for e in (entries or plan()['ownership']) if e['kind'] == kind and (role is None or e['role'] == role)]
    assert len(found) == 1, found
    return found[0]


def classify(entry, obs, manifest=None, **context):
    return own.classify(HOST, entry, obs, manifest or {}, context)


DIR_ROOT = {'exists': True, 'link': False, 'type': 'dir', 'uid': 0, 'owner': 'root', 'mode': 0o755}
FILE_ROOT = {'exists': True, 'link': False, 'type': 'file', 'uid': 0, 'owner': 'root', 'mode': 0o644}


# ----------------------------------------------------------------------------- what a deploy creates

def test_the_plan_lists_everything_a_deploy_creates_once():
    entries = plan()['ownership']
    keys = [own.key_of(e) for e in entries]
    assert len(keys) == len(set(keys))
    by_kind = dict((e['kind'], e['path']) for e in entries if e['role'] in ('vllm_server', 'deploy'))
    assert by_kind['unit'] == '/etc/systemd/system/vllm.service'
    assert by_kind['env'] == '/etc/lmcache-vllm-fleet/vllm.env'
    assert by_kind['fingerprint'] == '/etc/lmcache-vllm-fleet/vllm.fingerprint'
    assert by_kind['home'] == '/var/lib/vllm' and by_kind['hf_home'] == '/var/lib/vllm/huggingface'
    assert by_kind['venvs_dir'] == '/opt/vllm' and by_kind['venv'].startswith('/opt/vllm/vllm-')
    assert by_kind['backup_dir'] == '/var/lib/lmcache-vllm-fleet/rollback'
    assert by_kind['probe_cache'] == '/etc/ansible/facts.d/vllm_block_size.fact'
    # the configuration directory is the manifest's directory too: listed once
    assert '/etc/lmcache-vllm-fleet' in keys and 'user:vllm' in keys and 'group:lmcache' in keys
    # the compile caches the warm first start copies: VLLM_CACHE_ROOT and the ones below HOME
    caches = sorted(e['path'] for e in entries if e['kind'] == 'cache')
    assert caches == ['/var/lib/vllm/.cache/flashinfer', '/var/lib/vllm/.triton/cache', '/var/lib/vllm/cache']


@pytest.mark.parametrize('venv', ['/srv/vllm', '/opt/vllm/venv'])
def test_a_venv_given_by_path_has_no_venvs_dir_entry(venv):
    """Even inside the venvs directory (the sandbox's /opt/vllm/venv): it is the operator's, not per version."""
    entries = plan(vllm_server_venv=venv)['ownership']
    found = entry_of('venv', entries, 'vllm_server')
    assert (found['path'], found['variable']) == (venv, 'vllm_server_venv')
    assert [e for e in entries if e['kind'] == 'venvs_dir' and e['role'] == 'vllm_server'] == []
    assert entry_of('venvs_dir', entries, 'lmcache_server')['path'] == '/opt/lmcache'


# ----------------------------------------------------------------------------- the manifest file

def test_manifest_round_trip_and_claims():
    entries = plan()['ownership']
    classified = [(e, 'absent' if e['kind'] == 'unit' else 'adopt' if e['kind'] == 'env' else 'use', None)
                  for e in entries]
    claimed = own.claim({}, classified)
    assert sorted(e['kind'] for e in claimed.values()) == ['env', 'env', 'unit', 'unit']
    text = own.dump_manifest(claimed)
    assert own.parse_manifest(text) == claimed
    assert own.dump_manifest(own.parse_manifest(text)) == text
    assert own.forget(claimed, ['/etc/systemd/system/vllm.service']).keys() == \
        set(claimed) - {'/etc/systemd/system/vllm.service'}


@pytest.mark.parametrize('text, problem', [
    ('{"collection": "other", "entries": {}}', 'not a manifest of lmcache_vllm.fleet'),
    ('{"collection": "lmcache_vllm.fleet", "entries": {"/x": {"kind": "rootfs", "path": "/x"}}}',
     'entry "/x" is not one the collection writes'),
    ('{"collection": "lmcache_vllm.fleet", "entries": {"/x": {"kind": "venv", "path": "/usr"}}}',
     'entry "/x" does not match its path'),
])
def test_a_manifest_that_is_not_the_collections_is_refused(text, problem):
    with pytest.raises(ValueError, match=problem):
        own.parse_manifest(text)


def test_an_empty_manifest_has_no_entries():
    assert own.parse_manifest('') == {}


# ----------------------------------------------------------------------------- units

def test_a_missing_unit_is_claimed():
    assert classify(entry_of('unit', role='vllm_server'), {'exists': False, 'load_state': 'not-found'}) == ('absent', None)


def test_a_distro_unit_of_that_name_is_refused():
    status, problem = classify(entry_of('unit', role='vllm_server'), {
        'exists': False, 'load_state': 'loaded', 'fragment_path': '/usr/lib/systemd/system/vllm.service'})
    assert status == 'foreign'
    assert problem == ('host gpu-07: vllm_server_service_name=vllm names the unit vllm.service, which the host already '
                       'has (/usr/lib/systemd/system/vllm.service) and the collection did not create; choose another '
                       'name (the default is vllm)')


def test_a_masked_unit_is_refused():
    status, problem = classify(entry_of('unit', role='lmcache_server'), {
        'exists': True, 'link': True, 'load_state': 'masked', 'fragment_path': '/dev/null'})
    assert status == 'foreign'
    assert problem == ('host gpu-07: lmcache_server_service_name=lmcache-server names the unit lmcache-server.service, '
                       'which is masked on the host; choose another name (the default is lmcache-server)')


@pytest.mark.parametrize('head, status', [
    ('# Ansible managed\n%s\n[Unit]\n' % own.UNIT_MARKER, 'adopt'),
    ('# Ansible managed\n%s\n[Unit]\n' % own.LEGACY_UNIT_LINE, 'adopt'),
    ('[Unit]\nDescription=the distro vLLM\n', 'foreign'),
])
def test_a_unit_file_in_place_is_adopted_only_with_the_collections_line(head, status):
    obs = dict(FILE_ROOT, head=head, load_state='loaded', fragment_path='/etc/systemd/system/vllm.service')
    found, problem = classify(entry_of('unit', role='vllm_server'), obs)
    assert found == status
    if status == 'foreign':
        assert problem == ('host gpu-07: vllm_server_service_name=vllm /etc/systemd/system/vllm.service exists and has '
                           'no line of the collection (its marker); the collection never overwrites it: move it away '
                           'or choose another name')


def test_the_manifest_makes_a_unit_ours():
    unit = entry_of('unit', role='vllm_server')
    obs = dict(FILE_ROOT, head='[Unit]\n', load_state='loaded', fragment_path=unit['path'])
    assert classify(unit, obs, {own.key_of(unit): unit}) == ('ours', None)


def test_a_symbolic_link_is_never_the_collections():
    env = entry_of('env', role='vllm_server')
    status, problem = classify(env, dict(FILE_ROOT, link=True, type='other'), {own.key_of(env): env})
    assert status == 'foreign'
    assert problem == ('host gpu-07: vllm_server_config_dir=/etc/lmcache-vllm-fleet /etc/lmcache-vllm-fleet/vllm.env '
                       'is a symbolic link, which the collection never follows or replaces; remove the link or choose '
                       'another path')


# ----------------------------------------------------------------------------- files and directories

def test_the_previous_releases_environment_file_is_adopted():
    env = entry_of('env', role='vllm_server')
    legacy = dict(FILE_ROOT, head='#\n# Ansible managed\n#\n' + own.LEGACY_ENV_LINE % 'vllm.service' + '\n')
    assert classify(env, legacy)[0] == 'adopt'
    assert classify(env, dict(FILE_ROOT, head='HF_TOKEN=mine\n'))[0] == 'foreign'


def test_fingerprint_probe_cache_and_backups_are_adopted_only_beside_a_collection_unit():
    fingerprint = entry_of('fingerprint')
    cache = entry_of('probe_cache')
    backups = entry_of('backup_dir')
    hexed = dict(FILE_ROOT, head='ab' * 32 + '\n')
    facts = dict(FILE_ROOT, head=json.dumps({'ab' * 32: {'vllm_block_size': 544, 'schema': 2}}))
    copies = dict(DIR_ROOT, entries=['vllm.service', 'vllm.env'])
    # the probe cache with its section of the M vLLM reported (block_size_probe, option mamba_refusal), or that alone
    m_records = {'mamba_blocks': {'cd' * 32: {'mamba_cache_blocks': 6, 'refused_max_num_seqs': 256}}}
    with_m = dict(FILE_ROOT, head=json.dumps(dict({'ab' * 32: {'vllm_block_size': 544, 'schema': 2}}, **m_records)))
    only_m = dict(FILE_ROOT, head=json.dumps(m_records))
    for item, obs in ((fingerprint, hexed), (cache, facts), (cache, with_m), (cache, only_m), (backups, copies)):
        assert classify(item, obs)[0] == 'foreign', item
        assert classify(item, obs, legacy_host=True, backup_names=['vllm.service', 'vllm.env'])[0] == 'adopt', item
    assert classify(backups, dict(copies, entries=['vllm.service', 'notes.txt']), legacy_host=True,
                    backup_names=['vllm.service'])[0] == 'foreign'


@pytest.mark.parametrize('text', [json.dumps({'entries': {}}), json.dumps({}), json.dumps({'ab' * 32: {'x': 1}}),
                                  json.dumps({'not-a-fingerprint': {'vllm_block_size': 544}}),
                                  json.dumps({'ab' * 32: {'vllm_block_size': 544}, 'mamba_blocks': {'k': {'x': 1}}}),
                                  json.dumps({'ab' * 32: {'vllm_block_size': 544}, 'a': {}, 'b': {}})])
def test_a_root_owned_json_file_that_is_not_the_probe_cache_is_never_adopted(text):
    status, problem = classify(entry_of('probe_cache'), dict(FILE_ROOT, head=text), legacy_host=True)
    assert status == 'foreign' and 'fleet_probe_cache_path=' in problem


def test_per_version_venvs_are_adopted_by_the_collections_helper():
    venv = entry_of('venv', role='vllm_server')
    assert classify(venv, dict(DIR_ROOT, venv_signature=True))[0] == 'adopt'
    status, problem = classify(venv, dict(DIR_ROOT, venv_signature=False, pyvenv_cfg=True))
    assert status == 'foreign'
    assert problem == ('host gpu-07: vllm_server_venvs_dir=/opt/vllm %s exists and is not a virtualenv the collection '
                       'made; the collection never overwrites it: move it away or choose another path' % venv['path'])


def test_a_venv_given_by_path_is_used_but_never_claimed():
    venv = entry_of('venv', plan(vllm_server_venv='/srv/vllm')['ownership'], 'vllm_server')
    assert classify(venv, dict(DIR_ROOT, pyvenv_cfg=True, venv_signature=True)) == ('use', None)
    assert classify(venv, dict(DIR_ROOT, pyvenv_cfg=False))[0] == 'foreign'
    assert classify(venv, dict(DIR_ROOT, pyvenv_cfg=True, mode=0o777))[0] == 'foreign'


@pytest.mark.parametrize('obs, status', [
    (DIR_ROOT, 'use'),
    (dict(DIR_ROOT, mode=0o775), 'foreign'),
    (dict(DIR_ROOT, uid=1000, owner='alice'), 'foreign'),
    (dict(FILE_ROOT), 'foreign'),
])
def test_a_shared_directory_is_used_only_when_only_root_writes_to_it(obs, status):
    assert classify(entry_of('venvs_dir', role='vllm_server'), obs)[0] == status


def test_a_home_of_another_user_is_refused_never_chowned():
    home = entry_of('home')
    status, problem = classify(home, dict(DIR_ROOT, uid=1000, owner='alice', mode=0o700))
    assert status == 'foreign'
    assert problem == ('host gpu-07: vllm_server_home=/var/lib/vllm exists and belongs to alice (uid 1000), not to the '
                       'service user vllm; the collection never chowns it: choose a directory of its own, or remove it '
                       'first')


def test_a_home_of_the_service_user():
    home = entry_of('home')
    mine = dict(DIR_ROOT, uid=998, owner='vllm', mode=0o750)
    assert classify(home, mine, own_users={'vllm'})[0] == 'adopt'
    assert classify(home, mine)[0] == 'use'  # the user is not the collection's: used, never removed


def test_a_hugging_face_cache_of_another_user_is_refused():
    status, problem = classify(entry_of('hf_home'), dict(DIR_ROOT, uid=0, owner='root'))
    assert status == 'foreign'
    assert problem.startswith('host gpu-07: vllm_server_hf_home=/var/lib/vllm/huggingface exists and belongs to root '
                              '(uid 0), not to the service user vllm;')


# ----------------------------------------------------------------------------- accounts

LEGACY_USER = {'exists': True, 'uid': 998, 'gid': 998, 'home': '/var/lib/vllm', 'shell': '/usr/sbin/nologin'}


@pytest.mark.parametrize('obs, legacy, status', [
    ({'exists': False}, False, 'absent'),
    (LEGACY_USER, True, 'adopt'),  # beside a unit the previous release rendered
    (LEGACY_USER, False, 'use'),  # an account the collection did not create is never adopted
    (dict(LEGACY_USER, shell='/bin/bash'), True, 'use'),
    (dict(LEGACY_USER, uid=1001, gid=1001), True, 'use'),
])
def test_users(obs, legacy, status):
    user = [e for e in plan()['ownership'] if own.key_of(e) == 'user:vllm'][0]
    assert classify(user, obs, legacy_units=legacy) == (status, None)


def test_a_group_is_adopted_with_its_user_only_beside_the_previous_releases_unit():
    group = [e for e in plan()['ownership'] if own.key_of(e) == 'group:vllm'][0]
    mine = dict(own_users={'vllm'}, user_gids={'vllm': 998})
    assert classify(group, {'exists': True, 'gid': 998}, legacy_units=True, **mine)[0] == 'adopt'
    assert classify(group, {'exists': True, 'gid': 998}, **mine)[0] == 'use'
    assert classify(group, {'exists': True, 'gid': 998})[0] == 'use'
    assert classify(group, {'exists': True, 'gid': 998}, manifest={own.key_of(group): group})[0] == 'ours'


def test_a_system_group_the_service_user_joined_is_never_adopted():
    # vllm_server_group: video, deployed twice: the user the collection created has video as its primary group
    group = [e for e in plan(vllm_server_group='video')['ownership'] if own.key_of(e) == 'group:video'][0]
    mine = dict(own_users={'vllm'}, user_gids={'vllm': 44}, legacy_units=True)
    assert classify(group, {'exists': True, 'gid': 44}, **mine) == ('use', None)


@pytest.mark.parametrize('obs', [
    {'exists': True, 'uid': 6, 'gid': 12, 'home': '/var/cache/man', 'shell': '/usr/sbin/nologin'},
    {'exists': False},
])
def test_an_account_of_the_distribution_is_refused_even_when_its_home_matches(obs):
    entries = plan(vllm_server_user='man', vllm_server_home='/var/cache/man')['ownership']
    user = [e for e in entries if own.key_of(e) == 'user:man'][0]
    status, problem = classify(user, obs, legacy_units=True)
    assert status == 'foreign' and problem.startswith('host gpu-07: vllm_server_user=man ')
    assert 'use an account of its own' in problem


@pytest.mark.parametrize('kind, name, obs', [
    ('user', 'root', {'exists': True, 'uid': 0, 'gid': 0, 'home': '/root', 'shell': '/bin/bash'}),
    ('user', 'toor', {'exists': True, 'uid': 0, 'gid': 0, 'home': '/var/lib/vllm', 'shell': '/usr/sbin/nologin'}),
    ('group', 'root', {'exists': True, 'gid': 0}),
    ('group', 'wheel0', {'exists': True, 'gid': 0}),
])
def test_root_is_never_a_service_account(kind, name, obs):
    entries = plan(**{'vllm_server_%s' % kind: name})['ownership']
    entry = [e for e in entries if own.key_of(e) == '%s:%s' % (kind, name)][0]
    status, problem = classify(entry, obs, legacy_units=True, own_users={name}, user_gids={name: 0})
    assert status == 'foreign' and 'vllm_server_%s=%s' % (kind, name) in problem, problem


def test_removal_never_deletes_a_system_account_from_a_changed_manifest():
    plan_ = [({'kind': 'user', 'path': 'man'}, 'account'), ({'kind': 'group', 'path': 'video'}, 'account'),
             ({'kind': 'user', 'path': 'vllm'}, 'account')]
    kept, refused = own.removal_checked(HOST, plan_)
    assert [e['path'] for e, _how in kept] == ['vllm'] and len(refused) == 2


# ----------------------------------------------------------------------------- removal

def _removal(**flags):
    entries = dict((own.key_of(e), e) for e in plan()['ownership'])
    files = ('unit', 'env', 'fingerprint', 'probe_cache')
    observed = dict((key, dict(DIR_ROOT, type='file' if e['kind'] in files else 'dir')) for key, e in entries.items())
    return [(own.key_of(e), how) for e, how in own.removal(entries, observed, **flags)]


def test_removal_keeps_caches_models_and_homes_unless_asked():
    kinds = dict((own.key_of(e), e['kind']) for e in plan()['ownership'])
    default = _removal()
    assert set(kinds[k] for k, _how in default) == {
        'unit', 'env', 'fingerprint', 'backup_dir', 'venv', 'venvs_dir', 'config_dir', 'backup_parent', 'user', 'group'}
    assert set(kinds[k] for k, _h in _removal(remove_caches=True)) - set(kinds[k] for k, _h in default) == {
        'probe_cache', 'cache', 'lmcache_home'}
    assert set(kinds[k] for k, _h in _removal(remove_models=True)) - set(kinds[k] for k, _h in default) == {'hf_home'}
    assert 'home' in set(kinds[k] for k, _h in _removal(remove_caches=True, remove_models=True))
    assert not [k for k, how in _removal(remove_users=False) if how == 'account']


def test_removal_order_files_then_trees_then_shared_directories_when_empty():
    order = _removal(remove_caches=True, remove_models=True)
    position = dict((key, index) for index, (key, _how) in enumerate(order))
    assert position['/etc/systemd/system/vllm.service'] < position['/var/lib/lmcache-vllm-fleet/rollback']
    assert position['/var/lib/vllm/cache'] < position['/var/lib/vllm/huggingface'] < position['/var/lib/vllm']
    assert dict(order)['/opt/vllm'] == 'if_empty' and dict(order)['/etc/lmcache-vllm-fleet'] == 'if_empty'
    assert dict(order)['/etc/systemd/system/vllm.service'] == 'file' and dict(order)['/var/lib/vllm'] == 'tree'


def test_removal_skips_links_and_what_is_gone():
    entries = dict((own.key_of(e), e) for e in plan()['ownership'] if e['kind'] in ('unit', 'home'))
    observed = {'/etc/systemd/system/vllm.service': dict(FILE_ROOT, link=True),
                '/etc/systemd/system/lmcache-server.service': {'exists': False},
                '/var/lib/vllm': DIR_ROOT, '/var/lib/lmcache': DIR_ROOT}
    assert own.removal(entries, observed, True, True) == [(entries['/var/lib/vllm'], 'tree')]


def test_users_go_before_their_groups():
    """groupdel refuses the primary group of a user that still exists; the manifest lists groups first (sorted)."""
    entries = own.parse_manifest(own.dump_manifest(dict((own.key_of(e), e) for e in plan()['ownership'])))
    observed = dict((key, {'exists': True}) for key in entries)
    accounts = [own.key_of(e) for e, how in own.removal(entries, observed) if how == 'account']
    assert accounts.index('user:lmcache') < accounts.index('group:lmcache')
    assert accounts.index('user:vllm') < accounts.index('group:vllm')
    assert accounts[:2] == ['user:lmcache', 'user:vllm']


@pytest.mark.parametrize('name, value', [('vllm_server_user', 'root'), ('lmcache_server_group', 'root'),
                                         ('vllm_server_user', 'man'), ('lmcache_server_user', 'www-data')])
def test_the_plan_refuses_root_and_the_distributions_accounts(name, value):
    errors = [e for e in plan(**{name: value})['errors'] if e.startswith('host gpu-07: %s=%s ' % (name, value))]
    assert errors and 'use an account of its own' in errors[0]
