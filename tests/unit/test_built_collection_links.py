# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a user reads in the built collection holds no dead link, and the changelog announces only what ships.

The collection is built from the checkout's files (`ansible-galaxy collection build`, the build_ignore of
galaxy.yml applies) and unpacked; every relative link and image of every Markdown file in it must name a file or
directory that is in it, and every `lmcache_vllm.fleet.<name>` the changelog fragments name must be a playbook,
role or plugin in it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from fleet_collection import REPO_ROOT

LINK_RE = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')


@pytest.fixture(scope='module', name='unpacked')
def unpacked_fixture(tmp_path_factory):
    galaxy = os.path.join(os.path.dirname(sys.executable), 'ansible-galaxy')
    if not os.path.exists(galaxy):
        galaxy = shutil.which('ansible-galaxy') or pytest.skip('ansible-galaxy is not installed')
    root = tmp_path_factory.mktemp('links')
    tree = root / 'fleet'
    files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=REPO_ROOT, check=True,
                           capture_output=True).stdout.decode().split('\0')
    for name in filter(None, files):
        if os.path.isfile(os.path.join(REPO_ROOT, name)):
            os.makedirs(os.path.dirname(str(tree / name)), exist_ok=True)
            shutil.copy2(os.path.join(REPO_ROOT, name), str(tree / name))
    proc = subprocess.run([galaxy, 'collection', 'build', str(tree), '--output-path', str(root / 'dist')],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = list((root / 'dist').iterdir())
    out = root / 'unpacked'
    with tarfile.open(str(tarball)) as archive:
        archive.extractall(str(out), filter='data')
    return str(out)


def relative_links(path):
    with open(path, encoding='utf-8') as handle:
        text = handle.read()
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    for target in LINK_RE.findall(text):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith('#'):
            continue
        yield target.split('#', 1)[0]


def test_every_relative_link_of_the_built_collection_resolves(unpacked):
    markdown = glob.glob(os.path.join(unpacked, '**', '*.md'), recursive=True)
    assert os.path.join(unpacked, 'README.md') in markdown
    dead = []
    for path in markdown:
        for target in relative_links(path):
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
            if not resolved.startswith(unpacked + os.sep) or not os.path.exists(resolved):
                dead.append('%s -> %s' % (os.path.relpath(path, unpacked), target))
    assert dead == []


def test_changelog_names_only_what_ships(unpacked):
    shipped = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(unpacked, 'playbooks', '*.yml'))}
    shipped |= {os.path.basename(p) for p in glob.glob(os.path.join(unpacked, 'roles', '*'))}
    shipped |= {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(unpacked, 'plugins', '*', '*'))}
    named = set()
    for path in glob.glob(os.path.join(REPO_ROOT, 'changelogs', 'fragments', '*.yml')):
        with open(path, encoding='utf-8') as handle:
            named |= set(re.findall(r'lmcache_vllm\.fleet\.(\w+)', handle.read()))
    assert named, 'the fragments name no content'
    assert sorted(named - shipped) == []
