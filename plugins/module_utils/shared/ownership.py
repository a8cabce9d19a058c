# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection owns on a host, and the rules that keep it off everything else.

Pure logic (no host access), used by the host plan (path and unit-name rules, the list of what a host's
deploy creates), by the ``fleet_ownership`` module (which reads the host and applies ``classify`` and
``removal``) and by the tests:

- ``SYSTEM_DIRECTORIES``: the one table of the directories a path variable may never name, and whether a
  package may keep its own directory directly inside them (FHS: ``/opt/<package>``, ``/var/lib/<package>``).
- ``path_problem`` / ``unit_name_problem``: the refusal (problem, fix) of a path variable or a unit name.
- ``candidates``: every unit, file, directory, user and group a host's deploy would create, from its plan.
- ``classify``: given what the host holds at each candidate (``observe`` in the module), whether it is
  absent (the collection will create it and claims it), the collection's (in the manifest, or adopted from
  the previous release), usable without being the collection's, or foreign (refused).
- the manifest: ``parse_manifest``, ``claim``, ``forget``, ``dump_manifest``; ``removal`` decides what
  ``remove.yml`` deletes (manifest entries only).
"""

from __future__ import annotations

import json
import posixpath
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache

MANIFEST_PATH = '/etc/lmcache-vllm-fleet/manifest.json'
MANIFEST_VERSION = 1
COLLECTION = 'lmcache_vllm.fleet'

# The deploy's own paths (playbook variables, not a role's) and their defaults; the host plan checks them.
FLEET_PATHS = {
    'fleet_backup_dir': '/var/lib/lmcache-vllm-fleet/rollback',
    'fleet_probe_cache_path': '/etc/ansible/facts.d/vllm_block_size.fact',
    'fleet_manifest_path': MANIFEST_PATH,
}
# The example a refusal of a path variable gives (the roles' defaults, spelt out where those are null).
PATH_EXAMPLES = dict(FLEET_PATHS, vllm_server_venv='/opt/vllm/venv', lmcache_server_venv='/opt/lmcache/venv',
                     vllm_server_venvs_dir='/opt/vllm', lmcache_server_venvs_dir='/opt/lmcache',
                     vllm_server_home='/var/lib/vllm', lmcache_server_home='/var/lib/lmcache',
                     vllm_server_hf_home='/var/lib/vllm/huggingface', vllm_server_config_dir='/etc/lmcache-vllm-fleet',
                     lmcache_server_config_dir='/etc/lmcache-vllm-fleet',
                     kv_store_home='/var/lib/fleet-kv-store', kv_store_config_dir='/etc/fleet-kv-store',
                     kv_store_manifest_path='/etc/lmcache-vllm-fleet/kv-store-manifest.json')
# Each role's default unit name, for the fix of a refused one.
DEFAULT_UNITS = {'vllm_server': 'vllm', 'lmcache_server': 'lmcache-server', 'kv_store': 'fleet-kv-store'}

# Every unit file the collection writes carries this line; a unit without it is not the collection's.
UNIT_MARKER = '# lmcache_vllm.fleet: this unit belongs to the collection (remove.yml deletes it; do not copy this line)'
# The previous release wrote this line (and no marker) into every unit it rendered: such a unit is adopted.
LEGACY_UNIT_LINE = '# Every line comes from the host plan (plugins/module_utils/plan/host_plan.py), escaped for systemd.'
# The previous release's environment files began with this line after the managed-by comment.
LEGACY_ENV_LINE = '# Environment of %s: secrets and extra variables (mode 0600).'
# Every virtualenv the collection makes holds its readiness helper.
VENV_SIGNATURE = 'bin/fleet-wait-ready'
NOLOGIN_SHELLS = ('/usr/sbin/nologin', '/sbin/nologin', '/bin/false', '/usr/bin/false')
UNIT_DIR = '/etc/systemd/system'
# Debian's statically allocated system ids (base-passwd): never a service account of the collection.
STATIC_SYSTEM_IDS = 100
SYSTEM_ACCOUNTS = frozenset(('root', 'daemon', 'bin', 'sys', 'sync', 'games', 'man', 'lp', 'mail', 'news', 'uucp',
                             'proxy', 'www-data', 'backup', 'list', 'irc', 'gnats', 'nobody', 'nogroup', 'systemd-network',
                             'systemd-resolve', 'systemd-timesync', 'messagebus', 'sshd', '_apt', 'adm', 'tty', 'disk',
                             'kmem', 'dialout', 'cdrom', 'floppy', 'tape', 'sudo', 'audio', 'dip', 'video', 'plugdev',
                             'render', 'staff', 'users', 'shadow', 'utmp', 'operator', 'src', 'voice', 'fax', 'sasl',
                             'input', 'kvm', 'systemd-journal', 'ssh', 'crontab', 'wheel', 'polkitd', 'redis'))

# path -> True when a package may keep its own directory directly inside it (/opt/vllm, /var/lib/vllm,
# /etc/lmcache-vllm-fleet), False when what lies directly inside belongs to the system (/usr/bin/python3,
# /home/alice, /tmp/x). A path variable may never be one of these, nor lie directly inside a False one.
SYSTEM_DIRECTORIES = {
    '/': False, '/bin': False, '/boot': False, '/dev': False, '/etc': True, '/home': False, '/lib': False,
    '/lib32': False, '/lib64': False, '/libx32': False, '/lost+found': False, '/media': False, '/mnt': False,
    '/opt': True, '/proc': False, '/root': False, '/run': False, '/sbin': False, '/snap': False, '/srv': True,
    '/sys': False, '/tmp': False, '/usr': False, '/var': False,
    '/usr/bin': False, '/usr/games': False, '/usr/include': False, '/usr/lib': False, '/usr/lib32': False,
    '/usr/lib64': False, '/usr/libexec': False, '/usr/libx32': False, '/usr/local': False, '/usr/sbin': False,
    '/usr/share': False, '/usr/src': False,
    '/usr/local/bin': False, '/usr/local/etc': False, '/usr/local/games': False, '/usr/local/include': False,
    '/usr/local/lib': False, '/usr/local/man': False, '/usr/local/sbin': False, '/usr/local/share': False,
    '/usr/local/src': False,
    '/var/backups': False, '/var/cache': True, '/var/crash': False, '/var/lib': True, '/var/local': False,
    '/var/lock': False, '/var/log': False, '/var/mail': False, '/var/opt': True, '/var/run': False,
    '/var/spool': False, '/var/tmp': False,
    '/etc/ansible': False, '/etc/ansible/facts.d': True, '/etc/apt': False, '/etc/cron.d': False,
    '/etc/default': False, '/etc/init.d': False, '/etc/pam.d': False, '/etc/security': False, '/etc/ssh': False,
    '/etc/ssl': False, '/etc/sudoers.d': False, '/etc/systemd': False, '/etc/systemd/system': False,
    '/etc/profile.d': False, '/etc/sysctl.d': False, '/etc/modprobe.d': False, '/etc/udev': False,
    '/var/cache/apt': False, '/var/cache/dnf': False, '/var/lib/apt': False, '/var/lib/containers': False,
    '/var/lib/dnf': False, '/var/lib/docker': False, '/var/lib/dpkg': False, '/var/lib/rpm': False,
    '/var/lib/systemd': False,
}

# systemd's unit types: a service name ending in one makes systemctl act on that other unit.
UNIT_TYPE_SUFFIXES = ('.service', '.socket', '.device', '.mount', '.automount', '.swap', '.target', '.path',
                      '.timer', '.slice', '.scope')

# When remove.yml deletes an entry of each kind: always, only when empty (shared directories), or only
# with fleet_remove_caches / fleet_remove_models (both for the vLLM home). 'mamba_cache' is no longer claimed (M
# lives in the probe's cache): the manifests of hosts deployed before still list that file, and remove.yml deletes it.
REMOVE_WHEN = {
    'unit': 'always', 'env': 'always', 'file': 'always', 'data_dir': 'always', 'fingerprint': 'always', 'mamba_cache': 'always', 'venv': 'always',
    'backup_dir': 'always',
    'venvs_dir': 'empty', 'config_dir': 'empty', 'backup_parent': 'empty', 'manifest_dir': 'empty',
    'probe_cache': 'caches', 'cache': 'caches', 'lmcache_home': 'caches', 'hf_home': 'models',
    'home': 'caches+models', 'user': 'users', 'group': 'users',
}
# Deletion order: files, then trees, then directories that go only when empty (deepest first), then the
# users before their groups (groupdel refuses a user's primary group).
_ORDER = ('unit', 'env', 'file', 'fingerprint', 'mamba_cache', 'probe_cache', 'backup_dir', 'venv', 'cache', 'hf_home',
          'lmcache_home', 'data_dir', 'home', 'venvs_dir', 'config_dir', 'backup_parent', 'manifest_dir', 'user', 'group')


# --------------------------------------------------------------------------- rules of names and paths

def path_problem(value, example):
    """None, or (problem, fix) for a path variable's value (a string that passed the plain-characters check)."""
    if not isinstance(value, str) or not value.startswith('/'):
        return 'is not an absolute path', 'use an absolute path such as %s' % example
    normal = posixpath.normpath(value)
    if normal.startswith('//'):
        normal = '/' + normal.lstrip('/')
    if normal != value:
        return ('is not written in normal form (no ".", "..", "//" or trailing "/")',
                'write it as %s' % normal if normal not in SYSTEM_DIRECTORIES else 'use a path such as %s' % example)
    if value in SYSTEM_DIRECTORIES:
        return 'is the system directory %s' % value, 'use a directory of its own such as %s' % example
    parent = posixpath.dirname(value)
    if SYSTEM_DIRECTORIES.get(parent) is False:
        return ('lies directly inside the system directory %s, whose entries belong to the system' % parent,
                'use a directory of its own such as %s' % example)
    return None


def path_example(name):
    """A valid value of a path variable, for a refusal's fix."""
    return PATH_EXAMPLES.get(name, '/var/lib/%s' % name.split('_')[0])


def unit_name_problem(name):
    """None, or (problem, fix) for a unit name given without its .service suffix."""
    if not isinstance(name, str):
        return None
    if '@' in name:
        return ('is a template instance name (it holds "@")',
                'use a plain name without "@" (for example %s)' % name.replace('@', '-'))
    for suffix in UNIT_TYPE_SUFFIXES:
        if name.endswith(suffix):
            return ('ends in the unit type suffix %s, so systemctl would act on the unit %s instead of %s.service'
                    % (suffix, name, name), 'use the name without %s (for example %s)' % (suffix, name[:-len(suffix)]))
    return None


# --------------------------------------------------------------------------- what a deploy creates

def _entry(kind, path, variable, value, role, **extra):
    entry = {'kind': kind, 'path': path, 'variable': variable, 'value': value, 'role': role}
    entry.update(extra)
    return entry


def candidates(lm, vl, backup_dir, probe_cache, manifest_path=MANIFEST_PATH):
    """Every unit, file, directory, user and group a deploy creates on the host, from the plan's two services.

    ``lm``/``vl`` need service_name, unit_path, env_path, config_dir, venv, venvs_dir, user, group, home
    (and for vLLM fingerprint_path, hf_home). What both roles share appears once (vLLM's entry).
    """
    found = []
    for service, role, home_kind in ((vl, 'vllm_server', 'home'), (lm, 'lmcache_server', 'lmcache_home')):
        name = service['service_name']
        found += [
            _entry('unit', service['unit_path'], '%s_service_name' % role, name, role, unit=name),
            _entry('env', service['env_path'], '%s_config_dir' % role, service['config_dir'], role, unit=name),
            _entry('config_dir', service['config_dir'], '%s_config_dir' % role, service['config_dir'], role),
            _entry(home_kind, service['home'], '%s_home' % role, service['home'], role, user=service['user']),
        ]
        if service.get('per_version_venv', posixpath.dirname(service['venv']) == service['venvs_dir']):
            found.append(_entry('venvs_dir', service['venvs_dir'], '%s_venvs_dir' % role, service['venvs_dir'], role))
            found.append(_entry('venv', service['venv'], '%s_venvs_dir' % role, service['venvs_dir'], role))
        else:
            found.append(_entry('venv', service['venv'], '%s_venv' % role, service['venv'], role))
        found.append(_entry('user', service['user'], '%s_user' % role, service['user'], role, home=service['home']))
        found.append(_entry('group', service['group'], '%s_group' % role, service['group'], role,
                            user=service['user']))
    coordinator = lm.get('coordinator')
    if coordinator:  # a P2P pool's coordinator on this host (kv_p2p)
        name = coordinator['service_name']
        found.append(_entry('unit', coordinator['unit_path'], 'lmcache_server_service_name', name, 'lmcache_server',
                            unit=name))
    found += [
        _entry('fingerprint', vl['fingerprint_path'], 'vllm_server_config_dir', vl['config_dir'], 'vllm_server'),
        _entry('hf_home', vl['hf_home'], 'vllm_server_hf_home', vl['hf_home'], 'vllm_server', user=vl['user']),
        _entry('cache', '%s/cache' % vl['home'], 'vllm_server_home', vl['home'], 'vllm_server', user=vl['user']),
    ] + [
        # The compile caches below HOME that the warm first start copies between hosts.
        _entry('cache', posixpath.join(vl['home'], d), 'vllm_server_home', vl['home'], 'vllm_server', user=vl['user'])
        for d in compile_cache.HOME_DIRS
    ] + [
        _entry('backup_dir', backup_dir, 'fleet_backup_dir', backup_dir, 'deploy'),
        _entry('backup_parent', posixpath.dirname(backup_dir), 'fleet_backup_dir', backup_dir, 'deploy'),
        _entry('probe_cache', probe_cache, 'fleet_probe_cache_path', probe_cache, 'vllm_server'),
        _entry('manifest_dir', posixpath.dirname(manifest_path), 'fleet_manifest_path', manifest_path, 'deploy'),
    ]
    seen, out = set(), []
    for entry in found:
        if entry['path'] and key_of(entry) not in seen:
            seen.add(key_of(entry))
            out.append(entry)
    return out


def store_candidates(store, manifest_path):
    """Every unit, file, directory, user and group the role ``kv_store`` creates on a store host.

    ``store`` needs service_name, unit_path, config_path, acl_path, marker_path (the package-install marker),
    config_dir, home, user and group, and ``exporter_paths`` (service_name, unit_path, env_path, marker_path) when
    the exporter is on; ``manifest_path`` is the store's own manifest (kv_store_manifest_path).
    """
    role, name, conf = 'kv_store', store['service_name'], store['config_dir']
    found = [_entry('unit', store['unit_path'], 'kv_store_service_name', name, role, unit=name)]
    found += [_entry('file', store[key], 'kv_store_config_dir', conf, role, unit=name)
              for key in ('config_path', 'acl_path', 'marker_path')]
    found += [
        _entry('config_dir', conf, 'kv_store_config_dir', conf, role),
        _entry('data_dir', store['home'], 'kv_store_home', store['home'], role, user=store['user']),
        _entry('user', store['user'], 'kv_store_user', store['user'], role, home=store['home']),
        _entry('group', store['group'], 'kv_store_group', store['group'], role, user=store['user']),
        _entry('manifest_dir', posixpath.dirname(manifest_path), 'kv_store_manifest_path', manifest_path, role),
    ]
    exporter = store.get('exporter_paths')
    if exporter:  # kv_store_exporter: its unit (named after the store's), environment file and package marker
        unit = exporter['service_name']
        found.insert(1, _entry('unit', exporter['unit_path'], 'kv_store_service_name', unit, role, unit=unit))
        found.insert(2, _entry('env', exporter['env_path'], 'kv_store_config_dir', conf, role, unit=unit))
        found.insert(3, _entry('file', exporter['marker_path'], 'kv_store_config_dir', conf, role, unit=unit))
    seen, out = set(), []
    for entry in found:
        if key_of(entry) not in seen:
            seen.add(key_of(entry))
            out.append(entry)
    return out


def key_of(entry):
    """The manifest key of an entry: its path, or "user:<name>" / "group:<name>"."""
    if entry['kind'] in ('user', 'group'):
        return '%s:%s' % (entry['kind'], entry['path'])
    return entry['path']


# --------------------------------------------------------------------------- the manifest

MANIFEST_FIELDS = ('kind', 'path', 'variable', 'value', 'role', 'unit', 'user', 'home')


def parse_manifest(text):
    """The manifest's entries ``{key: entry}`` from its JSON text (empty text: none). Raises ValueError."""
    if not text or not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict) or data.get('collection') != COLLECTION or not isinstance(data.get('entries'), dict):
        raise ValueError('not a manifest of %s' % COLLECTION)
    entries = {}
    for key, entry in data['entries'].items():
        if not isinstance(entry, dict) or entry.get('kind') not in REMOVE_WHEN or not isinstance(entry.get('path'), str):
            raise ValueError('entry %s is not one the collection writes' % json.dumps(key))
        if key != key_of(entry):
            raise ValueError('entry %s does not match its path' % json.dumps(key))
        entry.setdefault('variable', '?')
        entry.setdefault('value', entry['path'])
        entries[key] = entry
    return entries


def dump_manifest(entries):
    """The manifest's JSON text (stable order, so an unchanged manifest is rewritten identically)."""
    kept = dict((key, dict((k, v) for k, v in entry.items() if k in MANIFEST_FIELDS)) for key, entry in entries.items())
    return json.dumps({'collection': COLLECTION, 'version': MANIFEST_VERSION, 'entries': kept},
                      indent=1, sort_keys=True) + '\n'


def claim(entries, classified):
    """The manifest after a deploy claims what it will create (absent) and what it adopts."""
    out = dict(entries)
    for entry, status, _problem in classified:
        if status in ('absent', 'adopt'):
            out[key_of(entry)] = entry
    return out


def forget(entries, keys):
    """The manifest without ``keys``."""
    return dict((key, entry) for key, entry in entries.items() if key not in set(keys))


# --------------------------------------------------------------------------- classifying what the host holds

def _sentence(host, entry, problem, fix):
    return 'host %s: %s=%s %s; %s' % (host, entry['variable'], entry['value'], problem, fix)


def _where(entry):
    return '' if entry['path'] == entry['value'] else '%s ' % entry['path']


def _adoptable(entry, obs, context):
    """Whether an existing entry the manifest does not list is the previous release's, by its content."""
    kind, head = entry['kind'], obs.get('head') or ''
    if kind == 'unit':
        return obs.get('type') == 'file' and (UNIT_MARKER in head or LEGACY_UNIT_LINE in head)
    if kind == 'env':
        return obs.get('type') == 'file' and (LEGACY_ENV_LINE % ('%s.service' % entry.get('unit'))) in head
    if kind == 'venv':  # a per-version venv the collection named; one given by path may be the operator's
        return obs.get('type') == 'dir' and bool(obs.get('venv_signature')) and entry['variable'].endswith('_venvs_dir')
    if kind in ('home', 'lmcache_home', 'hf_home', 'cache', 'data_dir'):
        return obs.get('type') == 'dir' and obs.get('owner') == entry.get('user') and \
            entry.get('user') in context.get('own_users', ())
    if not context.get('legacy_host'):
        return False  # the files below are adopted only beside a unit the collection rendered
    if kind == 'fingerprint':
        return obs.get('type') == 'file' and re.match(r'^[0-9a-f]{16,128}\s*$', head) is not None
    if kind == 'probe_cache':
        return obs.get('type') == 'file' and obs.get('uid') == 0 and _probe_cache_text(head)
    if kind == 'backup_dir':
        return obs.get('type') == 'dir' and obs.get('uid') == 0 and set(obs.get('entries') or []) <= set(
            context.get('backup_names') or [])
    return False


def _probe_cache_text(text):
    """Whether ``text`` is the probe's cache: a non-empty JSON mapping of hexadecimal fingerprints to entries that
    hold an N, and of at most one section of M records, each with ``mamba_cache_blocks`` (any other root-owned
    JSON file at that path is not the collection's, so never deleted)."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    entries = dict((k, v) for k, v in data.items() if re.match(r'^[0-9a-f]{16,128}$', k))
    sections = [v for k, v in data.items() if k not in entries]
    return bool(entries or any(sections)) and len(sections) <= 1 and all(
        isinstance(value, dict) and 'vllm_block_size' in value for value in entries.values()) and all(
        isinstance(section, dict) and all(isinstance(r, dict) and 'mamba_cache_blocks' in r for r in section.values())
        for section in sections)


def classify(host, entry, obs, manifest, context):
    """(status, problem): status is absent, ours, adopt, use or foreign; problem the refusal when foreign.

    ``obs`` is what the host holds at the entry (see the module's ``observe``); ``context`` holds
    ``own_users`` (users in the manifest or adopted), ``user_gids``, ``backup_names`` and ``legacy_host``
    (a unit of the host is the collection's: its fingerprint, probe cache and rollback copies are adopted too).
    """
    kind = entry['kind']
    if kind in ('user', 'group'):
        return _classify_account(host, entry, obs, manifest, context)
    if kind == 'unit':
        found = _unit_elsewhere(entry, obs)
        if found:
            return 'foreign', _sentence(host, entry, found, 'choose another name (the default is %s)' % (
                DEFAULT_UNITS.get(entry['role'], 'lmcache-server')))
    if not obs.get('exists'):
        return 'absent', None
    if obs.get('link'):
        return 'foreign', _sentence(host, entry, '%sis a symbolic link, which the collection never follows or '
                                    'replaces' % _where(entry), 'remove the link or choose another path')
    if key_of(entry) in manifest:
        return 'ours', None
    if _adoptable(entry, obs, context):
        return 'adopt', None
    return _not_ours(host, entry, obs)


def _unit_elsewhere(entry, obs):
    load, fragment = obs.get('load_state') or 'not-found', obs.get('fragment_path') or ''
    if load == 'not-found' or fragment == entry['path'] and load == 'loaded':
        return None
    if load == 'masked':
        return 'names the unit %s.service, which is masked on the host' % entry['value']
    return ('names the unit %s.service, which the host already has (%s) and the collection did not create'
            % (entry['value'], fragment or load))


def _root_only_dir(obs):
    return obs.get('type') == 'dir' and obs.get('uid') == 0 and not obs.get('mode', 0) & 0o022


def _not_ours(host, entry, obs):
    kind = entry['kind']
    if kind in ('venvs_dir', 'config_dir', 'backup_parent', 'manifest_dir'):
        if _root_only_dir(obs):
            return 'use', None
        return 'foreign', _sentence(host, entry, '%sexists but is not a directory of root that only root may write to'
                                    % _where(entry), 'choose a directory of its own (the collection never chowns one)')
    if kind == 'venv' and entry['variable'].endswith('_venv') and _root_only_dir(obs) and obs.get('pyvenv_cfg'):
        return 'use', None  # the virtualenv the operator named: installed into, never removed
    if kind in ('home', 'lmcache_home', 'hf_home', 'cache', 'data_dir'):
        if obs.get('type') == 'dir' and obs.get('owner') == entry.get('user'):
            return 'use', None
        return 'foreign', _sentence(host, entry, '%sexists and belongs to %s (uid %s), not to the service user %s' % (
            _where(entry), obs.get('owner') or 'another user', obs.get('uid'), entry.get('user')),
            'the collection never chowns it: choose a directory of its own, or remove it first')
    what = {'unit': 'has no line of the collection (its marker)', 'venv': 'is not a virtualenv the collection made',
            'backup_dir': 'holds files the collection did not copy there'}.get(kind, 'was not created by the collection')
    return 'foreign', _sentence(host, entry, '%sexists and %s' % (_where(entry), what),
                                'the collection never overwrites it: move it away or choose another %s' % (
                                    'name' if kind == 'unit' else 'path'))


def account_name_problem(kind, name):
    """None, or (problem, fix) for a service account's name: root never, and no account of the distribution as
    a service user (its files, home and processes belong to another program)."""
    if name == 'root':
        return ('is root: the service would run with every privilege, and remove.yml would act on root',
                'use an account of its own (the role creates it), such as vllm')
    if kind == 'user' and name in SYSTEM_ACCOUNTS:
        return ('is an account of the distribution or of another program, not one of its own',
                'use an account of its own (the role creates it), such as vllm')
    return None


def _account_refusal(host, entry, obs):
    """The refusal of an existing account (root by its id, or an account of the distribution's static range)."""
    number = obs.get('uid') if entry['kind'] == 'user' else obs.get('gid')
    if number == 0:
        problem = ('names an account with %sid 0 (root)' % ('u' if entry['kind'] == 'user' else 'g'),
                   'use an account of its own (the role creates it), such as vllm')
    elif entry['kind'] == 'user' and isinstance(number, int) and number < STATIC_SYSTEM_IDS:
        problem = ('names the account of the distribution %s (uid %d), which the collection never takes over'
                   % (entry['path'], number), 'use an account of its own (the role creates it), such as vllm')
    else:
        problem = account_name_problem(entry['kind'], entry['path'])
    return _sentence(host, entry, problem[0], problem[1]) if problem else None


def _classify_account(host, entry, obs, manifest, context):
    """(status, problem) of a user or group: absent, ours, adopt (the previous release's only), use or foreign."""
    if not obs.get('exists'):
        problem = account_name_problem(entry['kind'], entry['path'])
        return ('foreign', _sentence(host, entry, problem[0], problem[1])) if problem else ('absent', None)
    refusal = _account_refusal(host, entry, obs)
    if refusal:
        return 'foreign', refusal
    if key_of(entry) in manifest:
        return 'ours', None
    number = obs.get('uid') if entry['kind'] == 'user' else obs.get('gid')
    if not context.get('legacy_units') or entry['path'] in SYSTEM_ACCOUNTS or \
            not isinstance(number, int) or number < STATIC_SYSTEM_IDS:
        return 'use', None  # an account the collection did not create is never adopted, so never deleted
    if entry['kind'] == 'user':
        legacy = number < 1000 and obs.get('shell') in NOLOGIN_SHELLS and \
            (obs.get('home') or '').rstrip('/') == entry.get('home')
        return ('adopt' if legacy else 'use'), None
    if entry.get('user') in context.get('own_users', ()) and obs.get('gid') == context.get('user_gids', {}).get(
            entry.get('user')):
        return 'adopt', None
    return 'use', None


# --------------------------------------------------------------------------- removal

def removal(entries, observed, remove_caches=False, remove_models=False, remove_users=True):
    """What remove.yml deletes, in order: ``[(entry, how)]`` with how ``tree``, ``file``, ``if_empty`` or ``account``.

    ``entries``: the manifest's (and the adopted) entries; ``observed``: ``{key: obs}``. Entries whose kind's
    policy does not apply (caches, models, users not asked for) are left; a path that is now a symbolic
    link is never followed nor removed.
    """
    allowed = {'always': True, 'empty': True, 'caches': remove_caches, 'models': remove_models,
               'caches+models': remove_caches and remove_models, 'users': remove_users}
    plan = []

    def order(entry):
        return (_ORDER.index(entry['kind']) if entry['kind'] in _ORDER else len(_ORDER), -entry['path'].count('/'),
                entry['path'])

    ordered = sorted(entries.values(), key=order)
    for entry in ordered:
        obs = observed.get(key_of(entry)) or {}
        if not allowed[REMOVE_WHEN[entry['kind']]] or not obs.get('exists') or obs.get('link'):
            continue
        if entry['kind'] in ('user', 'group'):
            plan.append((entry, 'account'))
        elif REMOVE_WHEN[entry['kind']] == 'empty':
            plan.append((entry, 'if_empty'))
        else:
            plan.append((entry, 'tree' if obs.get('type') == 'dir' else 'file'))
    return plan


def removal_problem(entry):
    """None, or why a manifest entry may not be deleted: the path and account rules again, at removal.

    A manifest can only hold what a claim wrote, but a manifest edited by hand or by an older release must not
    make ``remove.yml`` delete a system directory, a path with ``..`` or a system account."""
    kind, path = entry['kind'], entry['path']
    if kind in ('user', 'group'):
        return 'is the system account %s' % path if path in SYSTEM_ACCOUNTS else None
    if kind == 'unit':
        name = posixpath.basename(path)[:-len('.service')] if path.endswith('.service') else None
        if posixpath.dirname(path) != UNIT_DIR or not name or unit_name_problem(name):
            return 'is not a unit file %s/<name>.service' % UNIT_DIR
        return None
    found = path_problem(path, path_example(entry.get('variable') or ''))
    return found[0] if found else None


def removal_checked(host, plan):
    """``removal``'s plan without the entries the path rules refuse, and one sentence for each of those."""
    kept, refused = [], []
    for entry, how in plan:
        problem = removal_problem(entry)
        if problem:
            refused.append('host %s: the manifest entry %s %s; it is left in place: check who changed the manifest'
                           % (host, entry['path'], problem))
        else:
            kept.append((entry, how))
    return kept, refused
