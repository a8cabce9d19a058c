# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver and CUDA failures of plugins/module_utils/block_size/journal_diagnose.py."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose

HOST = 'gpu-07'

# Lines as nvidia-smi, torch and the CUDA runtime print them in a unit's journal.
CASES = [
    ('nvidia_driver_unreachable',
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.",
     ['vllm_server_device=cpu', 'install or load the NVIDIA driver']),
    ('nvidia_driver_unreachable',
     '/opt/vllm/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:174: UserWarning: CUDA initialization: '
     'Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from '
     'http://www.nvidia.com/Download/index.aspx',
     ['Found no NVIDIA driver on your system']),
    ('nvidia_driver_unreachable',
     'OSError: libcuda.so.1: cannot open shared object file: No such file or directory',
     ['libcuda.so.1']),
    ('nvml_mismatch',
     'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.159',
     ['reboot the host']),
    ('cuda_driver_too_old',
     'RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n'
     'CUDA kernel errors might be asynchronously reported at some other API call',
     ['vllm_server_version', 'driver 580 or newer']),
    ('cuda_driver_too_old',
     'RuntimeError: The NVIDIA driver on your system is too old (found version 12040). Please update your GPU driver '
     'by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx',
     ['The NVIDIA driver on your system is too old']),
    ('cuda_driver_too_old',
     'torch.AcceleratorError: CUDA error: cudaErrorInsufficientDriver', ['cudaErrorInsufficientDriver']),
    ('no_cuda_device',
     'RuntimeError: CUDA error: no CUDA-capable device is detected\n'
     'Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.',
     ['vllm_server_gpus', 'nvidia-smi -L']),
    ('no_cuda_device',
     '(EngineCore pid=412) ERROR 12-01 08:01:02 [core.py:866] RuntimeError: cudaErrorNoDevice', ['cudaErrorNoDevice']),
    ('no_cuda_device', 'RuntimeError: No CUDA GPUs are available', ['No CUDA GPUs are available']),
    ('invalid_device_ordinal',
     'torch.AcceleratorError: CUDA error: invalid device ordinal\nGPU device may be out of range, do you have enough GPUs?',
     ['vllm_server_tensor_parallel_size', 'vllm_server_gpus']),
    ('cuda_device_busy',
     'RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable', ['nvidia-smi -c DEFAULT']),
    ('no_kernel_image',
     'RuntimeError: CUDA error: no kernel image is available for execution on the device', ['compute_cap']),
]


@pytest.mark.parametrize('cause, text, words', CASES, ids=['%s-%d' % (c[0], i) for i, c in enumerate(CASES)])
def test_driver_and_cuda_failures_are_explained(cause, text, words):
    findings = diagnose(text, service='vllm', host=HOST, device='cuda', model='Qwen/Qwen3.6-27B')
    assert findings[0]['cause'] == cause, findings
    message = findings[0]['message']
    assert message.startswith('host %s: ' % HOST)
    for word in words:
        assert word in message, message
    assert findings[0]['evidence'] and findings[0]['evidence'] in text


def test_the_lmcache_unit_gets_the_same_explanations():
    findings = diagnose('RuntimeError: CUDA error: no CUDA-capable device is detected', service='lmcache', host=HOST)
    assert [f['cause'] for f in findings] == ['no_cuda_device']


def test_cuda_out_of_memory_with_the_numbers_torch_gives():
    text = ('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of '
            '139.81 GiB of which 1.23 GiB is free. Process 18842 has 98.00 GiB memory in use. Of the allocated memory '
            '36.1 GiB is allocated by PyTorch')
    (finding,) = diagnose(text, service='vllm', host=HOST)
    assert finding['cause'] == 'out_of_memory'
    assert 'GPU 0 ran out of memory' in finding['what']
    assert '2.00 GiB more with 1.23 GiB free of 139.81 GiB' in finding['what']
    assert 'vllm_server_gpu_memory_utilization' in finding['fix']


def test_cuda_out_of_memory_without_the_numbers_keeps_the_short_explanation():
    (finding,) = diagnose('RuntimeError: CUDA out of memory', service='vllm', host=HOST)
    assert finding['cause'] == 'out_of_memory'
    assert finding['what'] == 'the accelerator ran out of memory while starting'


def test_a_missing_driver_and_its_consequence_are_both_reported_driver_first():
    text = ('UserWarning: CUDA initialization: Found no NVIDIA driver on your system.\n'
            'RuntimeError: No CUDA GPUs are available\n')
    causes = [f['cause'] for f in diagnose(text, service='vllm', host=HOST)]
    assert causes == ['nvidia_driver_unreachable', 'no_cuda_device']
