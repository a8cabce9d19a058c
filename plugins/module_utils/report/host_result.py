# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each serving host's result of a deploy: the public host fact ``fleet_result`` (pure functions).

deploy.yml records what each stage learnt about a host with the filter ``lmcache_vllm.fleet.fleet_result``
(:func:`record`): stage 2 starts the result (N and its source, the GPUs, or the failure), stage 3 adds the plan's
public summary and the predicted N, stage 4 the outcome of the rollout and the services' states. The rollout's stop
rule, the routers' put-back, the pruning of old virtualenvs and the summary (stage 5, :func:`summary_row`) read it,
and so can a play that runs after the deploy. It holds no secrets: the plan's summary row, never the plan.

A result::

    {'host': 'gpu-a', 'stage': 'rollout', 'outcome': 'deployed', 'findings': [],
     'block_size': 784, 'block_size_source': 'probe', 'predicted_block_size': 784,
     'summary': {...the plan's summary row: model, tp, chunk_size, max_num_batched_tokens, ...},
     'services': {'lmcache': 'active', 'vllm': 'active'}, 'gpus': 2,
     'warm_start': 'host gpu-a: compile caches packed ...' or None,
     'confirmation': 'confirmed' (a host that took its probe group's N: confirmed, differs, unconfirmed) or None}
"""

from __future__ import annotations

# Stages of deploy.yml that record, and the outcomes a result can have.
STAGES = ('install', 'gpus', 'probe', 'check', 'lmcache', 'vllm', 'rollout')
OUTCOMES = ('probed', 'checked', 'deployed', 'failed', 'skipped')
# What a host without a result shows: it never reached stage 2 (unreachable, or stopped before it).
NO_RESULT = {'stage': None, 'outcome': 'failed', 'findings': [], 'block_size': None, 'block_size_source': None,
             'predicted_block_size': None, 'summary': {}, 'services': {}, 'gpus': None, 'warm_start': None,
             'confirmation': None}


class ResultError(ValueError):
    """A stage recorded a result the contract does not know (a wiring mistake in a playbook)."""


def _findings(findings):
    if findings is None:
        return None
    if isinstance(findings, (str, bytes, dict)) or not hasattr(findings, '__iter__'):
        raise ResultError('fleet_result: findings must be a list of {cause, message}, got %r' % (findings,))
    return [dict(f) if isinstance(f, dict) else {'cause': 'other', 'message': str(f)} for f in findings]


def _gpu_count(gpus):
    if isinstance(gpus, dict):
        return gpus.get('count')
    return gpus


def record(previous, host, stage, outcome, findings=None, plan=None, block_size=None, probe=None, gpus=None,
           services=None, warm_start=None, confirmation=None):
    """``previous`` (None: a new result, stage 2) with what ``stage`` learnt about ``host``.

    ``plan``: the host plan (only its public ``summary`` and its prediction are kept); ``block_size`` and
    ``probe``: the facts ``vllm_block_size`` and ``vllm_block_size_probe``; ``gpus``: the fact ``fleet_gpus`` (or a
    count); ``services``: ``{'lmcache': state, 'vllm': state}``; ``warm_start``: the sentence of the warm first
    start (the compile caches this host packed for its group, or was seeded with); ``confirmation``: the probe
    module's ``confirmation`` of the N a host took from its probe group (its outcome is kept). An argument left None
    keeps what was recorded (a new result needs ``stage`` and ``outcome``)."""
    result = dict(NO_RESULT, **(previous or {}))
    stage = stage if stage is not None or not previous else result['stage']
    outcome = outcome if outcome is not None or not previous else result['outcome']
    if stage not in STAGES:
        raise ResultError('fleet_result: unknown stage %r; one of: %s' % (stage, ', '.join(STAGES)))
    if outcome not in OUTCOMES:
        raise ResultError('fleet_result: unknown outcome %r; one of: %s' % (outcome, ', '.join(OUTCOMES)))
    result.update(host=host, stage=stage, outcome=outcome)
    changes = {'findings': _findings(findings), 'block_size': block_size, 'gpus': _gpu_count(gpus),
               'services': dict(services) if services else None, 'warm_start': warm_start or None,
               'confirmation': (confirmation or {}).get('outcome')}
    if probe:
        changes['block_size_source'] = probe.get('source')
    if plan:
        changes['summary'] = dict(plan.get('summary') or {})
        prediction = plan.get('prediction') or {}
        changes['predicted_block_size'] = prediction.get('block_size')
    result.update((key, value) for key, value in changes.items() if value is not None)
    return result


def outcome(result):
    """The outcome of a host's result (``failed`` without one)."""
    return (result or NO_RESULT).get('outcome') or 'failed'


def summary_row(host, result):
    """deploy.yml's stage 5: the host's row of the summary, from its result alone."""
    result = dict(NO_RESULT, **(result or {}))
    summary = result['summary'] or {}
    services = result['services'] or {}
    return {
        'host': host,
        'model': summary.get('model', '?'),
        'tp': summary.get('tp', '?'),
        'gpus': result['gpus'] if result['gpus'] is not None else '-',
        'n': result['block_size'] if result['block_size'] is not None else '?',
        'n_source': result['block_size_source'] or '-',
        'predicted': result['predicted_block_size'] if result['predicted_block_size'] is not None else '-',
        'hybrid': summary.get('hybrid', '?'),
        'chunk_size': summary.get('chunk_size', '-'),
        'max_num_batched_tokens': summary.get('max_num_batched_tokens', '-'),
        'lmcache': services.get('lmcache', 'unknown'),
        'vllm': services.get('vllm', 'unknown'),
        'result': outcome(result),
        'problems': [finding.get('message', '') for finding in result['findings'] or []],
        'warm_start': result['warm_start'],
    }
