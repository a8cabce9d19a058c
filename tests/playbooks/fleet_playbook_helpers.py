# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers shared by the playbook tests: run the collection's playbooks with ansible-playbook.

Imported as ``fleet_playbook_helpers`` (a name no other test directory uses, unlike
``conftest``); ``conftest.py`` only turns them into fixtures. The repository is exposed as
``ansible_collections.lmcache_vllm.fleet`` through ``fleet_collection.collections_tree`` (a symlink in a
temporary collections tree), which is the only entry of ``ANSIBLE_COLLECTIONS_PATH`` (so no other
installed copy can shadow it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fleet_collection import REPO_ROOT  # noqa: E402  # pylint: disable=wrong-import-position
MODELS = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models')
EXAMPLE = os.path.join(REPO_ROOT, 'inventories', 'example')
COMMIT = '0123456789abcdef0123456789abcdef01234567'

# Every host of a test inventory points at an ssh that does not exist: any task that
# really contacted a host would fail with "Unable to execute ssh command line".
NO_CONTACT = {
    'ansible_host': '192.0.2.10',
    'ansible_connection': 'ssh',
    'ansible_ssh_executable': '/nonexistent/ssh',
}
CONTACT_MARKERS = ('Unable to execute ssh', 'UNREACHABLE', '/nonexistent/ssh')


def read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def assert_no_contact(output):
    for marker in CONTACT_MARKERS:
        assert marker not in output, output[-4000:]


def fail_messages(output):
    """The msg of every failed task (the playbooks' final fail)."""
    return re.findall(r'"msg": "(\d+ problem\(s\)[^"]*)"', output)


def fake_hf_home(root):
    """HF_HOME with the two example models in hub/models--Qwen--*/snapshots/<commit>, refs/main -> commit."""
    for hub_id, fixture in (('Qwen/Qwen3.6-27B', 'qwen3.6-27b'), ('Qwen/Qwen3.5-0.8B', 'qwen3.5-0.8b')):
        repo = root / 'hub' / ('models--' + hub_id.replace('/', '--'))
        (repo / 'snapshots' / COMMIT).mkdir(parents=True)
        (repo / 'refs').mkdir()
        (repo / 'refs' / 'main').write_text(COMMIT)
        shutil.copy(os.path.join(MODELS, fixture, 'config.json'), str(repo / 'snapshots' / COMMIT / 'config.json'))
    return str(root)


def ansible_playbook():
    """The ansible-playbook next to the running interpreter, else on PATH (skips the test without one)."""
    candidate = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    if os.path.exists(candidate):
        return candidate
    found = shutil.which('ansible-playbook')
    if not found:
        pytest.skip('ansible-playbook is not installed')
    return found


class PlaybookRunner:
    """Runs playbooks of the collection (or any playbook path) against an inventory."""

    def __init__(self, collections, workdir):
        self.collections = collections
        self.workdir = workdir
        self.executable = ansible_playbook()

    def write_inventory(self, hosts, name='inventory'):
        """``hosts``: {host: vars}; every host joins vllm_hosts with NO_CONTACT connection settings."""
        directory = self.workdir / name
        directory.mkdir(exist_ok=True)
        inventory = {'all': {'children': {'vllm_hosts': {'hosts': {}}}}}
        for number, (host, host_vars) in enumerate(hosts.items()):
            # each host its own (unreachable) address: one address for two hosts is refused
            merged = dict(NO_CONTACT, ansible_host='192.0.2.%d' % (10 + number))
            merged.update(host_vars)
            inventory['all']['children']['vllm_hosts']['hosts'][host] = merged
        path = directory / 'hosts.yml'
        path.write_text(yaml.safe_dump(inventory, sort_keys=True))
        return str(path)

    def run(self, playbook, inventory, *extra, timeout=300, env=None):
        """Run ``playbook`` (a name under playbooks/, or an absolute path); returns (exit code, output).

        ``env`` adds environment variables; the example inventory reads its API key from
        FLEET_VLLM_API_KEY and its store password from FLEET_KV_STORE_PASSWORD, which are set to test values
        unless ``env`` gives others (or None).
        """
        extra_env = {'FLEET_VLLM_API_KEY': 'test-api-key', 'FLEET_KV_STORE_PASSWORD': 'test-kv-store-password'}
        extra_env.update(env or {})
        env = dict(os.environ)
        for key, value in extra_env.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        env.update({
            'ANSIBLE_COLLECTIONS_PATH': self.collections,
            'ANSIBLE_FORCE_COLOR': 'false',
            'ANSIBLE_NOCOLOR': 'true',
            'ANSIBLE_RETRY_FILES_ENABLED': 'false',
            'ANSIBLE_HOST_KEY_CHECKING': 'false',
            'ANSIBLE_LOCAL_TEMP': str(self.workdir / 'ansible-tmp'),
        })
        path = playbook if os.path.isabs(playbook) else os.path.join(REPO_ROOT, 'playbooks', playbook)
        cmd = [self.executable, '-i', inventory, path] + list(extra)
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=timeout, check=False)
        return proc.returncode, proc.stdout
