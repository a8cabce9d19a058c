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
    if not isinstance(plan, dict) or not isinstance(probe_inputs, dict):
        raise AnsibleFilterError('compile_cache_key expects the host plan and the probe inputs (block_size_probe RV inputs)')
    vllm = plan.get('vllm') or {}
    hardware = probe_inputs.get('hardware') or {}
    architecture = compile_cache.architecture(hardware)
    key = compile_cache.cache_key(probe_inputs.get('vllm_version'), architecture, hardware.get('driver_version'),
                                  probe_inputs.get('model'), vllm.get('argv'), vllm.get('environment'), vllm.get('home'))
    try:
        relative = compile_cache.home_relative_dirs(vllm.get('home'), (vllm.get('environment') or {}).get('VLLM_CACHE_ROOT'))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('compile_cache_key: %s' % exc) from exc
    return dict(key, hash=compile_cache.key_hash(key), tarball=compile_cache.tarball_name(key),
                relative_dirs=relative, user=vllm.get('user'), group=vllm.get('group'))


def compile_cache_seed(target_key, target_host, source_key, source_host):
    """{'allowed': bool, 'message': sentence}: whether the source's caches may seed the target."""
    strip = ('hash', 'tarball', 'relative_dirs', 'user', 'group')
    ok, message = compile_cache.seed_decision(
        source_host, dict((k, v) for k, v in source_key.items() if k not in strip),
        target_host, dict((k, v) for k, v in target_key.items() if k not in strip))
    return {'allowed': ok, 'message': message}


def compile_cache_report(size_bytes, seconds, host, source_host):
    return compile_cache.transfer_report(host, source_host, size_bytes, seconds)


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
        return {'compile_cache_key': compile_cache_key, 'compile_cache_seed': compile_cache_seed,
                'compile_cache_report': compile_cache_report, 'compile_cache_serial': compile_cache_serial}
