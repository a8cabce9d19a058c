# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/block_size/gpu_facts.py and the gpu_facts module.

This machine has no NVIDIA GPU: nvidia-smi is ``tests/doubles/nvidia-smi-double``, a TEST DOUBLE
that prints saved nvidia-smi output (tests/unit/fixtures/nvidia-smi/). Files named ``h200-*.txt``
there, when present, are captured on a real H200 host and parsed as they are.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size import gpu_facts as gf
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size import hardware as hw
from ansible_collections.lmcache_vllm.fleet.plugins.modules import gpu_facts as gpu_facts_module

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
DOUBLE = os.path.join(TESTS, 'doubles', 'nvidia-smi-double')
FIXTURES = os.path.join(TESTS, 'unit', 'fixtures', 'nvidia-smi')


def runner(fixture_set):
    """run_command(argv) through the double with the fixture set ``fixture_set``."""
    env = dict(os.environ, FLEET_FAKE_NVIDIA_SMI=fixture_set)
    calls = []

    def run(argv):
        calls.append(list(argv))
        proc = subprocess.run(list(argv), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    run.calls = calls
    return run


def test_inventory_of_two_h200():
    gpus = hw.gpu_inventory(runner('h200x2'), DOUBLE, hw.GPU_REPORT_FIELDS)
    assert [g['index'] for g in gpus] == [0, 1]
    first = gpus[0]
    assert first['name'] == 'NVIDIA H200'
    assert first['uuid'] == 'GPU-6a1c0e52-98d3-4f0b-a7c1-2b9e5d7f3a10'
    assert first['memory_total_mib'] == 143771 and first['memory_used_mib'] == 53658
    assert first['memory_free_mib'] == 89554 and first['utilization_pct'] == 37
    assert first['driver_version'] == '580.159.04' and first['compute_cap'] == '9.0'
    assert first['pci_bus_id'] == '00000000:19:00.0'


def test_facts_add_driver_and_cuda_version_from_the_header():
    facts = gf.gpu_facts(runner('h200x2'), DOUBLE)
    assert facts['driver_present'] is True
    assert facts['driver_version'] == '580.159.04' and facts['cuda_version'] == '13.0'
    assert facts['count'] == 2
    assert facts['reason'] == '2 NVIDIA GPU(s), driver 580.159.04, CUDA 13.0'


def test_an_old_driver_without_compute_cap_is_asked_again_without_it():
    run = runner('old-driver')
    facts = gf.gpu_facts(run, DOUBLE)
    assert len([c for c in run.calls if any(a.startswith('--query-gpu=') for a in c)]) == 3
    assert 'compute_cap' not in run.calls[2][1]
    assert facts['count'] == 2 and facts['cuda_version'] == '11.4'
    assert facts['gpus'][0]['compute_cap'] is None
    # [N/A] and [Not Supported] become null
    assert facts['gpus'][1]['memory_used_mib'] is None and facts['gpus'][1]['utilization_pct'] is None


def test_no_driver_is_a_result_not_an_error():
    facts = gf.gpu_facts(runner('no-driver'), DOUBLE)
    assert facts['driver_present'] is False and facts['count'] == 0
    assert "couldn't communicate with the NVIDIA driver" in facts['reason']
    assert facts['output'].startswith('NVIDIA-SMI has failed')
    absent = gf.gpu_facts(runner('h200x2'), None)
    assert absent['driver_present'] is False
    assert absent['reason'] == 'no NVIDIA driver: nvidia-smi is not installed on this host'


def test_nvidia_smi_that_cannot_run():
    def run(argv):
        raise OSError('Permission denied')
    facts = gf.gpu_facts(run, '/usr/bin/nvidia-smi')
    assert facts['driver_present'] is False and 'Permission denied' in facts['reason']


def test_parse_helpers():
    assert gf.parse_header('| NVIDIA-SMI 580.1  Driver Version: 580.159.04     CUDA Version: 13.0 |') == ('580.159.04', '13.0')
    assert gf.parse_header('Driver Version                            : 550.54.15\nCUDA Version : 12.4') == ('550.54.15', '12.4')
    assert gf.parse_header('') == (None, None)
    # the one reader of nvidia-smi reads any of the fields it asks; a name may hold commas
    assert hw.parse_gpu_inventory('0, a\n\n', ('index', 'name')) == [{'index': 0, 'name': 'a'}]
    assert hw.parse_gpu_inventory('0, a, b, 00:19.0\n', ('index', 'name', 'pci.bus_id')) == [
        {'index': 0, 'name': 'a, b', 'pci_bus_id': '00:19.0'}]
    with pytest.raises(ValueError, match='not the 3 fields'):
        hw.parse_gpu_inventory('0, a\n', ('index', 'name', 'pci.bus_id'))


def test_the_captures_of_a_real_h200_host():
    """h200-*.txt: nvidia-smi 580.159.04 on an H200 host, captured as they are (the basic query fields)."""
    run = runner('h200')
    facts = gf.gpu_facts(run, DOUBLE)
    assert facts['driver_present'] is True
    assert (facts['driver_version'], facts['cuda_version'], facts['count']) == ('580.159.04', '13.0', 1)
    (gpu,) = facts['gpus']
    assert gpu['index'] == 0 and gpu['name'] == 'NVIDIA H200' and gpu['uuid'].startswith('GPU-')
    assert (gpu['memory_total_mib'], gpu['memory_used_mib'], gpu['compute_cap']) == (143771, 0, '9.0')
    # asked again with the fields the capture has; the others are null
    assert gpu['memory_free_mib'] is None and gpu['utilization_pct'] is None
    with open(os.path.join(FIXTURES, 'h200-query-gpu.txt')) as handle:
        assert hw.parse_gpu_inventory(handle.read())[0]['uuid'] == gpu['uuid']
    assert gf.check_gpu_request('h200-host', facts, 'cuda', 1, ['0'], required_cuda_version='13.0')['errors'] == []
    assert gf.check_gpu_request('h200-host', facts, 'cuda', 2, [])['errors'] == [
        'host h200-host: vllm_server_tensor_parallel_size=2 but nvidia-smi sees 1 GPU(s) (0: NVIDIA H200); '
        'use at most 1']


# ---------------------------------------------------------------------------
# check_gpu_request
# ---------------------------------------------------------------------------

@pytest.fixture(name='h200x2')
def h200x2_fixture():
    return gf.gpu_facts(runner('h200x2'), DOUBLE)


def test_a_request_that_fits(h200x2):
    assert gf.check_gpu_request('gpu-01', h200x2, 'cuda', 2, ['0', '1']) == {'errors': [], 'warnings': []}
    assert gf.check_gpu_request('gpu-01', h200x2, 'cuda', 1, []) == {'errors': [], 'warnings': []}
    by_uuid = gf.check_gpu_request('gpu-01', h200x2, 'cuda', 1, ['GPU-0d4e7b21-5c6f-4a8e-b3d2-9f1a6c8e4b22'])
    assert by_uuid['errors'] == []


def test_tp_larger_than_the_gpus(h200x2):
    errors = gf.check_gpu_request('gpu-01', h200x2, 'cuda', 4, [])['errors']
    assert errors == ['host gpu-01: vllm_server_tensor_parallel_size=4 but nvidia-smi sees 2 GPU(s) '
                      '(0: NVIDIA H200, 1: NVIDIA H200); use at most 2']


def test_unknown_duplicate_and_miscounted_gpu_ids(h200x2):
    errors = gf.check_gpu_request('gpu-01', h200x2, 'cuda', 2, ['1', '5'])['errors']
    assert errors == ['host gpu-01: vllm_server_gpus names GPU 5, which nvidia-smi does not see '
                      '(GPUs: 0: NVIDIA H200, 1: NVIDIA H200); use ids among 0, 1 (or their UUIDs)']
    errors = gf.check_gpu_request('gpu-01', h200x2, 'cuda', 2, ['1', 'GPU-0d4e7b21-5c6f-4a8e-b3d2-9f1a6c8e4b22'])['errors']
    assert errors == ['host gpu-01: vllm_server_gpus names the same GPU more than once '
                      '(GPU-0d4e7b21-5c6f-4a8e-b3d2-9f1a6c8e4b22); list 2 different ids, e.g. ["0", "1"]']
    errors = gf.check_gpu_request('gpu-01', h200x2, 'cuda', 1, ['0', '1'])['errors']
    assert errors == ['host gpu-01: vllm_server_gpus lists 2 GPU(s) but vllm_server_tensor_parallel_size=1; '
                      'list exactly 1 ids, e.g. ["0"]']


def test_no_driver_on_a_cuda_host_and_nothing_on_a_cpu_host():
    facts = gf.gpu_facts(runner('no-driver'), DOUBLE)
    (error,) = gf.check_gpu_request('gpu-02', facts, 'cuda', 1, [])['errors']
    assert error.startswith('host gpu-02: vllm_server_device=cuda but no working NVIDIA driver')
    assert error.endswith('or set vllm_server_device=cpu')
    assert gf.check_gpu_request('cpu-01', facts, 'cpu', 4, ['7']) == {'errors': [], 'warnings': []}


def test_a_driver_without_gpus():
    facts = dict(gf.no_driver(''), driver_present=True)
    (error,) = gf.check_gpu_request('gpu-03', facts, 'cuda', 1, [])['errors']
    assert 'lists no GPU' in error


def test_gpus_of_different_kinds_and_a_driver_too_old():
    facts = gf.gpu_facts(runner('old-driver'), DOUBLE)
    check = gf.check_gpu_request('gpu-04', facts, 'cuda', 2, [], required_cuda_version='13.0')
    assert check['warnings'] == ['host gpu-04: the GPUs vLLM will use are of different kinds (NVIDIA A100-SXM4-40GB, '
                                 'NVIDIA A100-SXM4-80GB): tensor parallelism runs at the pace of the slowest; choose '
                                 'GPUs of one kind in vllm_server_gpus']
    assert check['errors'] == ['host gpu-04: the NVIDIA driver 470.256.02 supports CUDA up to 11.4, but this vLLM needs '
                               'CUDA 13.0; upgrade the driver, or pin a vllm_server_version built for CUDA 11.4']
    h200 = gf.gpu_facts(runner('h200x2'), DOUBLE)
    assert gf.check_gpu_request('gpu-01', h200, 'cuda', 1, [], required_cuda_version='13.0')['errors'] == []


def test_memory_summary(h200x2):
    assert gf.memory_summary(h200x2) == ['0 NVIDIA H200 52.4/140.4 GiB 37%', '1 NVIDIA H200 0.0/140.4 GiB 0%']
    assert gf.memory_summary(gf.no_driver('x')) == []


# ---------------------------------------------------------------------------
# the module
# ---------------------------------------------------------------------------

class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture(name='run_module')
def run_module_fixture(monkeypatch):
    def _exit_json(self, **kw):
        raise ExitJson(kw)

    def _fail_json(self, msg, **kw):
        kw['msg'] = msg
        raise FailJson(kw)

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', _fail_json)

    def run(fixture_set, **args):
        monkeypatch.setenv('FLEET_FAKE_NVIDIA_SMI', fixture_set)
        args.setdefault('nvidia_smi', DOUBLE)
        with patch_module_args(args):
            try:
                gpu_facts_module.main()
            except ExitJson as e:
                return 'ok', e.args[0]
            except FailJson as e:
                return 'failed', e.args[0]
        raise AssertionError('the module neither exited nor failed')
    return run


def test_module_sets_the_fact(run_module):
    status, result = run_module('h200x2')
    assert status == 'ok' and result['changed'] is False
    facts = result['ansible_facts']['fleet_gpus']
    assert facts['count'] == 2 and facts['cuda_version'] == '13.0'
    assert result['problems'] == [] and result['msg'] == facts['reason']


def test_module_fails_with_every_problem_at_once(run_module):
    status, result = run_module('h200x2', host='gpu-01', tensor_parallel_size=4, gpus=['0', '9'])
    assert status == 'failed'
    assert result['msg'].startswith('3 GPU problem(s): host gpu-01: vllm_server_tensor_parallel_size=4')
    assert len(result['problems']) == 3
    assert result['ansible_facts']['fleet_gpus']['count'] == 2
    status, result = run_module('h200x2', host='gpu-01', tensor_parallel_size=4, fail_on_problems=False)
    assert status == 'ok' and len(result['problems']) == 1


def test_module_on_a_host_without_a_driver(run_module):
    status, result = run_module('no-driver', fact_name='gpus_here')
    assert status == 'ok'
    facts = result['ansible_facts']['gpus_here']
    assert facts['driver_present'] is False
    # the explainer's words for the nvidia-smi message
    assert facts['reason'].startswith('no working NVIDIA driver: no NVIDIA driver answers on the host')
    status, result = run_module('h200x2', nvidia_smi='/nonexistent/nvidia-smi', device='cpu', tensor_parallel_size=1)
    assert status == 'ok' and result['problems'] == []
    assert result['ansible_facts']['fleet_gpus']['reason'] == 'no NVIDIA driver: nvidia-smi is not installed on this host'
    status, result = run_module('no-driver', host='gpu-09', tensor_parallel_size=1)
    assert status == 'failed' and 'vllm_server_device=cuda but no working NVIDIA driver' in result['msg']


def test_the_basic_query_is_asked_when_a_field_is_refused():
    """When the driver refuses a field of the report's query, the probe's query is asked and read strictly."""
    def run(argv):
        if argv[1] == '--query-gpu=' + ','.join(hw.GPU_REPORT_FIELDS):
            return 2, 'Field "memory.free" is not a valid field to query.\n', ''
        if argv[1] == '--query-gpu=' + ','.join(hw.GPU_QUERY_FIELDS):
            return 0, 'garbage\n', ''
        return 0, '', ''
    with pytest.raises(hw.GpuQueryError, match='cannot be read'):
        hw.gpu_inventory(run, 'nvidia-smi', hw.GPU_REPORT_FIELDS)
    facts = gf.gpu_facts(run, 'nvidia-smi')
    assert facts['driver_present'] is False and 'cannot be read' in facts['reason']
