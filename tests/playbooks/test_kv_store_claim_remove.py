# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role kv_store's claim (tasks/ownership.yml) and removal (tasks/remove.yml) on this machine, every path
below tmp_path and a unit name the host does not have: what the claim recorded is removed, a data directory of
another user is refused by the claim and kept by the removal, a system directory stops the removal before it
touches anything. The unit, the package and a real store: the molecule scenario ``default``."""

from __future__ import annotations

import json
import os
import sys

PLAYBOOK = """---
- name: Store
  hosts: all
  gather_facts: false
  tasks:
    - name: Plan the store host
      ansible.builtin.set_fact:
        __kv_store_plan: "{{ lookup('lmcache_vllm.fleet.kv_store_plan') }}"
      no_log: true
    - name: Run the role's tasks
      ansible.builtin.include_role:
        name: lmcache_vllm.fleet.kv_store
        tasks_from: %s
"""


def store(root, **overrides):
    merged = {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
        'kv_store_service_name': 'fleet-test-own-kv', 'kv_store_user': 'fleet-test-no-kv-user',
        'kv_store_group': 'fleet-test-no-kv-group', 'kv_store_home': str(root / 'var' / 'kv'),
        'kv_store_config_dir': str(root / 'etc' / 'kv'), 'kv_store_manifest_path': str(root / 'manifest' / 'kv.json'),
    }
    merged.update(overrides)
    return merged


def play(runner, tmp_path, root, tasks, **overrides):
    playbook = tmp_path / ('%s.yml' % tasks)
    playbook.write_text(PLAYBOOK % tasks)
    inventory = runner.write_inventory({'localhost': store(root, **overrides)})
    return runner.run(str(playbook), inventory)


def test_what_the_claim_recorded_is_removed_and_nothing_else(runner, tmp_path):
    root = tmp_path / 'host'
    root.mkdir()
    code, output = play(runner, tmp_path, root, 'ownership')
    assert code == 0, output[-4000:]
    entries = json.loads((root / 'manifest' / 'kv.json').read_text())['entries']
    assert entries[str(root / 'var' / 'kv')]['kind'] == 'data_dir'
    assert entries[str(root / 'etc' / 'kv' / 'users.acl')]['kind'] == 'file'
    assert entries['/etc/systemd/system/fleet-test-own-kv.service']['kind'] == 'unit'
    assert entries['user:fleet-test-no-kv-user']['kind'] == 'user'
    assert sorted(os.listdir(str(root))) == ['manifest'], 'only the manifest was written'
    # what the deploy then writes, and a file of the operator's in the configuration directory
    (root / 'var' / 'kv').mkdir(parents=True)
    (root / 'var' / 'kv' / 'nodes.conf').write_text('cluster state\n')
    (root / 'etc' / 'kv').mkdir(parents=True)
    (root / 'etc' / 'kv').chmod(0o755)
    for name in ('fleet-test-own-kv.conf', 'users.acl', 'installed-by-collection', 'notes.txt'):
        (root / 'etc' / 'kv' / name).write_text('not-a-package\n')
    code, output = play(runner, tmp_path, root, 'remove')
    assert code == 0, output[-4000:]
    assert not (root / 'var' / 'kv').exists()
    assert os.listdir(str(root / 'etc' / 'kv')) == ['notes.txt'], 'the operator\'s file and its directory are kept'
    assert json.loads((root / 'manifest' / 'kv.json').read_text())['entries'].keys() == {str(root / 'etc' / 'kv')}
    code, output = play(runner, tmp_path, root, 'remove')
    assert code == 0 and 'changed=0' in output, output[-4000:]


def test_a_data_directory_of_another_user_is_refused_and_kept(runner, tmp_path):
    root = tmp_path / 'host'
    home = root / 'var' / 'kv'
    home.mkdir(parents=True)
    (home / 'data.db').write_text('someone else\'s\n')
    os.chown(str(home), 65534, 65534)
    code, output = play(runner, tmp_path, root, 'ownership')
    assert code != 0
    assert ('host localhost: kv_store_home=%s exists and belongs to nobody (uid 65534), not to the service user '
            'fleet-test-no-kv-user; the collection never chowns it: choose a directory of its own, or remove it first'
            % home) in output
    assert not (root / 'manifest').exists()
    code, output = play(runner, tmp_path, root, 'remove')
    assert code == 0, output[-4000:]
    assert 'host localhost: %s is left in place: the collection did not create it (kv_store_home)' % home in output
    assert (home / 'data.db').read_text() == 'someone else\'s\n' and os.stat(str(home)).st_uid == 65534


def test_a_system_directory_stops_the_removal_before_anything_changes(runner, tmp_path):
    root = tmp_path / 'host'
    code, output = play(runner, tmp_path, root, 'remove', kv_store_home='/var/lib')
    assert code != 0
    assert ('host localhost: kv_store_home=/var/lib is the system directory /var/lib; use a directory of its own '
            'such as /var/lib/fleet-kv-store') in output
    assert os.path.isdir('/var/lib')


def test_a_unit_of_the_server_package_is_refused(runner, tmp_path):
    root = tmp_path / 'host'
    code, output = play(runner, tmp_path, root, 'remove', kv_store_service_name='redis-server')
    assert code != 0
    assert 'host localhost: kv_store_service_name=redis-server is the unit of a server package' in output


def test_the_exporter_is_claimed_with_the_store_and_removed_with_it(runner, tmp_path):
    root = tmp_path / 'host'
    root.mkdir()
    exporter = {'kv_store_password': 'a-store-password-for-the-test', 'kv_store_exporter': True,
                'kv_store_exporter_password': 'an-exporter-password-for-the-test'}
    code, output = play(runner, tmp_path, root, 'ownership', **exporter)
    assert code == 0, output[-4000:]
    entries = json.loads((root / 'manifest' / 'kv.json').read_text())['entries']
    assert entries['/etc/systemd/system/fleet-test-own-kv-exporter.service']['kind'] == 'unit'
    assert entries[str(root / 'etc' / 'kv' / 'exporter.env')]['kind'] == 'env'
    assert entries[str(root / 'etc' / 'kv' / 'exporter-installed-by-collection')]['kind'] == 'file'
    (root / 'etc' / 'kv').mkdir(parents=True)
    (root / 'etc' / 'kv').chmod(0o755)
    for name in ('exporter.env', 'exporter-installed-by-collection', 'users.acl'):
        (root / 'etc' / 'kv' / name).write_text('not-a-package\n')
    # removed even when the exporter was turned off since the claim (the manifest lists it)
    code, output = play(runner, tmp_path, root, 'remove', kv_store_exporter=False)
    assert code == 0, output[-4000:]
    assert not (root / 'etc' / 'kv').exists()
    assert 'an-exporter-password-for-the-test' not in output
