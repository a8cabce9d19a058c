# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml and plan.yml refuse a host whose model does not fit the GPU budget it is given, naming the host
and what changes that, before any host is contacted: Qwen3.6-27B (about 50 GiB of bf16 weights) at tensor
parallel size 1 on an L4, an L40S and an A100-40GB, while the same model on an H200 is planned."""

from __future__ import annotations

import os

import yaml

from fleet_playbook_helpers import REPO_ROOT, assert_no_contact

H200_VARS = os.path.join(REPO_ROOT, 'tests', 'gpu', 'h200-27b-host-vars.yml')
MODEL_27B = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'models', 'qwen3.6-27b')
SMALL = {'gpu-l4': 'NVIDIA L4', 'gpu-l40s': 'NVIDIA L40S', 'gpu-a100-40': 'NVIDIA A100-SXM4-40GB'}


def inventory(runner):
    with open(H200_VARS) as handle:
        base = yaml.safe_load(handle)
    hosts = {'gpu-h200': dict(base, vllm_server_model=MODEL_27B)}
    for host, gpu in SMALL.items():
        hosts[host] = dict(base, vllm_server_model=MODEL_27B, vllm_server_gpu_architecture=gpu,
                           vllm_server_gpu_memory_utilization=0.9)
    return runner.write_inventory(hosts)


def test_validate_and_plan_refuse_a_model_that_does_not_fit(runner, tmp_path):
    path = inventory(runner)
    for playbook in ('validate.yml', 'plan.yml'):
        code, output = runner.run(playbook, path, '-e', 'fleet_plan_dir=%s' % (tmp_path / 'plan'))
        assert code != 0, output[-4000:]
        assert_no_contact(output)
        for host, gpu in SMALL.items():
            assert 'host %s: the model does not fit' % host in output, playbook
            assert 'GPU table (%s)' % gpu in output
        assert 'host gpu-h200: the model does not fit' not in output
        assert 'raise vllm_server_tensor_parallel_size or vllm_server_gpu_memory_utilization' in output
        assert not (tmp_path / 'plan').exists()
