#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_claim
short_description: Refuse what the collection did not create on a host and claim what the deploy creates there
version_added: "0.1.0"
description:
  - An action plugin - deploy.yml's stage 1b in one task, for every kind of host at once. On a serving host, a KV
    store host and a router host (a host may be several), it runs P(lmcache_vllm.fleet.fleet_ownership#module) with
    O(lmcache_vllm.fleet.fleet_ownership#module:state=claim) on the entries of that kind's plan and in that kind's
    manifest - the host plan's C(ownership) (C(__fleet_plan), the rollback copies' names too), the KV store
    plan's (C(__kv_store_check)) and the router plan's (C(__vllm_router_check)), the plans validate.yml made.
  - A unit, file, directory, home or link the collection did not create fails the task before anything changes,
    every refusal of the host at once, each naming host, variable and fix.
  - Sets the facts C(__fleet_claimed) (a serving host) and C(__vllm_router_claimed) (a router host) that the later
    stages require before they change the host.
  - With O(require) instead of O(kinds), nothing is claimed and nothing is contacted - the guard of a later stage
    (deploy.yml's stages 2 and 4 for a serving host, stage 6 for a router host) fails the host whose claim of that
    kind did not run in this run (a tag selection that skipped stage 1b), naming host and fix.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: In check mode the manifests are not written; the refusals are the same.
  diff_mode:
    support: none
    description: No diff; RV(claims) says what each manifest records.
  action:
    support: full
    description: An action plugin; the host runs P(lmcache_vllm.fleet.fleet_ownership#module).
  platform:
    support: full
    platforms: posix
    description: A systemd host.
options:
  kinds:
    description:
      - The hosts of each kind in the play (validate.yml's C(__fleet_valid_kinds)), keys C(serving), C(store) and
        C(router); this host claims for each kind it belongs to.
      - Exactly one of O(kinds) and O(require) is given.
    type: dict
  require:
    description:
      - Claim nothing; fail when this host's claim of this kind did not run in this run.
    type: str
    choices: [serving, router]
"""

EXAMPLES = r"""
- name: Refuse what the collection did not create, claim what the deploy creates
  lmcache_vllm.fleet.fleet_claim:
    kinds: "{{ __fleet_valid_kinds }}"

- name: Refuse a host whose ownership claim (stage 1b) did not run
  lmcache_vllm.fleet.fleet_claim:
    require: serving
"""

RETURN = r"""
claims:
  description: Per kind claimed (V(serving), V(store), V(router)), its manifest and the status of each entry.
  returned: always
  type: list
  elements: dict
problems:
  description: Every refusal of the host, one sentence each with host, variable and fix.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.action_only import refuse

ARGUMENT_SPEC = dict(
    kinds=dict(type='dict'),
    require=dict(type='str', choices=['serving', 'router']),
)
# Exactly one of them.
ONE_OF = [('kinds', 'require')]


def main():
    refuse('lmcache_vllm.fleet.fleet_claim', ARGUMENT_SPEC)


if __name__ == '__main__':
    main()
