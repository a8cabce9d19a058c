# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' background jobs are found again when HOME is not the account's home.

A job started with poll 0 writes its status under the async directory, by default ``~/.ansible_async`` of the HOME
the job's shell has; async_status reads its own. With a HOME that differs (here: the job's environment sets one,
as a sudo that keeps the caller's HOME does) the wait fails with "could not find job" - unless ansible_async_dir is
an absolute path, as the vllm_server and lmcache_server roles set it (their vars/main.yml)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from fleet_playbook_helpers import REPO_ROOT

ROLES = ('vllm_server', 'lmcache_server')

PLAY = """
- hosts: localhost
  gather_facts: false
  connection: local
  tasks:
    - name: Start a background job with another HOME
      ansible.builtin.command: sleep 1
      environment:
        HOME: "{{ other_home }}"
      async: 60
      poll: 0
      register: job
    - name: Wait for it
      ansible.builtin.async_status:
        jid: "{{ job.ansible_job_id }}"
      register: result
      until: result.finished | bool
      retries: 20
      delay: 1
"""


def role_async_dir(role):
    with open(os.path.join(REPO_ROOT, 'roles', role, 'vars', 'main.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)['ansible_async_dir']


def run(tmp_path, *extra):
    (tmp_path / 'play.yml').write_text(PLAY)
    other = tmp_path / 'other-home'
    other.mkdir(exist_ok=True)
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    proc = subprocess.run(['ansible-playbook', '-i', 'localhost,', str(tmp_path / 'play.yml'),
                           '-e', 'other_home=%s' % other, '-e', 'ansible_python_interpreter=%s' % sys.executable]
                          + list(extra), capture_output=True, text=True, env=env,
                          check=False, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize('role', ROLES)
def test_the_roles_set_an_absolute_async_dir_of_root(role):
    path = role_async_dir(role)
    assert os.path.isabs(path) and path.startswith('/root/'), path


def test_a_job_is_lost_with_another_home_and_found_with_the_roles_async_dir(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the roles' async directory is root's: run as root")
    code, output = run(tmp_path)
    assert code != 0 and 'could not find job' in output, output[-3000:]
    code, output = run(tmp_path, '-e', 'ansible_async_dir=%s' % role_async_dir('vllm_server'))
    assert code == 0, output[-3000:]
