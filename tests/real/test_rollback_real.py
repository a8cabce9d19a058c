# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollback of a failed rollout on a P2P pool's coordinator host, on a real systemd host (a rootful podman
container of the test-host image): deploy.yml's own task files ``playbooks/tasks/backup.yml`` and
``playbooks/tasks/rollback.yml`` run with the host plan of a coordinator host (lookup host_plan), around a rollout
that changed the coordinator's and LMCache's units and restarted them. Afterwards the previous units are back and
running (a coordinator that ran before), or the coordinator the rollout created is stopped, disabled and gone (a
first P2P deploy). The units are the test's own (``sleep``, told apart by their Description): what is tested is what
the rollback does with units, files and systemd, not LMCache.

Needs podman and the image localhost/lmcache-vllm-fleet-host:bookworm (scripts/setup-testhosts.sh); skips without
them unless CI or FLEET_REQUIRE_REAL=1."""

from __future__ import absolute_import, division, print_function

import os
import subprocess

import pytest
import yaml

from fleet_collection import collections_tree
from fleet_real_probe_helpers import REPO
from fleet_systemd_host import podman, require_image, systemd_host

TASKS = os.path.join(REPO, 'playbooks', 'tasks')
COORDINATOR, LMCACHE, VLLM = 'lmcache-server-coordinator', 'lmcache-server', 'vllm'
P2P = {'vllm_server_model': '/srv/models/qwen3-tiny', 'vllm_server_device': 'cpu', 'vllm_server_hybrid': False,
       'lmcache_server_kv_pool': 'peers', 'lmcache_server_kv_transport': 'p2p', 'lmcache_server_host': '0.0.0.0',
       'lmcache_server_allow_unauthenticated': True, 'ansible_connection': 'containers.podman.podman',
       'ansible_python_interpreter': '/usr/bin/python3'}


SECONDS = {'previous': 100001, 'new': 100002}  # what each unit's process runs: which unit started it


def unit(description, seconds):
    return '[Unit]\nDescription=%s\n[Service]\nExecStart=/bin/sleep %d\n[Install]\nWantedBy=multi-user.target\n' \
        % (description, seconds)


def units_task(name, names, description):
    """Write the units of ``names`` (at the plan's paths) with one Description, then reload, enable and restart."""
    return [
        {'name': name, 'ansible.builtin.copy': {'content': unit(description + ' {{ item.name }}', SECONDS[description]),
                                                'dest': '{{ item.unit_path }}', 'mode': '0644'},
         'loop': "{{ __fleet_plan.services | selectattr('name', 'in', %r) | list }}" % names},
        {'name': name + ': start', 'ansible.builtin.systemd_service': {
            'name': '{{ item }}', 'state': 'restarted', 'enabled': True, 'daemon_reload': True}, 'loop': names},
    ]


def play(previous):
    """Before the rollout: ``previous`` units run. The rollout: the coordinator's and LMCache's units change and
    restart (the role's restart facts set), then vLLM fails and the rescue runs rollback.yml."""
    tasks = [{'name': 'Plan the coordinator host', 'ansible.builtin.set_fact': {
        '__fleet_plan': "{{ lookup('lmcache_vllm.fleet.host_plan') }}"}}]
    tasks += units_task('The units before the rollout', previous, 'previous')
    tasks += [{'name': 'Back up as deploy.yml does', 'ansible.builtin.include_tasks': os.path.join(TASKS, 'backup.yml')}]
    tasks += units_task('The rollout changes them', [COORDINATOR, LMCACHE], 'new')
    tasks += [{'name': 'What the roles note', 'ansible.builtin.set_fact': {
        '__lmcache_server_coordinator_restart': True, '__lmcache_server_restart': True, '__fleet_stage': 'vllm'}},
        {'name': 'vLLM fails, the rescue rolls back', 'block': [{'name': 'Fail', 'ansible.builtin.fail': {'msg': 'x'}}],
         'rescue': [{'name': 'Roll back', 'ansible.builtin.include_tasks': os.path.join(TASKS, 'rollback.yml')}]}]
    return [{'name': 'Rollback', 'hosts': 'vllm_hosts', 'gather_facts': False, 'become': True, 'tasks': tasks}]


def state(name, service):
    """(Description, ActiveState, UnitFileState, the main process's argv) of one unit; ('', 'inactive', '', '') once
    it is gone."""
    out = podman('exec', name, 'systemctl', 'show', '-p', 'Description', '-p', 'ActiveState', '-p', 'UnitFileState',
                 '-p', 'MainPID', service + '.service', check=False)
    fields = dict(line.split('=', 1) for line in out.splitlines() if '=' in line)
    argv = podman('exec', name, 'ps', '-o', 'args=', '-p', fields.get('MainPID', '0'), check=False).strip() \
        if fields.get('MainPID', '0') != '0' else ''
    if subprocess.run(['podman', 'exec', name, 'test', '-e', '/etc/systemd/system/%s.service' % service],
                      check=False).returncode != 0:
        return ('', fields.get('ActiveState', ''), '', argv)
    return (fields.get('Description', ''), fields.get('ActiveState', ''), fields.get('UnitFileState', ''), argv)


def previous(service):
    return ('previous ' + service, 'active', 'enabled', '/bin/sleep %d' % SECONDS['previous'])


@pytest.fixture(name='systemd_host')
def systemd_host_fixture():
    require_image()
    with systemd_host('fleet-rollback-test-%d' % os.getpid()) as name:
        yield name


def run(tmp_path, name, previous):
    inventory = {'all': {'children': {'vllm_hosts': {'hosts': {name: dict(
        P2P, lmcache_server_kv_coordinator=name)}}}}}
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(inventory))
    (tmp_path / 'play.yml').write_text(yaml.safe_dump(play(previous), width=1000))
    # backup.yml's script (files/fleet_backup.py) is found beside the play, as beside deploy.yml
    (tmp_path / 'files').symlink_to(os.path.join(REPO, 'playbooks', 'files'))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_tree(tmp_path / 'collections'),
               ANSIBLE_NOCOLOR='true', ANSIBLE_FORCE_COLOR='false', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'ansible-tmp'))
    proc = subprocess.run(['ansible-playbook', '-i', str(tmp_path / 'hosts.yml'), str(tmp_path / 'play.yml')],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    return proc.returncode, proc.stdout


@pytest.mark.real
def test_a_failed_rollout_puts_the_coordinator_that_ran_before_back(tmp_path, systemd_host):
    rc, out = run(tmp_path, systemd_host, [COORDINATOR, LMCACHE, VLLM])
    assert 'rolling back' in out and 'failed=0' in out.split('PLAY RECAP', 1)[1], out[-4000:]
    for service in (COORDINATOR, LMCACHE, VLLM):
        assert state(systemd_host, service) == previous(service), (service, out[-3000:])
    assert rc == 0


@pytest.mark.real
def test_a_failed_first_p2p_rollout_removes_the_coordinator_it_created(tmp_path, systemd_host):
    rc, out = run(tmp_path, systemd_host, [LMCACHE, VLLM])
    assert rc == 0 and 'rolling back' in out, out[-4000:]
    assert state(systemd_host, COORDINATOR) == ('', 'inactive', '', ''), out[-3000:]
    assert podman('exec', systemd_host, 'ls', '/etc/systemd/system/multi-user.target.wants').count(COORDINATOR) == 0
    for service in (LMCACHE, VLLM):
        assert state(systemd_host, service) == previous(service), (service, out[-3000:])
