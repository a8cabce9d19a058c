# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers to run the collection's playbooks with ansible-playbook from pytest.

The repository is exposed as ``ansible_collections.lmcache_vllm.fleet`` through a
symlink in a temporary collections tree, which is the only entry of
``ANSIBLE_COLLECTIONS_PATH`` (so no other installed copy can shadow it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from fleet_playbook_helpers import CONTACT_MARKERS, NO_CONTACT, REPO_ROOT  # noqa: F401  (re-exported)


def _ansible_playbook():
    candidate = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    if os.path.exists(candidate):
        return candidate
    found = shutil.which('ansible-playbook')
    if not found:
        pytest.skip('ansible-playbook is not installed')
    return found


@pytest.fixture(scope='session')
def collections_path(tmp_path_factory):
    root = tmp_path_factory.mktemp('collections')
    namespace = root / 'ansible_collections' / 'lmcache_vllm'
    namespace.mkdir(parents=True)
    os.symlink(REPO_ROOT, str(namespace / 'fleet'))
    return str(root)


class PlaybookRunner:
    def __init__(self, collections, workdir):
        self.collections = collections
        self.workdir = workdir
        self.executable = _ansible_playbook()

    def write_inventory(self, hosts, name='inventory'):
        """``hosts``: {host: vars}; every host joins vllm_hosts with NO_CONTACT connection settings."""
        directory = self.workdir / name
        directory.mkdir(exist_ok=True)
        inventory = {'all': {'children': {'vllm_hosts': {'hosts': {}}}}}
        for host, host_vars in hosts.items():
            merged = dict(NO_CONTACT)
            merged.update(host_vars)
            inventory['all']['children']['vllm_hosts']['hosts'][host] = merged
        path = directory / 'hosts.yml'
        path.write_text(yaml.safe_dump(inventory, sort_keys=True))
        return str(path)

    def run(self, playbook, inventory, *extra, timeout=300):
        env = dict(os.environ)
        env.update({
            'ANSIBLE_COLLECTIONS_PATH': self.collections,
            'ANSIBLE_FORCE_COLOR': 'false',
            'ANSIBLE_NOCOLOR': 'true',
            'ANSIBLE_RETRY_FILES_ENABLED': 'false',
            'ANSIBLE_HOST_KEY_CHECKING': 'false',
            'ANSIBLE_LOCAL_TEMP': str(self.workdir / 'ansible-tmp'),
        })
        cmd = [self.executable, '-i', inventory, os.path.join(REPO_ROOT, 'playbooks', playbook)] + list(extra)
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=timeout, check=False)
        return proc.returncode, proc.stdout


@pytest.fixture
def runner(collections_path, tmp_path):
    return PlaybookRunner(collections_path, tmp_path)
