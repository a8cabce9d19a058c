# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ansible-galaxy collection build` ships what a user needs and nothing of the development tree.

The collection is copied into a temporary directory, the caches, outputs and results that a working
tree collects are planted in the copy, and the built tarball's file list is checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from fleet_collection import REPO_ROOT

# What a working tree collects: none of it may reach a user.
PLANTED = [
    '.ansible/collections/ansible_collections/x/y/MANIFEST.json',
    '.cache/sanity/x.txt',
    '.venv/bin/python',
    '.pytest_cache/v/cache/nodeids',
    'fleet-plan/fleet.html',
    'fleet-status/status.json',
    'fleet-monitoring/targets.json',
    'tests/output/junit/x.xml',
    'benchmarks/results/probe-20261130T141420.json',
    'plugins/modules/__pycache__/gpu_facts.cpython-311.pyc',
    'plugins/module_utils/stale.pyc',
    'lmcache_vllm-fleet-0.0.9.tar.gz',
]

# Never in the tarball (a prefix of the path, or the whole path).
FORBIDDEN_PREFIXES = ('.ansible/', '.cache/', '.venv/', '.pytest_cache/', '.ci/', '.git/', 'fleet-plan/',
                      'fleet-status/', 'fleet-monitoring/', 'tests/output/', 'benchmarks/', 'scripts/',
                      'requirements/', 'extensions/', 'inventories/sandbox/')
FORBIDDEN_FILES = ('Makefile', '.gitignore', '.ansible-lint', 'galaxy.yml', 'playbooks/sandbox_up.yml',
                   'playbooks/sandbox_down.yml')

# Always in it.
REQUIRED = ('MANIFEST.json', 'FILES.json', 'README.md', 'COPYING', 'meta/runtime.yml',
            'roles/lmcache_server/README.md', 'roles/vllm_server/README.md',
            'roles/lmcache_server/meta/argument_specs.yml', 'roles/vllm_server/meta/argument_specs.yml',
            'roles/common/meta/argument_specs.yml', 'roles/common/files/fleet_wait_ready.py',
            'plugins/modules/block_size_probe.py', 'plugins/modules/gpu_facts.py', 'plugins/modules/service_info.py',
            'plugins/module_utils/status/prometheus_text.py', 'plugins/module_utils/block_size/gpu_facts.py',
            'plugins/module_utils/block_size/journal_diagnose.py', 'plugins/filter/day2.py', 'plugins/lookup/model_config.py',
            'playbooks/deploy.yml', 'playbooks/plan.yml', 'playbooks/validate.yml', 'playbooks/status.yml',
            'playbooks/remove.yml', 'playbooks/monitoring.yml', 'playbooks/gpus.yml', 'playbooks/vars/fleet_host.yml',
            'playbooks/templates/status/fleet.html.j2', 'docs/upgrades.md', 'changelogs/changelog.yaml')


def ansible_galaxy():
    candidate = os.path.join(os.path.dirname(sys.executable), 'ansible-galaxy')
    if os.path.exists(candidate):
        return candidate
    found = shutil.which('ansible-galaxy')
    if not found:
        pytest.skip('ansible-galaxy is not installed')
    return found


@pytest.fixture(scope='module', name='built')
def built_fixture(tmp_path_factory):
    """(members of the built tarball, galaxy.yml) of a copy of the collection with the planted files."""
    root = tmp_path_factory.mktemp('build')
    tree = root / 'fleet'
    shutil.copytree(REPO_ROOT, str(tree), symlinks=True,
                    ignore=shutil.ignore_patterns('.git', '.venv', '.cache', '.ansible', 'fleet-plan', 'fleet-status',
                                                  'fleet-monitoring', '__pycache__', '*.tar.gz', 'output'))
    for rel in PLANTED:
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('planted\n')
    out = root / 'dist'
    proc = subprocess.run([ansible_galaxy(), 'collection', 'build', str(tree), '--output-path', str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout
    with open(str(tree / 'galaxy.yml'), encoding='utf-8') as handle:
        galaxy = yaml.safe_load(handle)
    (tarball,) = list(out.iterdir())
    assert tarball.name == 'lmcache_vllm-fleet-%s.tar.gz' % galaxy['version']
    with tarfile.open(str(tarball)) as archive:
        members = sorted(m.name for m in archive.getmembers() if m.isfile())
    return members, galaxy


def test_no_caches_outputs_results_or_development_files(built):
    members, _galaxy = built
    leaked = [m for m in members if m.startswith(FORBIDDEN_PREFIXES) or m in FORBIDDEN_FILES
              or '__pycache__' in m or m.endswith(('.pyc', '.tar.gz'))]
    assert leaked == []


def test_everything_a_user_needs_is_there(built):
    members, _galaxy = built
    assert [r for r in REQUIRED if r not in members] == []
    # every role and plugin file of the tree ships
    for top in ('roles', 'plugins'):
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO_ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != '__pycache__']
            for name in filenames:
                if name.endswith('.pyc'):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), REPO_ROOT)
                assert rel in members, rel


def test_galaxy_metadata(built):
    _members, galaxy = built
    assert {'vllm', 'lmcache', 'inference', 'llm', 'gpu', 'systemd'} <= set(galaxy['tags'])
    assert len(galaxy['tags']) <= 20
    assert all(tag.replace('_', '').isalnum() and tag == tag.lower() for tag in galaxy['tags'])
    # no placeholder addresses: the keys are left out until the collection has public ones
    for key in ('repository', 'documentation', 'homepage', 'issues'):
        value = galaxy.get(key)
        assert value is None or ('example' not in value and value.startswith('https://')), key
    # users need nothing beyond ansible-core; the sandbox's collections are declared for development only
    assert galaxy['dependencies'] == {}
    with open(os.path.join(REPO_ROOT, 'requirements', 'collections.yml'), encoding='utf-8') as handle:
        names = [c['name'] for c in yaml.safe_load(handle)['collections']]
    assert 'containers.podman' in names
