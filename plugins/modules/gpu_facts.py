#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read the host's NVIDIA GPUs with nvidia-smi and check a vLLM GPU request against them
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits) and the plain C(nvidia-smi) (for the
    CUDA version the driver supports) and sets the fact C(fleet_gpus) - the GPUs (index, name, UUID,
    memory, utilization, compute capability, PCI bus id), their count, the driver and the CUDA version.
  - A host without an NVIDIA driver (no C(nvidia-smi), or C(nvidia-smi) that cannot reach the driver) is a
    result, not a failure - C(fleet_gpus.driver_present) is V(false) and C(fleet_gpus.reason) says why in
    plain words (with the journal explainer's words for a driver that is installed but not loaded).
  - With O(tensor_parallel_size) or O(gpus) the module also checks the request of C(vllm_server_tensor_parallel_size)
    and C(vllm_server_gpus) against what C(nvidia-smi) sees, and fails with every problem at once, each naming
    the host, the variable and a valid value. On a host with O(device=cpu) nothing is checked.
  - Read-only; runs the same in check mode.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
extends_documentation_fragment:
  - lmcache_vllm.fleet.read_only
attributes:
  facts:
    support: full
    description: Sets C(fleet_gpus) (or the name given in O(fact_name)).
options:
  nvidia_smi:
    description:
      - The nvidia-smi to run, a path or a name searched on the host's E(PATH) (and C(/usr/bin)).
      - The tests point it at C(tests/doubles/nvidia-smi-double), a test double that prints saved H200 output.
    type: str
    default: nvidia-smi
  device:
    description:
      - The host's C(vllm_server_device). Only V(cuda) hosts are checked against the GPUs; on V(cpu) hosts the
        facts are read and nothing is required.
    type: str
    default: cuda
  tensor_parallel_size:
    description:
      - The C(vllm_server_tensor_parallel_size) to check (at most the number of GPUs, and the length of O(gpus)
        when that is set). Not checked when neither this nor O(gpus) is given.
    type: int
  gpus:
    description:
      - The C(vllm_server_gpus) to check - GPU indexes or UUIDs that C(nvidia-smi) must see, each once.
    type: list
    elements: str
  required_cuda_version:
    description:
      - The CUDA version the installed vLLM wheels need (e.g. V(13.0)); the driver's C(CUDA Version) must be at least
        this. Not checked when unset.
    type: str
  host:
    description:
      - The name of the host in messages (pass C(inventory_hostname)); defaults to the host's own name.
    type: str
  fail_on_problems:
    description:
      - Fail when the request does not fit the GPUs. With V(false) the problems are only returned.
    type: bool
    default: true
  fact_name:
    description: Name of the fact that is set.
    type: str
    default: fleet_gpus
notes:
  - A driver that does not know one of the fields asked for (C(compute_cap) needs a driver from 2021 or later)
    makes nvidia-smi refuse the whole query; the module asks again with fewer fields, and the values it could not
    read are null.
seealso:
  - module: lmcache_vllm.fleet.service_info
"""

EXAMPLES = r"""
---
- name: Read the GPUs
  lmcache_vllm.fleet.gpu_facts:

- name: Show them
  ansible.builtin.debug:
    msg: "{{ ansible_facts.fleet_gpus.count }} GPU(s): {{ ansible_facts.fleet_gpus.reason }}"

- name: Check the host's TP size and GPU ids against what nvidia-smi sees
  lmcache_vllm.fleet.gpu_facts:
    host: "{{ inventory_hostname }}"
    device: "{{ vllm_server_device | default('cuda') }}"
    tensor_parallel_size: "{{ vllm_server_tensor_parallel_size | default(1) }}"
    gpus: "{{ vllm_server_gpus | default([]) | map('string') | list }}"
    required_cuda_version: "13.0"
"""

RETURN = r"""
problems:
  description: What does not fit (host, variable, a valid value); empty when all fits or nothing was checked.
  returned: always
  type: list
  elements: str
  sample:
    - "host gpu-01: vllm_server_tensor_parallel_size=4 but nvidia-smi sees 2 GPU(s) (0: NVIDIA H200, 1: NVIDIA H200); use at most 2"
warnings_found:
  description: Things that work but are worth a look (GPUs of different kinds in one tensor-parallel group).
  returned: always
  type: list
  elements: str
ansible_facts:
  description: Facts set by the module.
  returned: always
  type: dict
  contains:
    fleet_gpus:
      description: What nvidia-smi says (the fact's name follows O(fact_name)).
      type: dict
      contains:
        driver_present:
          description: Whether an NVIDIA driver answered.
          type: bool
        driver_version:
          description: The driver version, e.g. V(580.159.04).
          type: str
        cuda_version:
          description: The highest CUDA version the driver supports, e.g. V(13.0) (from the nvidia-smi header).
          type: str
        count:
          description: The number of GPUs.
          type: int
        gpus:
          description: One entry per GPU.
          type: list
          elements: dict
          contains:
            index:
              description: The GPU's index (what C(CUDA_VISIBLE_DEVICES) names).
              type: int
            name:
              description: The product name, e.g. V(NVIDIA H200).
              type: str
            uuid:
              description: The GPU's UUID.
              type: str
            memory_total_mib:
              description: Memory in MiB.
              type: int
            memory_used_mib:
              description: Memory in use, MiB.
              type: int
            memory_free_mib:
              description: Free memory, MiB.
              type: int
            utilization_pct:
              description: GPU utilization in percent.
              type: int
            driver_version:
              description: The driver version.
              type: str
            compute_cap:
              description: The compute capability, e.g. V(9.0); null with drivers that cannot report it.
              type: str
            pci_bus_id:
              description: The PCI bus id.
              type: str
        nvidia_smi:
          description: The nvidia-smi that was run, null when none was found.
          type: str
        reason:
          description: One line in plain words (the GPUs found, or why there is no driver).
          type: str
        output:
          description: What a failing nvidia-smi printed (empty otherwise).
          type: str
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.gpu_facts import check_gpu_request, gpu_facts
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose


def explain_no_driver(facts):
    """Replace the raw nvidia-smi message by the explainer's words when it knows the failure."""
    if facts.get('driver_present') or not facts.get('output'):
        return facts
    known = [f for f in diagnose(facts['output'], service='vllm') if f['cause'] != 'unknown']
    if known:
        facts = dict(facts, reason='no working NVIDIA driver: %s' % known[0]['what'])
    return facts


def find_nvidia_smi(module, name):
    if os.path.sep in name:
        return name if os.access(name, os.X_OK) else None
    return module.get_bin_path(name, opt_dirs=['/usr/bin', '/usr/local/nvidia/bin'])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type='str', default='nvidia-smi'),
            device=dict(type='str', default='cuda'),
            tensor_parallel_size=dict(type='int'),
            gpus=dict(type='list', elements='str'),
            required_cuda_version=dict(type='str'),
            host=dict(type='str'),
            fail_on_problems=dict(type='bool', default=True),
            fact_name=dict(type='str', default='fleet_gpus'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    binary = find_nvidia_smi(module, p['nvidia_smi'])

    def run(argv):
        return module.run_command(argv, handle_exceptions=False)

    facts = explain_no_driver(gpu_facts(run, binary))
    result = dict(changed=False, problems=[], warnings_found=[], ansible_facts={p['fact_name']: facts})
    if p['tensor_parallel_size'] is not None or p['gpus']:
        check = check_gpu_request(p['host'] or socket.gethostname(), facts, device=p['device'],
                                  tensor_parallel_size=p['tensor_parallel_size'] or len(p['gpus'] or []) or 1,
                                  gpus=p['gpus'], required_cuda_version=p['required_cuda_version'])
        result.update(problems=check['errors'], warnings_found=check['warnings'])
        for warning in check['warnings']:
            module.warn(warning)
        if check['errors'] and p['fail_on_problems']:
            module.fail_json(msg='%d GPU problem(s): %s' % (len(check['errors']), ' | '.join(check['errors'])), **result)
    module.exit_json(msg=facts['reason'], **result)


if __name__ == '__main__':
    main()
