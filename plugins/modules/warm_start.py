#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: warm_start
short_description: The warm first start of a probe group, the compile caches of its first host seeding the others
version_added: "0.1.0"
description:
  - An action plugin - the decisions are made on the control node, the caches travel through it. deploy.yml's stage 4
    runs it on a probe group's hosts (C(fleet_warm_first_start), docs/scale.md).
  - Every step computes this host's compile-cache key (its plan's vLLM argv, environment and HOME, the probe's vLLM
    version, model and hardware) from the facts C(__vllm_server_plan), C(__vllm_server_probe_inputs) and
    C(__vllm_server_probe_group) (the role C(lmcache_vllm.fleet.vllm_server)'s probe), and sets it as the fact
    C(__fleet_cc_key).
  - O(step=pack), on a group's first host once its vLLM answers C(/health), packs the compile caches under the unit's
    HOME and C(VLLM_CACHE_ROOT) into one tarball (module P(lmcache_vllm.fleet.compile_cache_archive#module) - no link
    followed, only the service user's directories and regular files) and fetches it to O(cache_dir) on the control
    node, when O(restarted) or the control node holds no tarball of this key yet. Sets the fact C(__fleet_cc_packed)
    (C(path), C(size) and C(report), or C(report) alone when there was nothing to pack).
  - O(step=seed), on another host of the group after its configuration and before its vLLM (re)starts, compares its
    key with the first host's; equal keys unpack the first host's tarball into this host's HOME (nothing but regular
    files and directories below the caches, owned by the service user), a differing key says which part differs and
    nothing is copied. Sets the facts C(__fleet_cc_seeded) (one sentence for the summary) and, after a copy,
    C(__fleet_cc_seeded_at) (epoch seconds).
  - The tarball lives on the host in root's temporary file, outside the service user's HOME, and is removed again.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: In check mode the task is skipped; nothing is packed, fetched or copied.
  diff_mode:
    support: none
    description: No diff; the facts say what was packed or copied.
  action:
    support: full
    description: An action plugin; the host runs the modules C(tempfile), P(lmcache_vllm.fleet.compile_cache_archive#module), C(copy), C(fetch) and C(file).
  platform:
    support: full
    platforms: posix
    description: The control node and a systemd host.
options:
  step:
    description: V(pack) on a group's first host, V(seed) on the others.
    type: str
    choices: [pack, seed]
    required: true
  cache_dir:
    description: Where the control node keeps the tarballs (C(fleet_compile_cache_dir)).
    type: path
    default: ~/.cache/lmcache-vllm-fleet/compile-cache
  restarted:
    description: With O(step=pack), whether this run (re)started the host's vLLM (then its caches are packed again).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Pack this first host's compile caches for its group
  lmcache_vllm.fleet.warm_start:
    step: pack
    restarted: "{{ __vllm_server_restart | bool }}"

- name: Seed the compile caches of the group's first host before this host's first start
  lmcache_vllm.fleet.warm_start:
    step: seed
"""

RETURN = r"""
msg:
  description: What was packed or copied, or why not (the sentence of the summary).
  returned: always
  type: str
skipped_paths:
  description: With O(step=pack), what was not packed under the HOME (links, special files, files of another owner).
  returned: step pack, when the caches were packed
  type: list
  elements: str
"""

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.action_only import refuse

ARGUMENT_SPEC = dict(
    step=dict(type='str', choices=['pack', 'seed'], required=True),
    cache_dir=dict(type='path', default='~/.cache/lmcache-vllm-fleet/compile-cache'),
    restarted=dict(type='bool', default=True),
)


def main():
    refuse('lmcache_vllm.fleet.warm_start', ARGUMENT_SPEC)


if __name__ == '__main__':
    main()
