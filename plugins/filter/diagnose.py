# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the deploy playbook's reports.

``journal_diagnose`` turns a failed unit's journal into plain-words findings; ``rollout_findings`` keeps those that
explain a failed rollout, ``stage_findings`` those of a host that failed before its services changed
(report/rollout_findings.py).

Documentation: ``plugins/filter/journal_diagnose.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import rollout_findings as rollout


def journal_diagnose(text, service='vllm', host='', device='cuda', model=None, unit=None, paths=None):
    """List of findings (dicts with cause, what, fix, variables, evidence, message)."""
    if text is None:
        text = ''
    if isinstance(text, (list, tuple)):
        text = '\n'.join(str(line) for line in text)
    if not isinstance(text, str):
        raise AnsibleFilterError('journal_diagnose expects the journal text (a string or a list of lines)')
    if paths is not None and not isinstance(paths, dict):
        raise AnsibleFilterError('journal_diagnose: paths must map role variables to directories')
    return diagnose(text, service=service, host=host, device=device, model=model, unit=unit, paths=paths)


def rollout_findings(journals, host, stage, plan, task=None, message=None):
    """The findings that explain a failed rollout, from ``[LMCache's journal, vLLM's journal]`` of this rollout."""
    if not isinstance(journals, (list, tuple)) or len(journals) != 2:
        raise AnsibleFilterError('rollout_findings expects [the LMCache journal, the vLLM journal] of this rollout')
    if not isinstance(plan, dict):
        raise AnsibleFilterError('rollout_findings: plan must be the host plan (__fleet_plan)')
    return rollout.rollout_findings(journals[0], journals[1], host, stage, plan, task, message)


def stage_findings(result, host, plan, task=None):
    """The findings of a host that failed before its services changed, from the failed task's result."""
    if not isinstance(plan, dict):
        raise AnsibleFilterError('stage_findings: plan must be the host plan (__fleet_plan)')
    return rollout.stage_findings(result, host, plan, task)


class FilterModule:
    """lmcache_vllm.fleet diagnosis filters."""

    def filters(self):
        return {'journal_diagnose': journal_diagnose, 'rollout_findings': rollout_findings,
                'stage_findings': stage_findings}
