#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_check
short_description: Check the fleet on the control node - its hosts, the rollout's variables and every host's plan
version_added: "0.1.0"
description:
  - An action plugin, run once for the play (C(run_once)); nothing is contacted. validate.yml, plan.yml and
    deploy.yml's stage 3 check the fleet with it.
  - With O(fleet_members), the inventory must name a fleet - at least one host in O(fleet_pattern) - and no host
    outside it may set C(vllm_server_model).
  - With O(rollout), deploy.yml's rollout variables C(fleet_serial), C(fleet_max_fail_percentage),
    C(fleet_probe_per_group) and C(fleet_warm_first_start) must be valid (extra variables, else the environment's
    C(FLEET_SERIAL) and C(FLEET_MAX_FAIL_PERCENTAGE), else their defaults).
  - With O(kinds), the plans the play made of each kind of host - serving (C(__fleet_plan), with two inventory
    hosts that reach one machine and the hosts of an L2 pool that disagree on its key prefix), KV store
    (C(__kv_store_check)), router (C(__vllm_router_check)) - are checked in that order; the first kind with a
    problem fails the task with every problem of that kind at once, each naming host, variable and fix. The
    serving plans' warnings are shown once each.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: Nothing changes in either mode.
  diff_mode:
    support: none
    description: Nothing changes.
  action:
    support: full
    description: An action plugin; it runs on the control node only.
  platform:
    support: full
    platforms: posix
    description: The control node.
options:
  fleet_pattern:
    description: The fleet's host pattern (C(fleet_hosts), default C(vllm_hosts)), for the messages.
    type: str
    default: vllm_hosts
  fleet_members:
    description:
      - The hosts O(fleet_pattern) matches (C(query('ansible.builtin.inventory_hostnames', pattern))); not given,
        the inventory is not checked.
    type: list
    elements: str
  rollout:
    description: Check deploy.yml's rollout variables.
    type: bool
    default: false
  kinds:
    description:
      - The hosts of each kind whose plans are checked, keys C(serving), C(store) and C(router); not given, no plan
        is checked.
    type: dict
  what:
    description: What the serving plans were checked with, for the refusal (V(in the inventory), V(with the probed N)).
    type: str
    default: in the inventory
  spared:
    description: What a refusal spared, for its message.
    type: str
    default: nothing was changed
"""

EXAMPLES = r"""
- name: Check the inventory and the rollout's variables
  lmcache_vllm.fleet.fleet_check:
    fleet_pattern: "{{ fleet_hosts | default('vllm_hosts') }}"
    fleet_members: "{{ query('ansible.builtin.inventory_hostnames', fleet_hosts | default('vllm_hosts')) }}"
    rollout: true

- name: Check every host's plan (all problems at once)
  lmcache_vllm.fleet.fleet_check:
    kinds: "{{ __fleet_valid_kinds }}"
  run_once: true
  register: fleet_checked
"""

RETURN = r"""
warnings_found:
  description: The serving plans' warnings, each once (also shown as warnings).
  returned: always
  type: list
  elements: str
summary:
  description: The sentence of a fleet that passed (hosts, groups, L2 pools and KV stores checked).
  returned: when O(kinds) is given and nothing failed
  type: str
"""

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.action_only import refuse

ARGUMENT_SPEC = dict(
    fleet_pattern=dict(type='str', default='vllm_hosts'),
    fleet_members=dict(type='list', elements='str'),
    rollout=dict(type='bool', default=False),
    kinds=dict(type='dict'),
    what=dict(type='str', default='in the inventory'),
    spared=dict(type='str', default='nothing was changed'),
)


def main():
    refuse('lmcache_vllm.fleet.fleet_check', ARGUMENT_SPEC)


if __name__ == '__main__':
    main()
