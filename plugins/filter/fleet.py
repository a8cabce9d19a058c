# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters wrapping the fleet rules and the block-size prediction.

Documentation of each filter lives in ``plugins/filter/<filter name>.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import (
    fleet_rules,
    host_plan,
    package_spec,
    plan_variables,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import predict_block_size, explain_block_size

display = Display()


def _positive_int(value, name):
    number = plan_variables.as_int(value)
    if number is None or number < 1:
        raise AnsibleFilterError('%s=%s is not a positive integer; use an integer >= 1' % (name, plan_variables.fmt_value(value)))
    return number


def lmcache_chunk_size(n, multiple=1):
    """LMCache --chunk-size = N * multiple."""
    return fleet_rules.chunk_size(_positive_int(n, 'N'), _positive_int(multiple, 'lmcache_server_chunk_multiple'))


def vllm_max_num_batched_tokens(n, value=None, separate_object_groups=True, host=''):
    """The hybrid --max-num-batched-tokens: ``value`` checked against N, or 2N-1 when it is null."""
    n = _positive_int(n, 'N')
    if value in (None, ''):
        return fleet_rules.default_max_num_batched_tokens(n)
    errors, warnings = fleet_rules.check_max_num_batched_tokens(host, n, value, separate_object_groups)
    if errors:
        raise AnsibleFilterError('\n'.join(errors))
    for warning in warnings:
        display.warning(warning)
    return plan_variables.as_int(value)


def lmcache_kv_transfer_config(host, port, transfer_mode=None, mq_timeout=None):
    """vLLM --kv-transfer-config (a dict; templates add ``| to_json``)."""
    port_int = plan_variables.as_int(port)
    if port_int is None or not 1 <= port_int <= 65535:
        raise AnsibleFilterError('lmcache_server_port=%s is not a TCP port; use an integer in 1..65535' % plan_variables.fmt_value(port))
    if transfer_mode not in (None, '') and transfer_mode not in fleet_rules.CONNECTOR_TRANSFER_MODES:
        raise AnsibleFilterError('vllm_server_lmcache_transfer_mode=%s is not a connector transfer mode; use null (auto), lmcache_driven or engine_driven'
                                 % plan_variables.fmt_value(transfer_mode))
    if mq_timeout not in (None, ''):
        number = plan_variables.as_number(mq_timeout)
        if number is None or number <= 0:
            raise AnsibleFilterError('vllm_server_lmcache_mq_timeout=%s is not a positive number of seconds; use null or e.g. 30'
                                     % plan_variables.fmt_value(mq_timeout))
    return fleet_rules.kv_transfer_config(host, port_int, transfer_mode, mq_timeout)


def host_plan_public(plan):
    """The host plan without its secrets (the API key and tokens shown as <redacted>)."""
    if not isinstance(plan, dict):
        raise AnsibleFilterError('host_plan_public expects the host plan (lookup lmcache_vllm.fleet.host_plan)')
    return host_plan.public_view(plan)


def venvs_to_remove(found):
    """The per-version virtualenvs to remove, from one result of ansible.builtin.find over a venvs folder
    (its ``item`` holds ``current``, ``keep`` and ``prefix``)."""
    if not isinstance(found, dict) or not isinstance(found.get('item'), dict):
        raise AnsibleFilterError('venvs_to_remove expects one result of a find loop over {venvs_dir, prefix, current, keep}')
    item = found['item']
    dirs = [(entry.get('path'), float(entry.get('mtime') or 0)) for entry in found.get('files') or []]
    return plan_variables.venvs_to_remove(dirs, item.get('current'), plan_variables.as_int(item.get('keep')) or 2,
                                          item.get('prefix') or '')


def same_version(installed, wanted):
    """True when the installed version string is the wanted PEP 440 version (null: not installed)."""
    return installed is not None and package_spec.same_version(installed, wanted)


def predicted_block_size(config, **options):
    """N predicted from a parsed config.json (int); ``details=true`` returns the explanation dict."""
    details = plan_variables.as_bool(options.pop('details', False)) is True
    if 'device' in options and 'platform' not in options:
        options['platform'] = options.pop('device')
    if 'gpu_architecture' in options and 'architecture' not in options:
        options['architecture'] = options.pop('gpu_architecture')
    try:
        if details:
            return explain_block_size(config, **options)
        return predict_block_size(config, **options)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError('cannot predict the block size: %s' % exc) from exc


class FilterModule:
    """lmcache_vllm.fleet filters."""

    def filters(self):
        return {
            'lmcache_chunk_size': lmcache_chunk_size,
            'vllm_max_num_batched_tokens': vllm_max_num_batched_tokens,
            'lmcache_kv_transfer_config': lmcache_kv_transfer_config,
            'host_plan_public': host_plan_public,
            'venvs_to_remove': venvs_to_remove,
            'predicted_block_size': predicted_block_size,
            'same_version': same_version,
        }
