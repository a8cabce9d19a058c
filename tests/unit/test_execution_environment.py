# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""execution-environment.yml is a valid ansible-builder 3 definition that puts this version of the collection into
the image: `ansible-builder create` (the real ansible-builder) writes the build context from it and the tarball
`ansible-galaxy collection build` makes.

The image itself is built and run in tests/real/test_execution_environment_real.py (scripts/build-ee.sh, a
podman build of about a minute)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from fleet_collection import REPO_ROOT

DEFINITION = os.path.join(REPO_ROOT, 'execution-environment.yml')


def tool(name):
    found = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(found):
        found = shutil.which(name) or pytest.skip('%s is missing (requirements/tools.txt)' % name)
    return found


def definition():
    with open(DEFINITION, encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def galaxy_version():
    with open(os.path.join(REPO_ROOT, 'galaxy.yml'), encoding='utf-8') as handle:
        return str(yaml.safe_load(handle)['version'])


def test_the_definition_names_this_versions_tarball():
    ee = definition()
    tarball = 'lmcache_vllm-fleet-%s.tar.gz' % galaxy_version()
    assert ee['version'] == 3
    assert [f['src'] for f in ee['additional_build_files']] == [tarball]
    assert [c['name'] for c in ee['dependencies']['galaxy']['collections']] == ['/tmp/lmcache-vllm-fleet/' + tarball]
    assert ee['dependencies']['ansible_core']['package_pip'].startswith('ansible-core>=2.19')


def test_ansible_builder_creates_the_build_context(tmp_path):
    builder, galaxy = tool('ansible-builder'), tool('ansible-galaxy')
    proc = subprocess.run([galaxy, 'collection', 'build', REPO_ROOT, '--output-path', str(tmp_path)],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shutil.copy(DEFINITION, str(tmp_path))
    context = tmp_path / 'context'
    proc = subprocess.run([builder, 'create', '-f', str(tmp_path / 'execution-environment.yml'), '-c', str(context)],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (context / 'Containerfile').read_text()
    assert 'ARG EE_BASE_IMAGE="localhost/lmcache-vllm-fleet-ee-base:latest"' in containerfile
    # the Python and package manager of the project's base image (scripts/setup-ee-base.sh), build arguments that
    # another base overrides
    assert 'ARG PYCMD="/opt/ee/bin/python3"' in containerfile
    assert 'ARG PKGMGR="/usr/bin/apt-get"' in containerfile
    assert 'COPY _build/collection/ /tmp/lmcache-vllm-fleet/' in containerfile
    assert 'ansible-galaxy collection install' in containerfile
    tarball = 'lmcache_vllm-fleet-%s.tar.gz' % galaxy_version()
    assert (context / '_build' / 'collection' / tarball).is_file()
    requirements = yaml.safe_load((context / '_build' / 'requirements.yml').read_text())
    assert requirements['collections'] == [{'name': '/tmp/lmcache-vllm-fleet/' + tarball, 'type': 'file'}]
