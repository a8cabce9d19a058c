# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preview is the deploy: the unit and environment files plan.yml writes are byte for byte the files
deploy.yml's roles write on the host for the same inputs (the probe's N given), --max-num-seqs included.

For the sandbox inventory, the example inventory and the H200 host variables of tests/gpu/: plan.yml writes
its preview; then tests/playbooks/deploy_configure.yml runs deploy.yml's own stage 1 (validate.yml), stage 3
(tasks/check_probed.yml) with each host's N given as the probe's result, and the roles' configure tasks of
stage 4, which template the files with the template module on the host. This machine stands in for each host
(a test double of the host's /etc, tests/playbooks/files/host-etc-python: every module runs in a private mount
namespace whose /etc is an overlay writing into the host's own directory), so the roles write to the
inventory's own paths and this machine's /etc does not change. Needs root (unshare, mount). The deploy run
skips only systemd-analyze verify (the template's validate step, which needs the virtualenvs of the install
stage and changes nothing in the file).

The environment files differ only where the preview redacts a secret (the whole value of such a variable): every
other line is the same byte for byte.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml

from fleet_playbook_helpers import EXAMPLE, REPO_ROOT, read

SANDBOX = os.path.join(REPO_ROOT, 'inventories', 'sandbox')
PLAYBOOK = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'deploy_configure.yml')
HOST_ETC_PYTHON = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'files', 'host-etc-python')
H200_VARS = os.path.join(REPO_ROOT, 'tests', 'gpu', 'h200-27b-host-vars.yml')
MODEL_27B = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3.6-27b')
SECRETS = {'FLEET_VLLM_API_KEY': 'plan-is-deploy-api-key', 'FLEET_KV_STORE_PASSWORD': 'plan-is-deploy-kv-password',
           'HF_TOKEN': 'hf_PlanIsDeployTokenValue0123456789'}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='the test double of /etc needs root (unshare, mount)')


def h200_inventory(runner, utilization):
    with open(H200_VARS) as handle:
        host_vars = yaml.safe_load(handle)
    host_vars.update(vllm_server_model=MODEL_27B, vllm_server_gpu_memory_utilization=utilization)
    return runner.write_inventory({'gpu-h200': host_vars}, name='h200-%s' % utilization)


def plan_and_deploy(runner, hf_env, tmp_path, inventory):
    """({host: plan.json}, plan directory, {host: the directory its deploy wrote /etc into})."""
    for name, value in SECRETS.items():
        hf_env.setenv(name, value)
    plan_dir = tmp_path / 'plan'
    code, output = runner.run('plan.yml', inventory, '-e', 'fleet_plan_dir=%s' % plan_dir, env=SECRETS)
    assert code == 0, output[-6000:]
    records = dict((host, json.loads(read(str(plan_dir / host / 'plan.json')))) for host in os.listdir(plan_dir)
                   if (plan_dir / host / 'plan.json').is_file())
    roots, python = {}, {}
    for host in records:
        upper = tmp_path / 'hosts' / host / 'etc'
        upper.mkdir(parents=True)
        (tmp_path / 'hosts' / host / 'etc.work').mkdir()
        roots[host] = upper
        python[host] = str(tmp_path / 'hosts' / host / 'python')
        with open(python[host], 'w') as handle:
            handle.write('#!/bin/sh\nexec %s %s "$@"\n' % (HOST_ETC_PYTHON, upper))
        os.chmod(python[host], 0o755)
    # systemd-analyze verify (the template's validate) needs the virtualenvs the install stage makes; it checks
    # the file and changes nothing in it
    given = {'test_probed_n': dict((host, record['block_size']) for host, record in records.items()),
             'test_probe_outcome': dict((host, 'found' if record['derived']['hybrid'] else 'not_hybrid')
                                        for host, record in records.items()),
             'test_host_python': python, 'vllm_server_unit_verify': False, 'lmcache_server_unit_verify': False}
    env = dict(SECRETS, HOST_ETC_PYTHON=sys.executable)
    code, output = runner.run(PLAYBOOK, inventory, '-e', json.dumps(given), env=env)
    assert code == 0, output[-6000:]
    return records, plan_dir, roots


def same_but_redacted(preview, deployed):
    """The preview's environment file is the deployed one where the preview shows no redaction; a redacted line
    names the same variable (the preview hides its whole value)."""
    preview_lines, deployed_lines = preview.split('\n'), deployed.split('\n')
    assert len(preview_lines) == len(deployed_lines)
    for shown, written in zip(preview_lines, deployed_lines):
        if '<redacted>' in shown and shown != written:
            name = shown.split('=', 1)[0]
            assert written.startswith(name + '=') and '<redacted>' not in written.split('=', 1)[1], (shown, written)
        else:
            assert shown == written


def assert_same_files(records, plan_dir, roots):
    compared = 0
    for host, record in records.items():
        for item in record['rendered']:
            assert item['dest'].startswith('/etc/'), item
            preview = read(str(plan_dir / host) + item['dest'])
            deployed = read(os.path.join(str(roots[host]), item['dest'][len('/etc/'):]))
            if item['template'].endswith('.env.j2') and preview != deployed:
                same_but_redacted(preview, deployed)
            else:
                assert preview == deployed, (host, item['dest'])
            mode = os.stat(os.path.join(str(roots[host]), item['dest'][len('/etc/'):])).st_mode & 0o777
            assert mode == int(item['mode'], 8), (host, item['dest'])
            compared += 1
    assert compared == 4 * len(records)


def test_sandbox_inventory(runner, hf_env, tmp_path):
    records, plan_dir, roots = plan_and_deploy(runner, hf_env, tmp_path, SANDBOX)
    assert len(records) >= 2
    assert_same_files(records, plan_dir, roots)


def test_example_inventory(runner, hf_env, tmp_path):
    records, plan_dir, roots = plan_and_deploy(runner, hf_env, tmp_path, EXAMPLE)
    assert sorted(records) == ['gpu-01', 'gpu-02', 'gpu-03']
    assert_same_files(records, plan_dir, roots)
    for host, record in records.items():
        # every CUDA host with a hybrid model shows M and where it came from
        assert record['derived']['mamba']['source'] in ('predicted', 'refusal', 'cached', 'group', 'unknown'), host


@pytest.mark.parametrize('utilization, reported', [(0.5, 368), (0.6, 604)])
def test_h200_27b(runner, hf_env, tmp_path, utilization, reported):
    """reported: the M vLLM 0.24.0 gave on the H200 (benchmarks/results/gpu-clamp-27b-*)."""
    records, plan_dir, roots = plan_and_deploy(runner, hf_env, tmp_path, h200_inventory(runner, utilization))
    assert_same_files(records, plan_dir, roots)
    record = records['gpu-h200']
    assert record['derived']['mamba']['source'] == 'predicted'
    unit = read(os.path.join(str(roots['gpu-h200']), 'systemd', 'system', 'vllm.service'))
    seqs = int(unit.split('--max-num-seqs ')[1].split()[0])
    assert seqs == record['derived']['max_num_seqs'] and 64 <= seqs <= reported
