#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_plan
short_description: Plan the whole fleet on the control node in one pass and write every host's files
version_added: "0.1.0"
description:
  - Runs on the control node only (an action plugin; run it once, with C(run_once)); no host is contacted.
  - For every host of O(hosts) it computes the host plan without N and checks it (the checks of
    C(lmcache_vllm.fleet.validate)), predicts N from the model's C(config.json) (C(vllm_server_model_config), else
    the model looked up locally as the P(lmcache_vllm.fleet.model_config#lookup) lookup does, with
    C(fleet_plan_model_paths)), and on CUDA whether the weights fit one GPU and the Mamba cache blocks M (the GPU's
    memory from the fact C(fleet_gpus) when set, else C(vllm_server_gpu_architecture) in the collection's GPU
    table), plans the host with the predicted N (else C(vllm_server_expected_block_size)) and M and checks it again.
  - The computation is the one of the lookup P(lmcache_vllm.fleet.host_plan#lookup) that C(validate.yml) and every
    stage of C(deploy.yml) use, so the files written are the ones the roles write for the same N and M.
  - Any problem of any host fails the task with every problem at once, before a file is written.
  - Otherwise it writes, under O(dest), C(<host>/<path on the host>) for every file the roles would write (rendered
    with the roles' own templates, secrets redacted), C(<host>/plan.json), and the fleet table C(fleet.md) and
    C(fleet.html), with the probe groups (hosts that would share one probe on deploy). A file is rewritten only
    when its content or mode differs.
  - Each model's C(config.json) is read once for the whole fleet; warnings are shown once each.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
extends_documentation_fragment:
  - lmcache_vllm.fleet.controller_action
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; the task reports whether any file would change.
options:
  hosts:
    description: The hosts to plan (the play's hosts, C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  dest:
    description: The plan's directory (an absolute path on the control node).
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Plan every host of the play and write the plan
  lmcache_vllm.fleet.fleet_plan:
    hosts: "{{ ansible_play_hosts }}"
    dest: "{{ fleet_plan_dir | default('fleet-plan', true) | realpath }}"
  run_once: true
  register: fleet_plan
"""

RETURN = r"""
rows:
  description: One row per host of the fleet table (host, model, TP, dtypes, N and its source, chunk size, ports...).
  returned: success
  type: list
  elements: dict
groups:
  description:
    - The probe groups of the plan (hosts with identical inputs of N and the same planned GPU kind and count), in
      order, each with its C(name) (V(G1), ...), the host that probes (C(canary)) and its C(members).
  returned: success
  type: list
  elements: dict
lines:
  description: The fleet table as text lines, the probe groups, then where the plan was written.
  returned: success
  type: list
  elements: str
warnings_shown:
  description: The plans' warnings, each once.
  returned: success
  type: list
  elements: str
"""

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.action_only import refuse


def main():
    refuse('lmcache_vllm.fleet.fleet_plan', dict(hosts=dict(type='list', elements='str', required=True),
                                                 dest=dict(type='path', required=True)))


if __name__ == '__main__':
    main()
