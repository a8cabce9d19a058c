# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_ownership module's claim (deploy's stage 1b) on this machine, every path below tmp_path: what is
absent is claimed in a 0600 manifest, a home of another user, a symbolic link and an untrustworthy manifest are
refused with nothing written. Systemd units on real hosts: the molecule scenario ``default``."""

from __future__ import annotations

import json
import os
import stat
import sys

PLAYBOOK = """---
- name: Claim
  hosts: all
  gather_facts: false
  tasks:
    - name: Claim what the deploy creates
      lmcache_vllm.fleet.fleet_ownership:
        state: claim
        host: "{{ inventory_hostname }}"
        entries: "{{ __plan.ownership }}"
        manifest: "{{ __plan.manifest_path }}"
      vars:
        __plan: "{{ lookup('lmcache_vllm.fleet.host_plan') }}"
"""


def host(root, **overrides):
    merged = {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
        'vllm_server_model': '/srv/models/qwen3-dense-tiny', 'vllm_server_device': 'cpu',
        'vllm_server_service_name': 'fleet-test-own-vllm', 'lmcache_server_service_name': 'fleet-test-own-lmcache',
        'vllm_server_config_dir': str(root / 'etc'), 'lmcache_server_config_dir': str(root / 'etc'),
        'vllm_server_venvs_dir': str(root / 'opt' / 'vllm'), 'lmcache_server_venvs_dir': str(root / 'opt' / 'lmcache'),
        'vllm_server_home': str(root / 'var' / 'vllm'), 'lmcache_server_home': str(root / 'var' / 'lmcache'),
        'vllm_server_user': 'fleet-test-no-such-user', 'lmcache_server_user': 'fleet-test-no-such-user-2',
        'vllm_server_group': 'fleet-test-no-such-group', 'lmcache_server_group': 'fleet-test-no-such-group-2',
        'fleet_backup_dir': str(root / 'var' / 'fleet' / 'rollback'),
        'fleet_probe_cache_path': str(root / 'facts.d' / 'vllm_block_size.fact'),
        'fleet_manifest_path': str(root / 'manifest' / 'manifest.json'),
    }
    merged.update(overrides)
    return merged


def claim(runner, tmp_path, root, **overrides):
    playbook = tmp_path / 'claim.yml'
    playbook.write_text(PLAYBOOK)
    inventory = runner.write_inventory({'localhost': host(root, **overrides)})
    return runner.run(str(playbook), inventory)


def test_absent_paths_are_claimed_in_a_root_only_manifest(runner, tmp_path):
    root = tmp_path / 'host'
    root.mkdir()
    code, output = claim(runner, tmp_path, root)
    assert code == 0, output[-4000:]
    manifest = root / 'manifest' / 'manifest.json'
    assert stat.S_IMODE(os.stat(str(manifest)).st_mode) == 0o600
    entries = json.loads(manifest.read_text())['entries']
    assert entries[str(root / 'var' / 'vllm')]['kind'] == 'home'
    assert entries[str(root / 'etc' / 'fleet-test-own-vllm.env')]['kind'] == 'env'
    assert entries['user:fleet-test-no-such-user']['kind'] == 'user'
    assert entries['/etc/systemd/system/fleet-test-own-vllm.service']['kind'] == 'unit'
    assert sorted(os.listdir(str(root))) == ['manifest'], 'only the manifest was written'
    code, output = claim(runner, tmp_path, root)
    assert code == 0 and 'changed=0' in output, output[-4000:]


def test_a_home_of_another_user_and_a_link_are_refused_before_anything_is_written(runner, tmp_path):
    root = tmp_path / 'host'
    (root / 'var' / 'vllm').mkdir(parents=True)
    os.chown(str(root / 'var' / 'vllm'), 65534, 65534)
    (root / 'etc').mkdir()
    os.symlink('/etc/passwd', str(root / 'etc' / 'fleet-test-own-lmcache.env'))
    code, output = claim(runner, tmp_path, root)
    assert code != 0
    owner = 'nobody'
    assert ('host localhost: vllm_server_home=%s exists and belongs to %s (uid 65534), not to the service user '
            'fleet-test-no-such-user; the collection never chowns it: choose a directory of its own, or remove it first'
            % (root / 'var' / 'vllm', owner)) in output
    assert ('host localhost: lmcache_server_config_dir=%s %s is a symbolic link, which the collection never follows or '
            'replaces; remove the link or choose another path' % (root / 'etc', root / 'etc' / 'fleet-test-own-lmcache.env')
            ) in output
    assert not (root / 'manifest').exists()
    assert os.stat(str(root / 'var' / 'vllm')).st_uid == 65534


def test_a_manifest_others_may_write_is_not_trusted(runner, tmp_path):
    root = tmp_path / 'host'
    (root / 'manifest').mkdir(parents=True)
    manifest = root / 'manifest' / 'manifest.json'
    manifest.write_text(json.dumps({'collection': 'lmcache_vllm.fleet', 'version': 1, 'entries': {}}))
    manifest.chmod(0o666)
    code, output = claim(runner, tmp_path, root)
    assert code != 0
    assert 'the manifest %s is not a plain file that only root may read and write (mode 0600)' % manifest in output
    assert stat.S_IMODE(os.stat(str(manifest)).st_mode) == 0o666
