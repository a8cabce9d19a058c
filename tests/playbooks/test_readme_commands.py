# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every command of README.md, docs/plan.md and docs/performance.md runs as written in a new shell.

The commands are read from the documents' ```sh blocks, so the test follows the documents. Each block runs as
one bash script (the commands one after the other, as a user types them) in a copy of the checkout, with a new
HOME and the PATH a new login shell has: nothing of the environment the tests run in. The copy shares the
checkout's tool venv (`.venv`) and sandbox collections, i.e. the state after the README's set-up.

Commands that need a live host get ``--syntax-check`` (the playbook is parsed and its collection resolved, no
host is contacted); the ones that build the sandbox, run the whole test suite or remove the downloads are named in
NOT_RUN with the reason, and a NOT_RUN entry that no longer matches a documented command fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from fleet_playbook_helpers import REPO_ROOT

DOCUMENTS = ('README.md', 'docs/plan.md', 'docs/performance.md')

# command prefix -> why it is not run here (each runs in CI or needs the machine to itself)
NOT_RUN = {
    'make deploy': 'builds the podman sandbox (molecule and the fleet benchmark run the same playbooks)',
    'make test': 'the whole test suite',
    'python3 benchmarks/probe_benchmark.py': 'a benchmark of minutes',
    'source scripts/env.sh && python benchmarks/fleet_benchmark.py': 'a benchmark of many minutes',
    'source scripts/env.sh && python benchmarks/warm_start_benchmark.py': 'three vLLM starts, minutes',
    'scripts/build-ee.sh': 'a podman build of minutes (tests/real/test_execution_environment_real.py runs it)',
    '.venv/bin/ansible-navigator run': 'runs the image of the build above (the same real test runs it)',
}

# Commands that would contact a host: parsed only.
LIVE_MAKE = re.compile(r'^make (status|gpus|remove)\b')
LIVE_PLAYBOOK = re.compile(r'^ansible-playbook .*playbooks/(status|remove|gpus|deploy)\.yml')

NEW_SHELL_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


def sh_blocks(document):
    with open(os.path.join(REPO_ROOT, document), encoding='utf-8') as handle:
        text = handle.read()
    return [block.strip('\n') for block in re.findall(r'^```sh\n(.*?)^```', text, re.S | re.M)]


def command_lines(block):
    lines = []
    for line in block.splitlines():
        command = re.sub(r'\s+#.*$', '', line).strip()
        if command and not command.startswith('#'):
            lines.append(command)
    return lines


def runnable(command):
    """The command as the test runs it, or None when it is in NOT_RUN."""
    if any(command.startswith(prefix) for prefix in NOT_RUN):
        return None
    if LIVE_MAKE.match(command):
        return command + ' ARGS=--syntax-check'
    if LIVE_PLAYBOOK.match(command):
        return command + ' --syntax-check'
    return command


def all_commands():
    return [(document, command) for document in DOCUMENTS for block in sh_blocks(document)
            for command in command_lines(block)]


def checkout_copy(dest):
    """The checkout's tracked and new files, with its tool venv and sandbox collections (the README's set-up)."""
    files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=REPO_ROOT, check=True,
                           capture_output=True).stdout.decode().split('\0')
    for name in filter(None, files):
        source = os.path.join(REPO_ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copy2(source, os.path.join(dest, name))
    os.symlink(os.path.realpath(os.path.join(REPO_ROOT, '.venv')), os.path.join(dest, '.venv'))
    colls = os.path.join(dest, '.cache', 'collections', 'ansible_collections')
    os.makedirs(colls)
    for namespace in ('containers', 'ansible'):
        source = os.path.join(REPO_ROOT, '.cache', 'collections', 'ansible_collections', namespace)
        if os.path.isdir(source):
            os.symlink(os.path.realpath(source), os.path.join(colls, namespace))
    # the collection path of the copy itself, as scripts/setup-tools.sh makes it: every block finds the collection,
    # whichever block runs first in its worker (pytest-xdist gives each worker its own copy)
    os.makedirs(os.path.join(colls, 'lmcache_vllm'))
    os.symlink(dest, os.path.join(colls, 'lmcache_vllm', 'fleet'))
    return dest


@pytest.fixture(scope='module')
def checkout(tmp_path_factory):
    if not os.access(os.path.join(REPO_ROOT, '.venv', 'bin', 'ansible-playbook'), os.X_OK):
        pytest.skip('the tool venv is not built (make setup)')
    return checkout_copy(str(tmp_path_factory.mktemp('checkout')))


def test_documents_hold_the_commands_the_test_knows():
    commands = [command for _document, command in all_commands()]
    assert any(command.startswith('make status') for command in commands)
    assert any(command.startswith('ansible-doc ') for command in commands)
    for prefix in NOT_RUN:
        assert any(command.startswith(prefix) for command in commands), 'NOT_RUN entry %r matches no command' % prefix


def test_live_commands_are_parsed_only():
    assert runnable('make remove ARGS="--check --diff"') == 'make remove ARGS="--check --diff" ARGS=--syntax-check'
    assert runnable('ansible-playbook -i x playbooks/status.yml').endswith('status.yml --syntax-check')
    assert runnable('make validate INVENTORY=inventories/example') == 'make validate INVENTORY=inventories/example'
    assert runnable('make deploy') is None


@pytest.mark.parametrize('document,index', [(d, i) for d in DOCUMENTS for i in range(len(sh_blocks(d)))])
def test_block_runs_as_written_in_a_new_shell(checkout, tmp_path, document, index):
    commands = [runnable(command) for command in command_lines(sh_blocks(document)[index])]
    commands = [command for command in commands if command]
    if not commands:
        pytest.skip('every command of this block is in NOT_RUN')
    home = tmp_path / 'home'
    home.mkdir()
    env = {'HOME': str(home), 'PATH': NEW_SHELL_PATH, 'LANG': 'C.UTF-8', 'USER': 'root', 'TERM': 'dumb'}
    script = 'set -euo pipefail\n' + '\n'.join(commands) + '\n'
    proc = subprocess.run(['bash', '-c', script], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, 'block %d of %s failed:\n%s\n%s' % (index, document, script, output[-4000:])
    assert 'command not found' not in output
    assert "couldn't resolve module/action" not in output
