# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role vllm_router on a real systemd host (a rootful podman container of the test-host image): check mode
on the fresh host changes nothing, the deploy installs vllm-router from a wheelhouse into its own venv and starts
the hardened unit as its own user, a request goes through the router to a worker, a worker whose /health fails
gets no request, and a second run changes nothing. The workers are test doubles of vLLM's OpenAI server
(``tests/doubles/openai_backend_double.py``) inside the container: the routing and the role are tested, no model.

Needs podman, the image localhost/lmcache-vllm-fleet-host:bookworm (scripts/setup-testhosts.sh) and a wheelhouse
of vllm-router and its dependencies (FLEET_ROUTER_WHEELHOUSE, default $FLEET_CACHE/router-wheelhouse:
``pip download vllm-router==0.1.17 -d DIR``); skips without them unless CI or FLEET_REQUIRE_REAL=1."""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import time

import pytest
import yaml

from fleet_collection import collections_tree
from fleet_real_probe_helpers import REPO, skip_or_fail
from fleet_systemd_host import IMAGE, podman, require_image, systemd_host

CACHE = os.environ.get('FLEET_CACHE', '/var/cache/lmcache-vllm-fleet')
WHEELHOUSE = os.environ.get('FLEET_ROUTER_WHEELHOUSE', os.path.join(CACHE, 'router-wheelhouse'))
PLAY = [{'name': 'Routers', 'hosts': 'routers', 'gather_facts': False, 'become': True,
         'roles': [{'role': 'lmcache_vllm.fleet.vllm_router'}]}]
REMOVE = [{'name': 'Remove the routers', 'hosts': 'routers', 'gather_facts': False, 'become': True,
           'tasks': [{'name': 'Remove', 'ansible.builtin.include_role': {'name': 'lmcache_vllm.fleet.vllm_router',
                                                                         'tasks_from': 'remove'}}]}]


def in_host(name, command, check=True):
    return podman('exec', name, 'sh', '-c', command, check=check)


def run_play(tmp_path, play, inventory, *extra, timeout=900):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_tree(tmp_path / 'collections'),
               ANSIBLE_NOCOLOR='true', ANSIBLE_FORCE_COLOR='false', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'ansible-tmp'))
    proc = subprocess.run([shutil.which('ansible-playbook') or 'ansible-playbook', '-i', inventory, play] + list(extra),
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


@pytest.fixture(name='router_host')
def router_host_fixture():
    require_image(IMAGE)
    if not os.path.isdir(WHEELHOUSE) or not any(f.startswith('vllm_router-') for f in os.listdir(WHEELHOUSE)):
        skip_or_fail('no vllm-router wheelhouse at %s (pip download vllm-router==0.1.17 -d %s)' % (WHEELHOUSE, WHEELHOUSE))
    with systemd_host('fleet-router-test-%d' % os.getpid(), '-v', '%s:/wheelhouse:ro' % WHEELHOUSE,
                      '-v', '%s:/srv/doubles:ro' % os.path.join(REPO, 'tests', 'doubles')) as name:
        for number in (1, 2):
            podman('exec', name, 'systemd-run', '--unit', 'double-w%d' % number, 'python3',
                   '/srv/doubles/openai_backend_double.py', '1810%d' % number, 'w%d' % number, '/tmp/w%d.log' % number)
        yield name


def write(tmp_path, name, group='doubles'):
    workers = dict(('w%d' % n, {'vllm_server_model': 'double-model', 'vllm_server_host': '0.0.0.0',
                                'vllm_server_port': 18100 + n, 'ansible_host': '127.0.0.1'}) for n in (1, 2))
    router = {'ansible_connection': 'containers.podman.podman', 'ansible_python_interpreter': '/usr/bin/python3',
              'vllm_router_wheelhouse': '/wheelhouse', 'vllm_router_policy': 'round_robin',
              'vllm_router_instances': [{'group': group, 'port': 30000, 'metrics_port': 29000}],
              'vllm_router_health_check_interval_secs': 1, 'vllm_router_health_failure_threshold': 1,
              'vllm_router_health_success_threshold': 1}
    inventory = {'all': {'children': {'routers': {'hosts': {name: router}}, 'doubles': {'hosts': workers},
                                      'doubles_next': {'hosts': dict((w, {}) for w in workers)}}}}
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(inventory))
    (tmp_path / 'play.yml').write_text(yaml.safe_dump(PLAY))
    (tmp_path / 'remove.yml').write_text(yaml.safe_dump(REMOVE))
    return str(tmp_path / 'hosts.yml'), str(tmp_path / 'play.yml')


def recap_changed(out, name):
    line = [l for l in out.splitlines() if l.startswith(name) and 'changed=' in l][-1]
    return int(line.split('changed=')[1].split()[0])


def answers(name, count):
    out = in_host(name, 'for i in $(seq %d); do curl -sf localhost:30000/v1/completions -H "Content-Type: '
                        'application/json" -d "{\\"model\\":\\"double-model\\",\\"prompt\\":\\"p$i\\"}"; echo; done'
                  % count)
    return [json.loads(line)['choices'][0]['text'] for line in out.splitlines() if line.strip()]


@pytest.mark.real
def test_role_deploys_a_hardened_router_that_routes_and_drops_a_failed_worker(tmp_path, router_host):
    inventory, play = write(tmp_path, router_host)
    rc, out = run_play(tmp_path, play, inventory, '--check')
    assert rc == 0 and recap_changed(out, router_host) > 0, out[-3000:]
    assert in_host(router_host, 'ls /opt /etc/systemd/system').count('vllm-router') == 0, 'check mode wrote'
    rc, out = run_play(tmp_path, play, inventory)
    assert rc == 0, out[-3000:]
    assert 'vllm-router-doubles on 127.0.0.1:30000 (round_robin) routes to w1, w2' in out
    assert sorted(set(answers(router_host, 4))) == ['w1', 'w2']
    assert in_host(router_host, 'ps -o user= -C vllm::router; ps -eo user=,comm= | grep router').split()[0] == \
        'vllm-router'
    unit = in_host(router_host, 'cat /etc/systemd/system/vllm-router-doubles.service')
    assert 'ProtectSystem=strict' in unit and 'MemoryDenyWriteExecute=true' in unit and '--api-key' not in unit
    in_host(router_host, 'touch /tmp/w1.log.down')  # w1's /health answers 503 from now on
    time.sleep(3)
    assert answers(router_host, 6) == ['w2'] * 6
    in_host(router_host, 'rm /tmp/w1.log.down')
    rc, out = run_play(tmp_path, play, inventory)
    assert rc == 0 and recap_changed(out, router_host) == 0, out[-3000:]
    # the entry's model group changes: the collection's router of the group that left stops and goes (per the
    # manifest) before the new one takes its port; a unit of that prefix the collection did not create stays
    in_host(router_host, 'printf "[Service]\\nExecStart=/bin/sleep infinity\\n" > /etc/systemd/system/vllm-router-other.service'
                         ' && systemctl daemon-reload && systemctl start vllm-router-other')
    inventory, play = write(tmp_path, router_host, group='doubles_next')
    rc, out = run_play(tmp_path, play, inventory)
    assert rc == 0 and 'removed the router(s) vllm-router-doubles (their model group left' in ' '.join(out.split()), \
        out[-3000:]
    units = in_host(router_host, 'ls /etc/systemd/system')
    assert 'vllm-router-doubles.service' not in units and 'vllm-router-doubles-next.service' in units, units
    assert in_host(router_host, 'systemctl is-active vllm-router-doubles-next vllm-router-other; '
                                'systemctl is-active vllm-router-doubles', check=False).split() == [
        'active', 'active', 'inactive']
    assert sorted(set(answers(router_host, 4))) == ['w1', 'w2']
    manifest = json.loads(in_host(router_host, 'cat /etc/lmcache-vllm-fleet/router-manifest.json'))
    assert [p for p in manifest['entries'] if p.endswith('.service')] == [
        '/etc/systemd/system/vllm-router-doubles-next.service'], manifest
    rc, out = run_play(tmp_path, play, inventory)
    assert rc == 0 and recap_changed(out, router_host) == 0, out[-3000:]
    in_host(router_host, 'mkdir -p /opt/vllm-router/keep-me')  # not the collection's: left and named
    rc, out = run_play(tmp_path, str(tmp_path / 'remove.yml'), inventory)
    assert rc == 0, out[-3000:]
    left = in_host(router_host, 'ls /opt/vllm-router /etc/systemd/system')
    assert 'keep-me' in left and 'vllm-router-0.1.17' not in left and 'vllm-router-doubles' not in left, left
    assert in_host(router_host, 'getent passwd vllm-router; getent group vllm-router; ls /var/lib').count(
        'vllm-router') == 0
    # the directory of the venvs stays (it holds what is not the collection's), and so does its entry
    manifest = json.loads(in_host(router_host, 'cat /etc/lmcache-vllm-fleet/router-manifest.json'))
    assert sorted(e['kind'] for e in manifest['entries'].values()) == ['venvs_dir'], manifest
    assert in_host(router_host, 'systemctl is-active double-w1').strip() == 'active'
