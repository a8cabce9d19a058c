# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the probe groups (documentation in ``plugins/filter/probe_groups.yml``)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import hardware_groups


def _pair(entry):
    if isinstance(entry, dict) and 'host' in entry:
        return entry['host'], entry.get('inputs') or None
    if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str):
        return entry[0], entry[1] if isinstance(entry[1], dict) and entry[1] else None
    raise AnsibleFilterError('probe_groups expects a list of {host, inputs} or [host, inputs] (inputs: the '
                             'block_size_probe result\'s inputs, e.g. with compute_only=true), got %r' % (entry,))


def probe_groups(hosts, cached=None, per_group=True):
    """The hardware groups of ``hosts``: {host, inputs} or [host, inputs] (inputs: the probe's RV inputs, or null);
    ``per_group`` false: each host a group of its own."""
    if not isinstance(hosts, list):
        raise AnsibleFilterError('probe_groups expects a list of {host, inputs} or [host, inputs], got %s'
                                 % type(hosts).__name__)
    if not isinstance(per_group, bool):
        raise AnsibleFilterError('probe_groups: per_group must be a boolean, got %r' % (per_group,))
    groups = hardware_groups.form_groups([_pair(h) for h in hosts], cached=cached or [], per_group=per_group)
    for group in groups:
        group['line'] = hardware_groups.describe(group)
    return groups


class FilterModule:
    """lmcache_vllm.fleet probe group filters."""

    def filters(self):
        return {'probe_groups': probe_groups}
