# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml --check --diff previews a first deploy of a new host without failing and without changing it.

The host is this machine (local connection, no become), every path of the roles below a temporary directory, with
no vLLM installed: the preview reads the package versions without the virtualenv check mode would create, probes
nothing, plans with the N predicted from the model's config.json, shows the unit files it would write and starts
nothing. The molecule default scenario runs the same preview on a real systemd host before its first deploy.

The same run counts the host plans (the lookup host_plan says at -vvv whether it planned the host or reused the
plan of the stage): one plan per host per stage that plans (validate, then the check with N), and the roles of
stages 2 and 4 read those plans instead of planning again.
"""

from __future__ import annotations

import collections
import json
import os
import re

from fleet_playbook_helpers import REPO_ROOT
from test_day2 import local_host, write_inventory

MODEL = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen35-tiny')
VALIDATE_PLAY = 'Validate the variables of every serving, KV store and router host (deploy.yml, stage 1b, then reaches and claims them)'
STAGES_2_3 = 'Stage 2, install LMCache and vLLM and probe N on every host in parallel, then stage 3, check them all'
PLAN_LINE = re.compile(r'^host_plan: (\S+) (planned|reuses the plan of this stage)$')


def plans_per_play(output):
    """{(play, host, 'planned' or 'reuses ...'): count} from the lookup host_plan's -vvv lines."""
    counts, play = collections.Counter(), None
    for line in output.splitlines():
        if line.startswith('PLAY ['):
            play = line[len('PLAY ['):line.index(']')]
        match = PLAN_LINE.match(line.strip())
        if match:
            counts[(play, match.group(1), match.group(2).split()[0])] += 1
    return counts


def test_check_mode_previews_a_first_deploy(runner, tmp_path):
    root = tmp_path / 'host'
    root.mkdir()
    host = local_host(root, vllm_server_model=MODEL, vllm_server_hybrid=True, vllm_server_served_model_name='tiny', vllm_server_kv_connector=False,
                      vllm_server_os_packages=[], lmcache_server_os_packages=[])
    inventory = write_inventory(tmp_path, {'localhost': host})

    code, output = runner.run('deploy.yml', inventory, '-e', 'ansible_become=false', '--check', '--diff', '-vvv')

    assert code == 0, output[-6000:]
    assert ('check mode: N was not probed on localhost (vLLM is not installed yet, or nothing is launched in check '
            'mode); the preview uses the predicted N=640') in output
    assert '+Description=vLLM OpenAI-compatible server (%s, N=640)' % MODEL in output
    assert 'Follow it on localhost with: journalctl -u fleet-test-vllm -f' in output
    assert list(root.iterdir()) == [], 'check mode created %s' % sorted(str(p) for p in root.rglob('*'))

    counts = plans_per_play(output)
    planned = dict((play, n) for (play, host, what), n in counts.items() if what == 'planned')
    assert planned == {VALIDATE_PLAY: 1, STAGES_2_3: 1}, counts
    reused = set(play.split(',')[0] for (play, host, what) in counts if what == 'reuses')
    assert reused == {'Stage 2', 'Stage 4'}, counts


def test_check_mode_with_a_router_in_front_of_the_host_drains_nothing_and_fails_nothing(runner, tmp_path):
    """The same first deploy with a router on the serving host (its vLLM listens on loopback): stage 1b claims on
    the router host, stage 4 takes nothing out (vLLM does not run yet, and check mode changes no router), stage 6
    previews the router; nothing is created on either."""
    root, router_root = tmp_path / 'host', tmp_path / 'router'
    root.mkdir()
    router_root.mkdir()
    host = local_host(root, vllm_server_model=MODEL, vllm_server_hybrid=True, vllm_server_served_model_name='tiny',
                      vllm_server_kv_connector=False, vllm_server_os_packages=[], lmcache_server_os_packages=[],
                      vllm_server_host='127.0.0.1')
    router = {'vllm_router_instances': [{'group': 'tiny_hosts', 'port': 30000, 'metrics_port': 29000}],
              'vllm_router_venvs_dir': str(router_root / 'opt'), 'vllm_router_home': str(router_root / 'home'),
              'vllm_router_manifest_path': str(router_root / 'manifest' / 'router-manifest.json'),
              'vllm_router_user': 'fleet-test-no-such-router', 'vllm_router_group': 'fleet-test-no-such-router',
              'vllm_router_service_prefix': 'fleet-test-router'}
    inventory = {'all': {'children': {'vllm_hosts': {'children': {'tiny_hosts': {'hosts': {'localhost': host}}}},
                                      'routers': {'hosts': {'localhost': router}}}}}
    path = tmp_path / 'hosts.json'
    path.write_text(json.dumps(inventory))

    code, output = runner.run('deploy.yml', str(path), '-e', 'ansible_become=false', '--check')

    assert code == 0, output[-6000:]
    assert re.search(r'TASK \[Take the host out of its routers before LMCache or vLLM restarts\] \**\nskipping: '
                     r'\[localhost\]', output), output[-6000:]
    assert 'PLAY [%s]' % VALIDATE_PLAY in output and 'TASK [Reach the host]' in output
    assert 'PLAY [Stage 5, per-host summary, then stage 6, the routers' in output
    assert re.search(r'TASK \[lmcache_vllm.fleet.vllm_router : Refuse what is not the collection\'s, claim what the '
                     r'role creates\] \**\n(ok|changed): \[localhost\]', output), output[-6000:]
    assert 'fleet-test-router-tiny-hosts' in output
    assert list(root.iterdir()) == [] and list(router_root.iterdir()) == [], sorted(
        str(p) for p in tmp_path.rglob('*') if 'host' in p.parts or 'router' in p.parts)


def test_a_host_that_fails_before_its_services_change_is_explained_in_plain_words(runner, tmp_path):
    """Stage 2's rescue (filter stage_findings): a CUDA host asks for more GPUs than nvidia-smi shows. nvidia-smi is
    tests/doubles/nvidia-smi-double (a TEST DOUBLE printing saved output of a host with 2 H200), since this machine has
    no GPU."""
    root = tmp_path / 'host'
    root.mkdir()
    host = local_host(root, vllm_server_model=MODEL, vllm_server_hybrid=True, vllm_server_served_model_name='tiny',
                      vllm_server_os_packages=[], lmcache_server_os_packages=[], vllm_server_device='cuda', vllm_server_tensor_parallel_size=4,
                      fleet_nvidia_smi=os.path.join(REPO_ROOT, 'tests', 'doubles', 'nvidia-smi-double'))
    inventory = write_inventory(tmp_path, {'localhost': host})

    code, output = runner.run('deploy.yml', inventory, '-e', 'ansible_become=false', '--check',
                              env={'FLEET_FAKE_NVIDIA_SMI': 'h200x2'})

    assert code != 0, output[-6000:]
    failed = re.search(r'localhost failed during gpus, its services were not changed: (.*)', output)
    assert failed, output[-6000:]
    assert 'vllm_server_tensor_parallel_size' in failed.group(1) and 'host localhost' in failed.group(1)
    assert list(root.iterdir()) == []
