# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the probe groups (documentation in ``plugins/filter/probe_groups.yml``)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import hardware_groups


def probe_groups(hosts, cached=None):
    """The hardware groups of ``hosts``: a list of {host, inputs} (inputs: the probe module's RV inputs, or null)."""
    if not isinstance(hosts, list) or not all(isinstance(h, dict) and 'host' in h for h in hosts):
        raise AnsibleFilterError('probe_groups expects a list of {host, inputs} (inputs: the block_size_probe '
                                 'result\'s inputs, e.g. with compute_only=true)')
    return hardware_groups.form_groups([(h['host'], h.get('inputs') or None) for h in hosts], cached=cached or [])


class FilterModule:
    """lmcache_vllm.fleet probe group filters."""

    def filters(self):
        return {'probe_groups': probe_groups}
