# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan pipeline's pure logic (no Ansible), used by every stage.

``plan_one`` is each host's plan as every playbook computes it - the action plugin
lmcache_vllm.fleet.fleet_plan (plan.yml) and the lookup lmcache_vllm.fleet.host_plan (validate.yml, every
stage of deploy.yml, status.yml, remove.yml, the roles): the host's variables, then the prediction of N
and of the Mamba cache blocks M from its model's configuration (read once per distinct model) and its GPU
(gpu facts where a stage read them, else vllm_server_gpu_architecture), then the plan with what the stage
learnt (the probe's N, M reported by vLLM or taken from the probe group). Also here: the checks of every
host's plan (all problems at once, in validate.yml's words), each host's ``plan.json`` record and the
writing of a file only when its content or mode differs. The fleet table is ``fleet_report``'s. The plans
themselves come from ``host_plan.plan_host``.
"""

from __future__ import annotations

import os

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import mamba_clamp, vllm_cli
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_check import refusal
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import plan_host


def prediction_inputs(n_inputs):
    """The keyword arguments of the prediction: the host's inputs of N (vllm_cli's table) and its platform,
    GPU architecture and vLLM version."""
    inputs = dict((name, n_inputs[name]) for name in vllm_cli.N_INPUT_NAMES)
    inputs.update(platform=n_inputs['platform'], architecture=n_inputs['gpu_architecture'],
                  vllm_version=n_inputs['vllm_version'])
    return inputs


class ConfigReader:
    """Reads each model's configuration once (``read(model, revision=, paths=)`` raises LookupError)."""

    def __init__(self, read):
        self._read = read
        self._seen = {}

    def config(self, override, model, revision, paths):
        """The configuration: ``override`` when it is a mapping, else read from the override or the model."""
        if isinstance(override, dict):
            return override
        term = override if override not in (None, '') else model
        key = (term, revision or 'main', tuple(paths or ()))
        if key not in self._seen:
            try:
                self._seen[key] = (self._read(term, revision=revision or 'main', paths=list(paths or ())), None)
            except LookupError as exc:
                self._seen[key] = (None, str(exc))
        config, problem = self._seen[key]
        if problem:
            raise LookupError(problem)
        return config


def predict(host, n_inputs, override, reader, paths, gpus=None, gpu_memory_utilization=None):
    """(prediction details or None, the sentence saying why N cannot be predicted or None); never raises.

    On CUDA the details hold ``memory`` (do the weights fit one GPU's budget) and, for a hybrid model,
    ``mamba`` (M predicted from that GPU: ``mamba_clamp.host_memory``)."""
    declined = vllm_cli.unpredicted(n_inputs.get('extra_n_inputs'))
    if declined:
        return None, ('host %s: N is not predicted: vllm_server_extra_args set %s, an input of N the prediction does '
                      'not model; the probe on the host decides' % (host, ', '.join(declined)))
    try:
        config = reader.config(override, n_inputs['model'], n_inputs['revision'], paths)
    except LookupError as exc:
        return None, 'host %s: %s' % (host, exc)
    try:
        prediction = explain_block_size(config, **prediction_inputs(n_inputs))
    except (ValueError, TypeError) as exc:
        return None, 'host %s: cannot predict the block size: %s' % (host, exc)
    if n_inputs['platform'] == 'cuda':
        prediction.update(mamba_clamp.host_memory(
            config, prediction, gpus, n_inputs['gpu_architecture'], gpu_memory_utilization,
            n_inputs['tensor_parallel_size'], n_inputs['model'], n_inputs['dtype'], n_inputs['extra_args']))
        if prediction['mamba'] is None:
            prediction.pop('mamba')
    return prediction, None


def plan_one(host, settings, reader, facts=None, **options):
    """(the host's plan without N and M, its plan) - the one computation of a host's plan of every stage.

    ``facts``: what the stage learnt - ``n`` and ``n_kind`` (the probe's N; ``n_kind='predicted'`` without ``n``
    plans with the predicted N), ``probe`` (the probe's result), ``mamba_blocks`` (M vLLM reported, or the
    group's), ``gpus`` (gpu facts), ``prediction``/``prediction_problem`` (given instead of predicted). ``options``:
    ``override`` (vllm_server_model_config), ``paths`` (fleet_plan_model_paths), ``kv_stores``, ``known``.
    The plan carries ``prediction`` and ``prediction_problem``."""
    facts = facts or {}
    kv_stores, known = options.get('kv_stores'), options.get('known')
    static = plan_host(host, settings, kv_stores=kv_stores, known=known)
    prediction, problem = facts.get('prediction'), facts.get('prediction_problem')
    if not isinstance(prediction, dict):
        prediction, predicted_problem = predict(
            host, static['n_inputs'], options.get('override'), reader, options.get('paths') or [], facts.get('gpus'),
            static['derived']['mamba_inputs']['gpu_memory_utilization'])
        problem = problem or predicted_problem
    n, n_kind = facts.get('n'), facts.get('n_kind')
    if n in (None, '') and n_kind == 'predicted' and prediction:
        n = prediction['block_size']
    plan = plan_host(host, settings, n=n, n_kind=n_kind, probe=facts.get('probe'), prediction=prediction,
                     prediction_problem=problem, mamba_blocks=facts.get('mamba_blocks'), kv_stores=kv_stores,
                     known=known)
    plan.update(prediction=prediction, prediction_problem=problem)
    return static, plan


def check(plans, what, spared='nothing was changed'):
    """(errors, warnings, the failure message or None) of the plans, in validate.yml's words."""
    errors = [error for plan in plans for error in plan['errors']]
    warnings = [warning for plan in plans for warning in plan['warnings']]
    return errors, warnings, refusal(errors, what, spared)


def record(public, prediction, problem):
    """A host's plan.json: the public plan with the prediction and N's source."""
    out = dict(public)
    out.pop('request_key', None)
    out.update(prediction=prediction, prediction_problem=problem,
               block_size=public['derived']['block_size'], block_size_source=public['derived']['n_source'])
    return out


def host_path(plan_dir, host, dest=''):
    """Where a host's file goes in the plan: <plan_dir>/<host><path on the host>."""
    return os.path.join(plan_dir, host) + dest


def write_file(path, content, mode, made_dirs=None, check=False):
    """Write ``content`` (text) with ``mode`` (octal string) unless the file already holds it; True when changed.

    ``check``: write nothing, only say whether the file would change."""
    directory = os.path.dirname(path)
    if not check and (made_dirs is None or directory not in made_dirs):
        os.makedirs(directory, mode=0o755, exist_ok=True)
        if made_dirs is not None:
            made_dirs.add(directory)
    data = content.encode('utf-8')
    wanted = int(mode, 8)
    try:
        with open(path, 'rb') as handle:
            same = handle.read() == data
        current = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        same, current = False, None
    if same and current == wanted:
        return False
    if check:
        return True
    if not same:
        temporary = '%s.fleet-plan-tmp' % path
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, wanted), 'wb') as handle:
            handle.write(data)
        os.chmod(temporary, wanted)
        os.replace(temporary, path)
    else:
        os.chmod(path, wanted)
    return True
