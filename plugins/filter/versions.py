# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' reader of installed versions (the script lives in ``module_utils/status/versions.py``).

Documentation: ``plugins/filter/versions_argv.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import versions


def versions_argv(python, names, new=False):
    """argv printing ``{"<dist>": "<version>" or null}`` for ``names`` with ``python``."""
    if not python or not isinstance(names, (list, tuple)):
        raise AnsibleFilterError('versions_argv expects a python path and a list of distribution names')
    return versions.versions_argv(python, names, new=bool(new))


class FilterModule:
    """lmcache_vllm.fleet version filters."""

    def filters(self):
        return {'versions_argv': versions_argv}
