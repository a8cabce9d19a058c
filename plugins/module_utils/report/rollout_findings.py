# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why one host's rollout failed, in plain words, from the journals of this rollout (the deploy's rescue).

:func:`rollout_findings` explains both units' journals (journal_diagnose) and keeps what names the cause: the
findings of the unit whose stage failed first, then those of the other unit; vLLM's "LMCache did not respond"
adds nothing when LMCache's own journal names why (its shared memory, its handler); and when no journal names a
cause, the failed task and its message, with the stage's last journal error where there is one.
:func:`stage_findings` explains a host that failed before any service changed (install, GPUs, probe) from the
failed task's own answer (its message, the probe's log tail, stderr).
"""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose

# LMCache's causes that make vLLM's own "LMCache did not respond" (lmcache_no_response) a consequence.
LMCACHE_CAUSES_OF_NO_RESPONSE = ('shm_permission', 'lmcache_no_handler')


def _known(findings):
    return [f for f in findings if f.get('cause') != 'unknown']


def _task_failure(host, task, message, own):
    evidence = own[0].get('evidence') if own else ''
    text = 'host %s: %s failed: %s' % (host, task or 'a task', str(message or '').strip())
    if evidence:
        text += ' (last journal error: %s)' % evidence
    return [{'cause': 'task', 'message': text}]


def rollout_findings(lmcache_journal, vllm_journal, host, stage, plan, task=None, message=None):
    """The findings (journal_diagnose's dicts; ``cause`` ``task`` for the failed task itself) of a rollout that
    failed in ``stage`` (``lmcache`` or another vLLM stage), from the units' journals of this rollout and the host
    plan (its platform, model, unit names and the vLLM paths a full disk names)."""
    n_inputs, lmcache, vllm = plan['n_inputs'], plan['lmcache'], plan['vllm']
    found_lmcache = diagnose(lmcache_journal or '', service='lmcache', host=host, device=n_inputs['platform'],
                             unit=lmcache['service_name'])
    found_vllm = diagnose(vllm_journal or '', service='vllm', host=host, device=n_inputs['platform'],
                          model=n_inputs['model'], unit=vllm['service_name'],
                          paths={'vllm_server_hf_home': vllm['hf_home'], 'vllm_server_home': vllm['home'],
                                 'vllm_server_venv': vllm['venv']})
    if any(f.get('cause') in LMCACHE_CAUSES_OF_NO_RESPONSE for f in found_lmcache):
        found_vllm = [f for f in found_vllm if f.get('cause') != 'lmcache_no_response']
    own, other = (found_lmcache, found_vllm) if stage == 'lmcache' else (found_vllm, found_lmcache)
    secondary = _known(other)
    primary = _known(own) or ([] if secondary else _task_failure(host, task, message, own))
    return primary + secondary


def stage_findings(result, host, plan, task=None):
    """The findings of a host that failed before its services changed, from the failed task's ``result`` (its
    ``msg``, the probe's ``log_tail`` and ``stderr`` read as one journal); cause ``unknown`` names the task."""
    result = result if isinstance(result, dict) else {}
    text = '\n'.join(str(result.get(key) or '') for key in ('msg', 'log_tail', 'stderr'))
    known = _known(diagnose(text, service='vllm', host=host, device=plan['n_inputs']['platform'],
                            model=plan['n_inputs']['model']))
    return known or [{'cause': 'unknown', 'message': 'host %s: %s failed: %s' % (
        host, task or 'a task', str(result.get('msg') or '').strip())}]
