# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make` alone lists the targets (and does nothing else); `make help` the same; `make deploy` still deploys."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from fleet_collection import REPO_ROOT


@pytest.fixture(name='make')
def make_fixture():
    program = shutil.which('make')
    if not program:
        pytest.skip('make is missing')
    return program


def phony_targets():
    with open('%s/Makefile' % REPO_ROOT, encoding='utf-8') as handle:
        text = handle.read().replace('\\\n', ' ')
    return re.search(r'^\.PHONY:(.*)$', text, re.M).group(1).split()


def run(make, *args):
    return subprocess.run([make, '--no-print-directory'] + list(args), cwd=REPO_ROOT, capture_output=True,
                          text=True, check=False, timeout=60)


@pytest.mark.parametrize('args', [(), ('help',)])
def test_make_alone_and_make_help_list_every_target(make, args):
    proc = run(make, *args)
    assert proc.returncode == 0, proc.stderr
    described = set(re.findall(r'^ +([a-z-]+): ', proc.stdout, re.M))
    assert described == set(phony_targets()), proc.stdout
    # nothing but the list: no recipe ran
    assert 'scripts/' not in proc.stdout and 'ansible-playbook' not in proc.stdout


def test_make_deploy_still_runs_the_sandbox_deploy(make):
    proc = run(make, '-n', 'deploy')
    assert proc.returncode == 0, proc.stderr
    assert 'bash scripts/setup-tools.sh' in proc.stdout
    assert 'ansible-playbook -i inventories/sandbox playbooks/deploy.yml' in proc.stdout
