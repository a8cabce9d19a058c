#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: probe_group
short_description: Form the probe groups of a deploy and take a group's N and M from its canary
version_added: "0.1.0"
description:
  - Runs on the control node only (an action plugin); no host is contacted.
  - With O(step=form) (run it once, with C(run_once)) it forms the probe groups of O(hosts) from each host's inputs
    of N, the fact C(__vllm_server_probe_inputs) that the module P(lmcache_vllm.fleet.block_size_probe#module) returns in
    check mode (nothing launched). Hosts whose inputs are identical, the hardware compared by kind, form a group; a
    host without inputs is a group of its own, and with O(per_group=false) every host is. The canary of a group is
    its first host that already has N (the fact C(vllm_block_size)), else its first host. Sets the fact
    C(__vllm_server_probe_groups) on every host.
  - With O(step=take) a host of a group that has no N of its own takes its canary's (C(vllm_block_size) and
    C(vllm_block_size_probe) with source C(group), the group, the canary and the host's own fingerprints), and the
    Mamba cache blocks M its canary reported when the inputs that change M are the canary's
    (C(vllm_mamba_blocks)). Reads the fact C(__vllm_server_probe_group), this host's group.
  - The role C(lmcache_vllm.fleet.vllm_server)'s C(probe) entry point uses it (deploy.yml's stage 2), and
    C(deploy.yml) again in stage 4 for M, which the canary's first start may just have reported.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
extends_documentation_fragment:
  - lmcache_vllm.fleet.controller_action
attributes:
  check_mode:
    support: full
    description: Computes the same facts in check mode; nothing is written.
options:
  step:
    description: V(form) forms the groups; V(take) takes this host's N and M from its canary.
    type: str
    choices: [form, take]
    required: true
  hosts:
    description: The hosts to group (the play's hosts, C(ansible_play_hosts)); with O(step=form).
    type: list
    elements: str
  per_group:
    description: V(false) makes every host a group of its own (C(fleet_probe_per_group=false)).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Form the probe groups
  lmcache_vllm.fleet.probe_group:
    step: form
    hosts: "{{ ansible_play_hosts }}"
  run_once: true

- name: Take the canary's N and M
  lmcache_vllm.fleet.probe_group:
    step: take
"""

RETURN = r"""
groups:
  description:
    - With O(step=form), the groups in order of first appearance, each C(name) (V(G1), ...), C(key), C(canary),
      C(members) (the canary first), C(inputs) and C(line) (one sentence for people).
  returned: step form
  type: list
  elements: dict
taken:
  description: With O(step=take), the names of the facts this host took from its canary (none when it keeps its own).
  returned: step take
  type: list
  elements: str
"""

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.action_only import refuse

ARGUMENT_SPEC = dict(
    step=dict(type='str', choices=['form', 'take'], required=True),
    hosts=dict(type='list', elements='str'),
    per_group=dict(type='bool', default=True),
)


def main():
    refuse('lmcache_vllm.fleet.probe_group', ARGUMENT_SPEC)


if __name__ == '__main__':
    main()
