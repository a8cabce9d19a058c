# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an Ansible user reads about the release: the changelog antsibull-changelog builds for the version of
galaxy.yml (its roles under New Roles, no breaking changes against versions never released), every plugin and
role added in that version, every plugin with an author, and only tested platforms in the roles' metadata."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest
import yaml

from fleet_collection import REPO_ROOT

# the platforms the test hosts run (scripts/setup-testhosts.sh builds Debian bookworm images)
TESTED_PLATFORMS = {'Debian': ['bookworm']}


def galaxy_version():
    with open(os.path.join(REPO_ROOT, 'galaxy.yml'), encoding='utf-8') as handle:
        return str(yaml.safe_load(handle)['version'])


def test_no_fragment_announces_breaking_changes_before_the_first_release():
    with open(os.path.join(REPO_ROOT, 'changelogs', 'changelog.yaml'), encoding='utf-8') as handle:
        released = yaml.safe_load(handle).get('releases') or {}
    if released:
        pytest.skip('a release exists: breaking changes against it may be announced')
    for path in glob.glob(os.path.join(REPO_ROOT, 'changelogs', 'fragments', '*.yml')):
        with open(path, encoding='utf-8') as handle:
            assert 'breaking_changes' not in (yaml.safe_load(handle) or {}), os.path.basename(path)


def test_the_release_changelog_lists_every_role_as_new(tmp_path):
    program = shutil.which('antsibull-changelog')
    if not program:
        pytest.skip('antsibull-changelog is missing (requirements/tools.txt)')
    for name in ('changelogs', 'plugins', 'roles', 'playbooks', 'meta'):
        shutil.copytree(os.path.join(REPO_ROOT, name), str(tmp_path / name))
    shutil.copy(os.path.join(REPO_ROOT, 'galaxy.yml'), str(tmp_path))
    lint = subprocess.run([program, 'lint'], cwd=str(tmp_path), capture_output=True, text=True, check=False)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr
    proc = subprocess.run([program, 'release', '--version', galaxy_version(), '--date', '2026-01-01'],
                          cwd=str(tmp_path), capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / 'CHANGELOG.rst').read_text()
    new_roles = text.split('New Roles\n---------\n', 1)[1]
    for role in sorted(os.listdir(os.path.join(REPO_ROOT, 'roles'))):
        if role != 'common':
            assert '- lmcache_vllm.fleet.%s - ' % role in new_roles, role
    assert 'Breaking Changes' not in text
    assert 'playbooks ``deploy``' in text


def test_every_plugin_and_role_is_added_in_this_version_with_an_author():
    version = galaxy_version()
    docs = glob.glob(os.path.join(REPO_ROOT, 'plugins', 'filter', '*.yml'))
    docs += glob.glob(os.path.join(REPO_ROOT, 'roles', '*', 'meta', 'argument_specs.yml'))
    for path in docs:
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
        added = [line.split(':', 1)[1].strip().strip('"') for line in text.splitlines()
                 if line.strip().startswith('version_added:')]
        assert added and set(added) == {version}, (path, added)
        if '/filter/' in path:
            assert '(!UNKNOWN)' not in text and 'author:' in text, path


def test_roles_claim_only_tested_platforms():
    for path in glob.glob(os.path.join(REPO_ROOT, 'roles', '*', 'meta', 'main.yml')):
        with open(path, encoding='utf-8') as handle:
            platforms = yaml.safe_load(handle)['galaxy_info']['platforms']
        assert {p['name']: p['versions'] for p in platforms} == TESTED_PLATFORMS, path
