# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""remove.yml's deletion (fleet_ownership state=absent) against a hostile service user and a changed manifest: a
link planted in the middle of a cache path under the service user's HOME is never followed (what lies behind it
stays), and manifest entries the path rules refuse (a ".." segment, a system directory) are never deleted. Every
path lies below tmp_path."""

from __future__ import annotations

import json
import os
import sys

PLAYBOOK = """---
- name: Remove
  hosts: all
  gather_facts: false
  tasks:
    - name: Remove the manifest's entries
      lmcache_vllm.fleet.fleet_ownership:
        state: absent
        host: "{{ inventory_hostname }}"
        manifest: "{{ test_manifest }}"
        remove_caches: true
      register: removed

    - name: Show what was left
      ansible.builtin.debug:
        msg: "LEFT {{ removed.left | to_json }} REMOVED {{ removed.removed | to_json }}"
"""


def remove(runner, tmp_path, entries, *extra):
    manifest = tmp_path / 'manifest.json'
    manifest.write_text(json.dumps({'collection': 'lmcache_vllm.fleet', 'version': 1, 'entries': dict(
        (e['path'], dict(e, variable='vllm_server_home', value=e['path'])) for e in entries)}))
    os.chmod(str(manifest), 0o600)
    playbook = tmp_path / 'remove.yml'
    playbook.write_text(PLAYBOOK)
    inventory = runner.write_inventory({'localhost': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, 'test_manifest': str(manifest)}})
    return runner.run(str(playbook), inventory, *extra)


def test_a_link_planted_mid_path_is_not_followed(runner, tmp_path):
    home = tmp_path / 'home'
    (home / 'cache' / 'torch_compile_cache').mkdir(parents=True)
    precious = tmp_path / 'var' / 'cache' / 'apt'
    precious.mkdir(parents=True)
    (precious / 'pkgcache.bin').write_text('keep me')
    os.symlink(str(tmp_path / 'var'), str(home / '.triton'))  # the service user's ~/.triton -> /var
    entries = [{'kind': 'cache', 'path': str(home / '.triton' / 'cache'), 'role': 'vllm_server', 'user': 'vllm'},
               {'kind': 'cache', 'path': str(home / 'cache'), 'role': 'vllm_server', 'user': 'vllm'}]
    code, output = remove(runner, tmp_path, entries, '--check')
    assert code == 0 and 'is left in place' in output, output[-4000:]
    assert 'REMOVED [\\"%s\\"]' % (home / 'cache') in output, 'check mode names only what would go'
    code, output = remove(runner, tmp_path, entries)
    assert code == 0, output[-4000:]
    assert (precious / 'pkgcache.bin').read_text() == 'keep me'
    assert not (home / 'cache').exists(), 'the real cache goes'
    assert 'is left in place' in output and 'symbolic link' in output


def test_manifest_entries_the_path_rules_refuse_are_never_deleted(runner, tmp_path):
    victim = tmp_path / 'victim'
    victim.mkdir()
    (victim / 'data').write_text('keep me')
    (tmp_path / 'x').mkdir()
    # lies directly inside /tmp (a system directory whose entries are not the collection's)
    system_entry = '/tmp/fleet-test-remove-%d-%s' % (os.getpid(), tmp_path.name)
    unit_victim = system_entry + '.unit'
    try:
        os.mkdir(system_entry)
        with open(unit_victim, 'w') as handle:
            handle.write('keep me')
        code, output = remove(runner, tmp_path, [
            {'kind': 'file', 'path': '%s/x/../victim' % tmp_path, 'role': 'vllm_server'},
            {'kind': 'data_dir', 'path': system_entry, 'role': 'kv_store', 'user': 'fleet-kv'},
            {'kind': 'unit', 'path': '/etc/systemd/system/../../..' + unit_victim, 'role': 'vllm_server'}])
        assert code == 0, output[-4000:]
        assert (victim / 'data').read_text() == 'keep me'
        assert os.path.isdir(system_entry) and os.path.isfile(unit_victim)
        assert output.count('check who changed the manifest') >= 3, output[-4000:]
    finally:
        for path in (unit_victim, system_entry):
            if os.path.isdir(path):
                os.rmdir(path)
            elif os.path.lexists(path):
                os.unlink(path)
