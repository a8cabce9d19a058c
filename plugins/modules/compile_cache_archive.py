#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: compile_cache_archive
short_description: Pack or unpack a vLLM unit's compile caches below its HOME without following a link
version_added: "0.1.0"
description:
  - The warm first start's transfer, run as root in a HOME the service user can write. Every path component
    is opened without following a symbolic link (from C(/) down); a link on the way is refused, never followed.
  - O(state=pack) writes a gzip tarball of the cache directories (O(relative_dirs), relative to O(home)) into
    O(archive), directories and regular files owned by O(user) only. Links, special files and files of
    another owner are skipped and named.
  - O(state=unpack) refuses the whole tarball, before writing anything, when a member is not a regular file or
    a directory, or lies outside the cache directories; otherwise it writes each member owned by
    O(user):O(group), replacing a planted link itself and never writing through it.
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is packed or written; O(state=unpack) still checks the tarball.
  diff_mode:
    support: none
    description: No diff; the result names what was packed and skipped.
options:
  state:
    description: Pack or unpack.
    type: str
    choices: [pack, unpack]
    required: true
  home:
    description: The unit's HOME (an absolute path with no link on the way).
    type: path
    required: true
  relative_dirs:
    description: The cache directories relative to O(home) (the compile-cache key's C(relative_dirs)).
    type: list
    elements: str
    required: true
  user:
    description: The service user (O(state=pack) packs only its files; O(state=unpack) gives it the files).
    type: str
    required: true
  group:
    description: The service group (O(state=unpack)).
    type: str
    default: ''
  archive:
    description: The tarball on the host, in a directory only root may write.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Pack the compile caches
  lmcache_vllm.fleet.compile_cache_archive:
    state: pack
    home: /var/lib/vllm
    relative_dirs: [cache/torch_compile_cache, .triton/cache]
    user: vllm
    archive: /tmp/ansible.cc.tar.gz
"""

RETURN = r"""
packed:
  description: The cache directories packed (O(state=pack)).
  returned: always
  type: list
  elements: str
skipped:
  description: What was not packed (links, special files, files of another owner), relative to O(home).
  returned: always
  type: list
  elements: str
members:
  description: How many members were unpacked (O(state=unpack)).
  returned: always
  type: int
"""

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import nofollow


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', required=True, choices=['pack', 'unpack']),
            home=dict(type='path', required=True),
            relative_dirs=dict(type='list', elements='str', required=True),
            user=dict(type='str', required=True),
            group=dict(type='str', default=''),
            archive=dict(type='path', required=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, packed=[], skipped=[], members=0)
    try:
        account = pwd.getpwnam(p['user'])
        gid = grp.getgrnam(p['group']).gr_gid if p['group'] else account.pw_gid
    except KeyError as exc:
        module.fail_json(msg='the service account does not exist: %s' % exc, **result)
    try:
        if p['state'] == 'pack':
            if not module.check_mode:
                fd = os.open(p['archive'], os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, 'wb') as out:
                    result['packed'], result['skipped'] = nofollow.pack(p['home'], p['relative_dirs'], out,
                                                                        account.pw_uid)
        elif module.check_mode:
            import tarfile
            with tarfile.open(p['archive'], mode='r:gz') as tar:
                problems = nofollow.member_problems(tar.getmembers(), p['relative_dirs'])
            if problems:
                raise nofollow.Refused('; '.join(problems))
        else:
            result['members'] = nofollow.unpack(p['archive'], p['home'], p['relative_dirs'], account.pw_uid, gid)
            result['changed'] = True
    except nofollow.Refused as exc:
        module.fail_json(msg='the compile caches under %s are refused: %s; the unit compiles on its first start. '
                             'Fix: remove what is named (the service user may have planted it) and deploy again'
                             % (p['home'], exc), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
