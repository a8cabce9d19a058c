#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_ownership
short_description: Keep the collection to what it created on a host (its manifest of units, files, directories and users)
version_added: "0.1.0"
description:
  - Each host keeps a manifest (a JSON file readable and writable by root only, default
    C(/etc/lmcache-vllm-fleet/manifest.json)) of the units, files, directories, users and groups the collection
    created there. Each unit file the collection writes also carries a marker line.
  - O(state=claim) (deploy, before anything changes) reads what the host holds at every path, unit and account
    the deploy would create (the host plan's C(ownership) list) and fails, naming host, variable and fix, when one
    exists and is not the collection's - a unit of that name the host already has, a file or virtualenv the
    collection did not make, a home or Hugging Face cache owned by another user, a symbolic link. Otherwise it
    records in the manifest what is absent (the deploy creates it) and what it adopts from the previous release
    (a unit whose content the collection rendered, an environment file with the collection's header, a
    virtualenv holding the collection's helper, a home owned by the service account the role made).
  - O(state=inspect) reports what is the collection's, without changing anything.
  - O(state=absent) (C(remove.yml)) deletes the manifest's entries only, in order (files, trees, then the
    directories that go only when empty, so a shared venvs directory keeps what is not the collection's),
    caches and models only when asked, and names everything it leaves.
  - O(state=forget) drops entries whose paths the caller deleted (the pruned virtualenvs).
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written or deleted; the result says what would be.
  diff_mode:
    support: partial
    description: With O(state=absent), the diff lists what is (or would be) deleted, one line per path.
options:
  state:
    description: What to do (see the description).
    type: str
    choices: [claim, inspect, absent, forget]
    default: inspect
  host:
    description: The name of the host in messages (pass C(inventory_hostname)).
    type: str
    default: ''
  entries:
    description: What a deploy creates on the host (the C(ownership) list of the host plan, or of the KV store plan).
    type: list
    elements: dict
    default: []
  backup_names:
    description: The names of the files deploy copies into its rollback directory (the plan's C(files), basenames).
    type: list
    elements: str
    default: []
  manifest:
    description: The manifest's path (C(fleet_manifest_path); a KV store's C(kv_store_manifest_path)).
    type: path
    default: /etc/lmcache-vllm-fleet/manifest.json
  remove_caches:
    description: With O(state=absent), also the probe's cache, vLLM's cache and the LMCache home.
    type: bool
    default: false
  remove_models:
    description: With O(state=absent), also the Hugging Face cache (and, with O(remove_caches), the vLLM home).
    type: bool
    default: false
  remove_users:
    description: With O(state=absent), also the users and groups the collection created.
    type: bool
    default: true
  paths:
    description: With O(state=forget), the paths to drop from the manifest.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Refuse to overwrite what is not the collection's, claim the rest
  lmcache_vllm.fleet.fleet_ownership:
    state: claim
    host: "{{ inventory_hostname }}"
    entries: "{{ __fleet_plan.ownership }}"
    backup_names: "{{ __fleet_plan.files | map('basename') | list }}"
"""

RETURN = r"""
problems:
  description: The refusals (O(state=claim)), one sentence each with host, variable and fix.
  returned: always
  type: list
  elements: str
status:
  description: Every entry's key and what it is on the host (absent, ours, adopt, use or foreign).
  returned: always
  type: dict
owned_units:
  description: The unit names that are the collection's and exist.
  returned: always
  type: list
  elements: str
owned_paths:
  description: The paths that are the collection's (manifest or adopted) and exist.
  returned: always
  type: list
  elements: str
removed:
  description: What O(state=absent) deleted (or would delete in check mode), in order.
  returned: always
  type: list
  elements: str
left:
  description: What O(state=absent) leaves because it is not the collection's, one sentence each.
  returned: always
  type: list
  elements: str
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import nofollow
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership as own

try:
    import grp
    import pwd
except ImportError:  # pragma: no cover - not a POSIX host
    grp = pwd = None


def _owner(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _head(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_NONBLOCK', 0))
    try:
        return os.read(fd, 8192).decode('utf-8', 'replace')
    finally:
        os.close(fd)


def _account(entry):
    try:
        if entry['kind'] == 'user':
            found = pwd.getpwnam(entry['path'])
            return {'exists': True, 'uid': found.pw_uid, 'gid': found.pw_gid, 'home': found.pw_dir,
                    'shell': found.pw_shell}
        return {'exists': True, 'gid': grp.getgrnam(entry['path']).gr_gid}
    except KeyError:
        return {'exists': False}


def _unit_state(module, name):
    systemctl = module.get_bin_path('systemctl')
    if not systemctl:
        return {}
    rc, out, _err = module.run_command([systemctl, 'show', '-p', 'LoadState', '-p', 'FragmentPath', '%s.service' % name])
    if rc != 0:
        return {}
    values = dict(line.split('=', 1) for line in out.splitlines() if '=' in line)
    return {'load_state': values.get('LoadState', ''), 'fragment_path': values.get('FragmentPath', '')}


def observe(module, entry):
    """What the host holds at one entry (never following a symbolic link)."""
    if entry['kind'] in ('user', 'group'):
        return _account(entry)
    name = os.path.basename(entry['path'])[:-len('.service')]
    obs = _unit_state(module, name) if entry['kind'] == 'unit' else {}
    try:
        found = os.lstat(entry['path'])
    except OSError:
        obs['exists'] = False
        return obs
    kind = 'dir' if stat.S_ISDIR(found.st_mode) else 'file' if stat.S_ISREG(found.st_mode) else 'other'
    obs.update(exists=True, link=stat.S_ISLNK(found.st_mode), type=kind, uid=found.st_uid,
               mode=stat.S_IMODE(found.st_mode), owner=_owner(found.st_uid))
    if kind == 'file' and entry['kind'] in ('unit', 'env', 'fingerprint', 'probe_cache'):
        obs['head'] = _head(entry['path'])
    if kind == 'dir' and entry['kind'] == 'venv':
        signature = os.path.join(entry['path'], own.VENV_SIGNATURE)
        obs['venv_signature'] = os.path.isfile(signature) and not os.path.islink(signature)
        obs['pyvenv_cfg'] = os.path.isfile(os.path.join(entry['path'], 'pyvenv.cfg'))
    if kind == 'dir' and entry['kind'] == 'backup_dir':
        obs['entries'] = sorted(os.listdir(entry['path']))
    return obs


def read_manifest(module, path):
    """The manifest's entries; fails when it is not a plain root-only file of the collection."""
    try:
        found = os.lstat(path)
    except OSError:
        return {}
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid() or stat.S_IMODE(found.st_mode) & 0o077:
        module.fail_json(msg='the manifest %s is not a plain file that only %s may read and write (mode 0600); '
                             'the collection does not trust it: check who changed it, then fix or remove it'
                             % (path, _owner(os.geteuid()) or 'this user'))
    try:
        return own.parse_manifest(_head_all(path))
    except ValueError as exc:
        module.fail_json(msg='the manifest %s cannot be read (%s); fix or remove it' % (path, exc))


def _head_all(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0))
    with os.fdopen(fd, 'rb') as handle:
        return handle.read().decode('utf-8')


def write_manifest(path, entries):
    """Write (or, when nothing is left, delete) the manifest, atomically, mode 0600."""
    if not entries:
        if os.path.lexists(path):
            os.unlink(path)
        return
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    temporary = '%s.%d.tmp' % (path, os.getpid())
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), 0o600)
    with os.fdopen(fd, 'w') as handle:
        handle.write(own.dump_manifest(entries))
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(temporary, path)


def _legacy_venvs(entries):
    """The previous release's per-version virtualenvs beside the planned one (they hold the collection's helper)."""
    found = []
    for entry in entries:
        if entry['kind'] != 'venvs_dir' or not os.path.isdir(entry['path']) or os.path.islink(entry['path']):
            continue
        for name in sorted(os.listdir(entry['path'])):
            path = os.path.join(entry['path'], name)
            found.append(dict(entry, kind='venv', path=path))
    return found


def classify_all(module, host, entries, manifest, backup_names):
    """[(entry, status, problem)] for the candidates and the manifest's own entries, and the observations."""
    observed = dict((own.key_of(e), observe(module, e)) for e in list(entries) + list(manifest.values()))
    context = {'backup_names': backup_names, 'own_users': set(), 'user_gids': {}, 'legacy_host': False,
               'legacy_units': False}
    for entry in entries:
        if entry['kind'] == 'unit':
            status, _problem = own.classify(host, entry, observed[own.key_of(entry)], manifest, context)
            context['legacy_host'] = context['legacy_host'] or status in ('ours', 'adopt')
            context['legacy_units'] = context['legacy_units'] or status == 'adopt'  # the previous release's unit
    accounts = [e for e in entries if e['kind'] == 'user']
    for entry in accounts:
        status, _problem = own.classify(host, entry, observed[own.key_of(entry)], manifest, context)
        if status in ('ours', 'adopt'):
            context['own_users'].add(entry['path'])
            context['user_gids'][entry['path']] = observed[own.key_of(entry)].get('gid')
    for key, entry in manifest.items():
        if entry['kind'] == 'user' and observed[key].get('exists'):
            context['own_users'].add(entry['path'])
            context['user_gids'][entry['path']] = observed[key].get('gid')
    result = []
    for entry in entries:
        status, problem = own.classify(host, entry, observed[own.key_of(entry)], manifest, context)
        result.append((entry, status, problem))
    return result, observed


def _remove_one(module, entry, how):
    path = entry['path']
    if how == 'account':
        if not _account(entry)['exists']:
            return False  # userdel took the user's own group with it
        command = 'userdel' if entry['kind'] == 'user' else 'groupdel'
        rc, _out, err = module.run_command([module.get_bin_path(command, required=True), path])
        return rc == 0 or module.fail_json(msg='%s %s failed: %s' % (command, path, err.strip()))
    if how == 'if_empty':
        return nofollow.rmdir_if_empty(path)
    return nofollow.remove_path(path)  # every component opened without following a link, the tree too


def remove(module, host, entries, manifest, params):
    """state=absent: delete the manifest's entries (and the previous release's, adopted), name what is left."""
    classified, observed = classify_all(module, host, entries + _legacy_venvs(entries), manifest, params['backup_names'])
    working = dict(manifest)
    for entry, status, _problem in classified:
        if status == 'adopt':
            working[own.key_of(entry)] = entry
    left = [_left(host, e, observed[own.key_of(e)]) for e, status, _p in classified
            if status == 'foreign' or (status == 'use' and e['kind'] in _NAMED_WHEN_USED)]
    plan = own.removal(working, observed, params['remove_caches'], params['remove_models'], params['remove_users'])
    plan, refused = own.removal_checked(host, plan)
    left += refused
    removed, refused = _remove_all(module, host, plan)
    left += refused
    remaining = dict((k, e) for k, e in working.items() if k not in removed and _exists(e))
    if module.check_mode:
        return removed, [line for line in left if line]
    if remaining and all(own.REMOVE_WHEN[e['kind']] == 'empty' for e in remaining.values()):
        # only directories that go when empty are left: the manifest goes first, then they do if they can
        write_manifest(params['manifest'], {})
        gone, refused = _remove_all(module, host, [(e, 'if_empty') for e, how in plan if own.key_of(e) in remaining])
        removed += gone
        left += refused
        remaining = dict((k, e) for k, e in remaining.items() if k not in removed)
        if remaining:
            write_manifest(params['manifest'], remaining)
    elif remaining != manifest:
        write_manifest(params['manifest'], remaining)
    return removed, [line for line in left if line]


_NAMED_WHEN_USED = ('user', 'venv', 'home', 'lmcache_home', 'hf_home', 'cache', 'data_dir')


def _remove_all(module, host, plan):
    """([keys removed], [sentences of what a link on the way kept from being removed])."""
    removed, refused = [], []
    for entry, how in plan:
        if how == 'if_empty' and not _empty_after(entry, plan, removed):
            continue
        try:
            if entry['kind'] not in ('user', 'group') and module.check_mode:
                nofollow.check_path(entry['path'])
            if module.check_mode or _remove_one(module, entry, how):
                removed.append(own.key_of(entry))
        except nofollow.Refused as exc:
            refused.append('host %s: %s is left in place: %s (%s); remove the link, then run remove.yml again'
                           % (host, entry['path'], exc, entry['variable']))
    return removed, refused


def _exists(entry):
    return _account(entry)['exists'] if entry['kind'] in ('user', 'group') else os.path.lexists(entry['path'])


def _empty_after(entry, plan, removed):
    """Whether a directory that goes only when empty holds nothing but what this run removes (check mode too)."""
    path = entry['path']
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    gone = set(e['path'] for e, _how in plan if own.key_of(e) in removed)
    return all(os.path.join(path, name) in gone for name in os.listdir(path))


def _left(host, entry, obs):
    if entry['kind'] == 'unit' and obs.get('load_state') not in (None, '', 'not-found') and \
            obs.get('fragment_path') != entry['path']:
        return 'host %s: the unit %s.service (%s) is left in place: the collection did not create it (%s)' % (
            host, entry['value'], obs.get('fragment_path') or obs.get('load_state'), entry['variable'])
    if not obs.get('exists'):
        return None
    if entry['kind'] == 'user':
        return ('host %s: user %s is left in place (home %s, shell %s, uid %s): the collection did not create it; '
                'remove it yourself if it is no longer needed'
                % (host, entry['path'], obs.get('home'), obs.get('shell'), obs.get('uid')))
    if entry['kind'] == 'group':
        return None
    return 'host %s: %s is left in place: the collection did not create it (%s)' % (host, entry['path'], entry['variable'])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='inspect', choices=['claim', 'inspect', 'absent', 'forget']),
            host=dict(type='str', default=''),
            entries=dict(type='list', elements='dict', default=[]),
            backup_names=dict(type='list', elements='str', default=[]),
            manifest=dict(type='path', default=own.MANIFEST_PATH),
            remove_caches=dict(type='bool', default=False),
            remove_models=dict(type='bool', default=False),
            remove_users=dict(type='bool', default=True),
            paths=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host, entries = params['host'], [dict(e) for e in params['entries']]
    manifest = read_manifest(module, params['manifest'])
    result = dict(changed=False, problems=[], status={}, owned_units=[], owned_paths=[], removed=[], left=[])
    if params['state'] == 'forget':
        keys = [p for p in params['paths'] if p in manifest]
        if keys and not module.check_mode:
            write_manifest(params['manifest'], own.forget(manifest, keys))
        result.update(changed=bool(keys), removed=keys)
        module.exit_json(**result)
    if params['state'] == 'absent':
        removed, left = remove(module, host, entries, manifest, params)
        result.update(changed=bool(removed), removed=removed, left=left)
        if module._diff and removed:  # one line per path, never the files inside a tree
            result['diff'] = dict(before=''.join('%s\n' % key for key in removed), after='',
                                  before_header='%s: the collection\'s' % host, after_header='%s: removed' % host)
        module.exit_json(**result)
    classified, observed = classify_all(module, host, entries, manifest, params['backup_names'])
    result['status'] = dict((own.key_of(e), status) for e, status, _p in classified)
    result['problems'] = [problem for _e, _s, problem in classified if problem]
    owned = [e for e, status, _p in classified if status in ('ours', 'adopt')]
    owned += [e for k, e in manifest.items() if (observed.get(k) or {}).get('exists') and e not in owned]
    result['owned_units'] = sorted(set(e['path'].rsplit('/', 1)[-1][:-len('.service')] for e in owned
                                       if e['kind'] == 'unit'))
    result['owned_paths'] = sorted(set(e['path'] for e in owned if e['kind'] not in ('user', 'group')))
    if params['state'] == 'claim':
        if result['problems']:
            module.fail_json(msg=' | '.join(result['problems']), **result)
        claimed = own.claim(manifest, classified)
        if claimed != manifest:
            result['changed'] = True
            if not module.check_mode:
                write_manifest(params['manifest'], claimed)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
