# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the warm first start (documentation in ``plugins/filter/compile_cache_*.yml``)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache


def compile_cache_key(plan, probe_inputs):
    """The compile-cache key of a host: its plan (vLLM argv and environment) and its probe inputs (vLLM
    version, model, hardware: GPU architecture and driver)."""
    try:
        return compile_cache.host_key(plan, probe_inputs)
    except ValueError as exc:
        raise AnsibleFilterError('compile_cache_key: %s' % exc) from exc


def compile_cache_serial(first_count, later_count, serial='100%'):
    """The rolling batches of a first start as the play keyword serial (compile_cache.start_serial)."""
    try:
        return compile_cache.start_serial(first_count, later_count, serial)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('compile_cache_serial: fleet_serial must be a number or a percentage, got %r (%s)'
                                 % (serial, exc)) from exc


class FilterModule:
    """lmcache_vllm.fleet warm first start filters."""

    def filters(self):
        return {'compile_cache_key': compile_cache_key, 'compile_cache_serial': compile_cache_serial}
