# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host's plan: every rule, flag, environment and probe input, computed once per stage.

``plan_host(host, settings, n=..., ...)`` takes a host's role variables (both roles,
``lmcache_server_*`` and ``vllm_server_*``, as Ansible resolved them; missing ones fall
back to the roles' ``defaults/main.yml``), its N and where N came from, and returns::

    {'host', 'errors', 'warnings',
     'derived':  {block_size, hybrid, chunk_size, max_num_batched_tokens, max_gpu_workers, ...},
     'lmcache':  {argv, environment, env_file, exec_start, environment_lines, env_file_lines,
                  description, unit_name, unit_path, env_path, read_write_paths, ...},
     'vllm':     {the same, plus fingerprint_path, health_url},
     'probe':    {the block_size_probe module's arguments: the production values that change N},
     'n_inputs': {the inputs of N, for the prediction and the reports},
     'files':    [the files a rollback restores],
     'services': [{name, unit_name, unit_path} of the units a rollback stops and restores, in start order],
     'summary': {...}}

validate.yml, deploy.yml (once per stage), the roles (when run on their own), the templates and the
summary all read this one result; the templates only place its ``*_lines`` and ``exec_start`` values
(already escaped the way systemd reads them, see ``systemd_quote``). Secrets (API key, tokens) appear
only in ``env_file``/``env_file_lines``.

This module is the assembly: a pipeline of the plan's rooms, each in its own file:
``plan_variables`` (variables and defaults), ``plan_validate`` (validation), ``fleet_rules`` (the rules
and the code that applies them), ``plan_units`` (unit and environment file lines). N has one door:
``plan_host``'s ``n`` and ``n_kind`` (the probe's N, or the prediction's where the docs say so).
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_units
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_validate
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import redact
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    HostSettings, argument_specs, as_int, known_variables, resolved_settings)


def plan_host(host, settings, n=None, n_kind=None, probe=None, prediction=None, prediction_problem=None,
              defaults=None, known=None, mamba_blocks=None, kv_stores=None):
    """The plan of one host (see the module docstring). Never raises for bad input: errors are listed.

    ``n_kind`` says where ``n`` comes from: ``None`` (static checks, ``n`` ignored unless it is the
    host's vllm_server_expected_block_size), ``'expected'``, ``'predicted'`` or ``'probed'``.
    ``known`` is the set of variable names the roles accept (default: their argument specs;
    ``False`` skips the check). ``mamba_blocks`` is M as vLLM reported it on this host
    (``{'mamba_cache_blocks': M, 'source': 'refusal' or 'cached'}``); without it the prediction's
    ``mamba`` entry (filter predicted_mamba_blocks) is used. ``kv_stores``: ``{store host: its kv_store_*
    variables and ansible_host}`` of the group lmcache_server_kv_store_group, for a host in an L2 pool (``kv_pool``);
    in a P2P pool those of its coordinator and of the host itself (``kv_pool.pool_hosts``).
    """
    p = HostSettings(host, resolved_settings(settings, defaults))
    plan_validate.first_checks(p, known_variables() if known is None else known)
    plan_validate.type_checks(p, argument_specs() if defaults is None else {})
    secrets = plan_validate.secrets(p)
    hybrid, hybrid_source = fleet_rules.decide_hybrid(p.cfg, probe, prediction)
    device = plan_validate.devices(p)
    block, source, expected = fleet_rules.plan_n(p, n, n_kind, prediction, prediction_problem, hybrid, hybrid_source)
    v, lm = plan_validate.service_values(p, device, hybrid, secrets)
    fleet_rules.model_rules(p, v, lm, hybrid)
    # Validation's result: every variable by its full name, typed; nothing below reads the raw settings.
    c = plan_validate.checked_values(p, argument_specs())
    derived = fleet_rules.derive(p, v, lm, block, source, hybrid, hybrid_source)
    derived.update(fleet_rules.max_num_seqs(p, v, block, hybrid, prediction, mamba_blocks))
    n_inputs = _n_inputs(c, v)
    if n_kind == 'probed':
        fleet_rules.compare_prediction(p, block, prediction, n_inputs)
    v.update(n_inputs=n_inputs, secrets=secrets,
             kv=kv_pool.host_pool(host, c, derived, n_inputs, kv_stores, p.errors, lm.get('kv_timeout'),
                                  prediction, lm.get('kv_prefill'), c['lmcache_server_device']))
    # The plan's sections: each service is built by plan_units from the checked and derived values. A new
    # section (another service, a KV store pool) is one builder called here and placed by _assemble.
    services = {'lmcache': plan_units.lmcache_service(c, derived, lm, v['lmcache_gpus'], v.get('kv')),
                'vllm': plan_units.vllm_service(c, derived, v)}
    return _assemble(p, c, v, derived, n_inputs, expected, services)


def request_key(n=None, probe=None, prediction=None, mamba_blocks=None, gpus=None):
    """A digest of what a plan was asked for besides the host's variables: N, the probe's result, the
    prediction (when given), M and the GPUs' memory (gpu facts). A plan made earlier in the stage with the same
    key is that stage's plan (the lookup host_plan's ``reuse``: one plan per host per stage)."""
    number = as_int(n)
    given = None if n in (None, '') else (number if number is not None else str(n))
    text = json.dumps([given, probe, prediction, mamba_blocks, gpu_memory_key(gpus)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:32]


def gpu_memory_key(gpus):
    """What a plan reads of the gpu facts (each GPU's total memory), or None without facts."""
    if isinstance(gpus, dict):
        gpus = gpus.get('gpus')
    if not isinstance(gpus, list):
        return None
    return sorted(g.get('memory_total_mib') for g in gpus if isinstance(g, dict) and g.get('memory_total_mib'))


def config_source(c, model):
    """Where the prediction reads the model's configuration (for the reports)."""
    given = c['vllm_server_model_config']
    if isinstance(given, dict):
        return 'vllm_server_model_config (given inline)'
    revision = c['vllm_server_model_revision']
    where = given if given not in (None, '') else model
    return '%s%s' % (where, ' (revision %s)' % revision if revision not in (None, '', 'main') else '')


def _n_inputs(c, v):
    """The inputs of N: what the probe runs with, the prediction reads and the reports show."""
    return {
        'model': v['model'],
        'revision': c['vllm_server_model_revision'] or None,
        'tensor_parallel_size': v['tp'] or 1,
        'dtype': v['dtype'] or 'auto',
        'kv_cache_dtype': v['kv_dtype'] or 'auto',
        'mamba_ssm_cache_dtype': v['ssm_dtype'] or 'auto',
        'mamba_cache_dtype': v['mamba_dtype'] or 'auto',
        'block_size': v['block_size'],
        'speculative_config': v['spec'],
        'num_speculative_tokens': as_int((v['spec'] or {}).get('num_speculative_tokens')) or 0,
        'platform': v['device'],
        'gpu_architecture': c['vllm_server_gpu_architecture'] or None,
        'vllm_version': c['vllm_server_version'],
        'extra_args': v['extra'],
        'extra_n_inputs': vllm_cli.extra_n_inputs(v['extra']),
        'config': config_source(c, v['model']),
    }


def _assemble(p, c, v, derived, n_inputs, expected, services):
    """The plan's result: the services (argv, environments, unit lines), the probe's arguments, the files."""
    lm, vl = services['lmcache'], services['vllm']
    return {
        'host': p.host,
        'errors': p.errors,
        'warnings': p.warnings,
        'n_inputs': n_inputs,
        'derived': derived,
        'kv_pool': kv_pool.shown(v.get('kv')),
        'lmcache': lm,
        'vllm': vl,
        'probe': _probe_arguments(c, v, n_inputs, vl, derived['mamba_inputs']),
        'files': _rollback_files(lm, vl),
        'services': _rollback_services(lm, vl),
        # What the deploy creates on the host (the fleet_ownership module claims it, remove.yml deletes it).
        'manifest_path': c['fleet_manifest_path'],
        'ownership_errors': p.ownership_errors,
        'ownership': ownership.candidates(lm, vl, *(c[name] for name in ownership.FLEET_PATHS)),
        'rendered': [
            {'role': 'lmcache_server', 'template': 'lmcache-server.service.j2', 'dest': lm['unit_path'], 'mode': '0644'},
            {'role': 'lmcache_server', 'template': 'lmcache-server.env.j2', 'dest': lm['env_path'], 'mode': '0600'},
            {'role': 'vllm_server', 'template': 'vllm.service.j2', 'dest': vl['unit_path'], 'mode': '0644'},
            {'role': 'vllm_server', 'template': 'vllm.env.j2', 'dest': vl['env_path'], 'mode': '0600'},
        ] + ([{'role': 'lmcache_server', 'template': 'lmcache-coordinator.service.j2',
               'dest': lm['coordinator']['unit_path'], 'mode': '0644'}] if lm.get('coordinator') else []),
        'summary': _summary(p, v, derived, n_inputs, expected),
    }


def _rollback_files(lm, vl):
    """The files a failed rollout puts back (copied aside before the roles change them, tasks/backup.yml)."""
    coordinator = [lm['coordinator']['unit_path']] if lm.get('coordinator') else []
    return [lm['unit_path'], lm['env_path'], vl['unit_path'], vl['env_path'], vl['fingerprint_path']] + coordinator


def _rollback_services(lm, vl):
    """The units a failed rollout stops and brings back, in start order: a P2P pool's coordinator on its
    coordinator host, then LMCache, then vLLM."""
    units = ([lm['coordinator']] if lm.get('coordinator') else []) + [lm, vl]
    return [{'name': u['service_name'], 'unit_name': u['unit_name'], 'unit_path': u['unit_path']} for u in units]


def _probe_arguments(c, v, n_inputs, vl, mamba_inputs):
    """The block_size_probe module's arguments, every one (the role passes them as the module's defaults): the
    production values that change N and the service's environment, its environment file's secrets included (the
    probe runs as the service runs; ``public_view`` redacts them), and the inputs that change M (the M vLLM
    reported is cached with N)."""
    return {
        'model': v['model'],
        'revision': n_inputs['revision'],
        'vllm_executable': vl['bin'],
        **{name: n_inputs[name] for name in vllm_cli.N_INPUT_NAMES},
        'extra_args': v['extra'],
        'env': dict(vl['probe_env'], **vl['env_file']),
        'timeout': v['timeouts'].get('vllm_server_probe_timeout'),
        'force': c['vllm_server_probe_force'] is True,
        'service_name': c['vllm_server_service_name'],
        'service_fingerprint_file': vl['fingerprint_path'],
        'user': c['vllm_server_user'],
        'group': c['vllm_server_group'],
        'mamba_inputs': mamba_inputs,
    }


def _summary(p, v, derived, n_inputs, expected):
    """One row of the fleet's tables."""
    ports = v['ports']
    return {
        'host': p.host, 'model': v['model'] or '?', 'device': v['device'], 'tp': v['tp'],
        'gpus': ','.join(str(g) for g in v['gpus'] or []),
        'n': derived['block_size'], 'n_source': derived['n_source'], 'expected': expected,
        'hybrid': derived['hybrid'], 'chunk_size': derived['chunk_size'],
        'max_num_batched_tokens': derived['max_num_batched_tokens'],
        'max_num_seqs': derived.get('max_num_seqs'),
        'mamba_cache_blocks': (derived.get('mamba') or {}).get('mamba_cache_blocks'),
        'mamba_source': (derived.get('mamba') or {}).get('source'),
        'dtype': n_inputs['dtype'], 'kv_cache_dtype': n_inputs['kv_cache_dtype'],
        'ssm_dtype': n_inputs['mamba_ssm_cache_dtype'],
        'vllm_port': ports.get('vllm_server_port'), 'lmcache_port': ports.get('lmcache_server_port'),
        'lmcache_http_port': ports.get('lmcache_server_http_port'),
        'connector': bool(v['connector']), 'warnings': p.warnings, **kv_pool.summary(v.get('kv')),
    }


def public_view(plan):
    """The plan without secrets (for plan.json and reports): the environment files redacted, and every credential
    of ``vllm_server_env`` / ``lmcache_server_env`` (by name or shape) wherever else it appears."""
    out = json.loads(json.dumps(plan, default=str))
    secrets = redact.env_secrets(*[(out.get(role) or {}).get('env_file') for role in ('lmcache', 'vllm')])
    for role in ('lmcache', 'vllm'):
        service = out.get(role) or {}
        service['env_file'] = service.pop('env_file_shown', {})
        service.pop('env_file_lines', None)
        service['env_file_lines'] = service.pop('env_file_lines_redacted', [])
    return redact.scrub(out, secrets)
