# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The day-two playbooks (status, remove, gpus, monitoring) refuse a fleet whose host plans have errors,
every host's problems at once, before any host is contacted; validation survives a variable that
cannot be templated on one host; one machine listed under two inventory names is refused naming both;
gpus.yml reads the GPU list from the plan.

The hosts point at an ssh that does not exist (a run that contacted one would show it), except the
gpus.yml case that reads this machine's GPUs through tests/doubles/nvidia-smi-double, a TEST DOUBLE
printing saved H200 output (this machine has no GPU).
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from fleet_playbook_helpers import NO_CONTACT, assert_no_contact

DOUBLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'doubles', 'nvidia-smi-double')
GOOD = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_expected_block_size': 544}


def write_inventory(tmp_path, hosts):
    path = tmp_path / 'hosts.json'
    path.write_text(json.dumps({'all': {'children': {'vllm_hosts': {'hosts': hosts}}}}))
    return str(path)


def host(address, **host_vars):
    merged = dict(NO_CONTACT, ansible_host=address)
    merged.update(GOOD)
    merged.update(host_vars)
    return merged


def assert_refused(code, output, count):
    assert code != 0, output[-4000:]
    assert_no_contact(output)
    assert '%d problem(s) in the inventory, nothing was changed' % count in output, output[-4000:]


@pytest.mark.parametrize('playbook', ['status.yml', 'remove.yml', 'gpus.yml', 'monitoring.yml'])
def test_day2_playbooks_refuse_hosts_whose_plan_has_errors(runner, tmp_path, playbook):
    inventory = write_inventory(tmp_path, {
        'good-01': host('192.0.2.11'),
        'bad-01': host('192.0.2.12', vllm_server_port=0),
        'bad-02': host('192.0.2.13', vllm_server_mamba_cache_mode='all'),
    })
    code, output = runner.run(playbook, inventory, '-e', 'fleet_monitoring_file=%s' % (tmp_path / 'targets.json'))
    assert_refused(code, output, 2)
    assert 'host bad-01: vllm_server_port=0 is not a TCP port; use an integer in 1..65535' in output
    assert 'host bad-02: vllm_server_mamba_cache_mode=all is not supported' in output
    assert 'host good-01:' not in output
    # monitoring writes no target (no ":0" target) and remove/status reach no host
    assert not (tmp_path / 'targets.json').exists()


@pytest.mark.parametrize('variable', ['vllm_server_port', 'vllm_server_model'])
def test_validation_survives_a_template_error_on_one_host(runner, tmp_path, variable):
    inventory = write_inventory(tmp_path, {
        'tmpl-01': host('192.0.2.11', **{variable: '{{ fleet_value_that_nobody_defined }}'}),
        'bad-02': host('192.0.2.12', lmcache_server_l1_size_gb=-1),
    })
    code, output = runner.run('validate.yml', inventory)
    assert code != 0, output[-4000:]
    assert_no_contact(output)
    assert 'nothing was changed' in output, output[-4000:]
    assert ('host tmpl-01: %s cannot be templated: ' % variable in output
            and 'fleet_value_that_nobody_defined' in output
            and 'define what it refers to for this host, or fix the expression' in output), output[-4000:]
    assert 'host bad-02: lmcache_server_l1_size_gb=-1 is not a finite number > 0' in output


@pytest.mark.parametrize('second, refused', [
    ({'ansible_host': '10.0.0.7'}, True),
    ({'ansible_host': '10.0.0.7', 'ansible_port': 22}, True),
    ({'ansible_host': '10.0.0.7', 'ansible_port': 2222}, False),
    ({'ansible_host': '10.0.0.8'}, False),
])
def test_one_machine_under_two_inventory_names(runner, tmp_path, second, refused):
    inventory = write_inventory(tmp_path, {
        'gpu-01': host('10.0.0.7'),
        'gpu-01-again': dict(host('unused'), **second),
    })
    code, output = runner.run('validate.yml', inventory)
    assert_no_contact(output)
    message = ('hosts gpu-01 and gpu-01-again reach one machine, ansible_host=10.0.0.7 port 22: it would be '
               'deployed, probed and removed once per name; remove all but one of them from the inventory, '
               'or set each one\'s own ansible_host')
    if refused:
        assert_refused(code, output, 1)
        assert message in output, output[-4000:]
    else:
        assert code == 0, output[-4000:]
        assert 'reach one machine' not in output


def test_gpus_reads_a_comma_string_as_the_plans_gpu_list(runner, tmp_path, monkeypatch):
    monkeypatch.setenv('FLEET_FAKE_NVIDIA_SMI', 'h200x2')
    inventory = write_inventory(tmp_path, {'localhost': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, 'fleet_nvidia_smi': DOUBLE,
        'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_tensor_parallel_size': 2, 'vllm_server_gpus': '0,1'}})
    code, output = runner.run('gpus.yml', inventory)
    assert code == 0, output[-4000:]
    assert 'GPU problem(s)' not in output
    assert 'localhost: 2 NVIDIA GPU(s)' in output, output[-4000:]
