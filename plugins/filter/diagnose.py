# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the deploy playbook's reports.

``journal_diagnose`` turns a failed unit's journal into plain-words findings;
``fleet_check`` runs the fleet rules without failing, so a playbook can collect the
problems of every host and report them all at once.

Documentation: ``plugins/filter/journal_diagnose.yml``, ``plugins/filter/fleet_check.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import fleet_rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.journal_diagnose import diagnose


def journal_diagnose(text, service='vllm', host='', device='cuda', model=None):
    """List of findings (dicts with cause, what, fix, variables, evidence, message)."""
    if text is None:
        text = ''
    if isinstance(text, (list, tuple)):
        text = '\n'.join(str(line) for line in text)
    if not isinstance(text, str):
        raise AnsibleFilterError('journal_diagnose expects the journal text (a string or a list of lines)')
    return diagnose(text, service=service, host=host, device=device, model=model)


def shared_memory_user_errors(host, settings):
    """CPU hosts with lmcache_driven transfer: LMCache must run as vLLM's user (checked only when both users are given)."""
    cfg = fleet_rules.effective(settings)
    lmcache_user = settings.get('lmcache_server_user')
    vllm_user = settings.get('vllm_server_user')
    if lmcache_user in (None, '') or vllm_user in (None, '') or lmcache_user == vllm_user:
        return []
    if fleet_rules.as_bool(cfg.get('vllm_server_kv_connector')) is not True or cfg.get('vllm_server_device') != 'cpu':
        return []
    mode = fleet_rules.resolve_connector_transfer_mode(cfg.get('vllm_server_lmcache_transfer_mode'), 'cpu')
    if mode != 'lmcache_driven':
        return []
    return [fleet_rules.msg(
        host, 'lmcache_server_user', lmcache_user,
        'differs from vllm_server_user=%s, but lmcache_driven transfer on CPU shares the KV cache through a shared-memory '
        'segment that only vLLM\'s user may open' % vllm_user,
        'set lmcache_server_user and lmcache_server_group to vLLM\'s user and group, or use engine_driven transfer '
        '(vllm_server_lmcache_transfer_mode=null and lmcache_server_supported_transfer_mode=auto)')]


def fleet_check(settings, n=None, host=''):
    """``{'errors': [...], 'warnings': [...]}`` for one host: the static checks, plus the N-dependent ones when N is given."""
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise AnsibleFilterError('fleet_check expects a dictionary of role variables')
    settings = dict(settings)
    errors = list(fleet_rules.validate_host(host, settings))
    errors.extend(shared_memory_user_errors(host, settings))
    warnings = []
    if n not in (None, ''):
        more, warnings = fleet_rules.validate_with_n(host, n, settings)
        errors.extend(error for error in more if error not in errors)
    return {'errors': errors, 'warnings': list(warnings)}


class FilterModule:
    """lmcache_vllm.fleet diagnosis filters."""

    def filters(self):
        return {'journal_diagnose': journal_diagnose, 'fleet_check': fleet_check}
