# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: host_plan
author: lmcache_vllm.fleet maintainers (@lmcache-vllm)
version_added: "0.1.0"
short_description: The plan of the current host - every rule, flag, environment and probe input, computed once
description:
  - Collects every C(lmcache_server_*) and C(vllm_server_*) variable the current task sees (inventory, play, role
    defaults, extra vars), fills the missing ones from the roles' C(defaults/main.yml), and returns the host's plan
    (one mapping), computed on the control node without contacting the host.
  - The plan holds C(errors) and C(warnings) (each naming the host, the variable and a valid value), C(derived)
    (N, chunk size, max-num-batched-tokens, ...), the LMCache and vLLM argv lists with their environments and the
    unit file fields already escaped for systemd (C(lmcache), C(vllm)), the probe module's arguments (C(probe)),
    the inputs of N (C(n_inputs)) and the files a rollback restores (C(files)).
  - It also reads the deploy's own paths C(fleet_backup_dir), C(fleet_probe_cache_path) and C(fleet_manifest_path)
    (checked like the roles' paths) and lists in C(ownership) every unit, file, directory, user and group a deploy
    creates on the host (what the C(lmcache_vllm.fleet.fleet_ownership) module claims and C(remove.yml) deletes),
    with C(ownership_errors), the path and unit-name problems among C(errors).
  - Every playbook and role of the collection takes its values from this plan; templates only place them.
  - The plan includes the prediction (C(prediction), C(prediction_problem)) of N and, on CUDA, of the Mamba cache
    blocks M and of whether the weights fit one GPU's budget, computed exactly as C(plan.yml) computes it, from the
    model's C(config.json) on the control node (C(vllm_server_model_config), C(vllm_server_model_revision),
    C(fleet_plan_model_paths)) and the GPU's memory (the fact C(fleet_gpus) once C(deploy.yml) read it, else
    C(vllm_server_gpu_architecture) in the collection's GPU table). A model whose weights do not fit is an error
    naming the host and what changes that.
  - A variable that cannot be templated (it refers to an undefined variable, or is not a valid expression) is an
    error of the plan naming the host and the variable, so that validation reports it with every other problem.
  - Secrets (C(vllm_server_api_key), C(vllm_server_hf_token)) appear only under C(vllm.env_file) and
    C(vllm.env_file_lines); register the result with C(no_log).
extends_documentation_fragment:
  - lmcache_vllm.fleet.lookup_terms
options:
  block_size:
    description:
      - N for the N-dependent rules and flags; null checks only what does not depend on N (the host's
        C(vllm_server_expected_block_size) is used then, when set).
    type: raw
  n_kind:
    description:
      - Where O(block_size) comes from. V(predicted) without O(block_size) plans with the predicted N (the check-mode
        preview of a host not probed yet).
    type: str
    choices: [expected, predicted, probed]
  probe:
    description: The probe module's result (its C(outcome) C(not_hybrid) marks a model that is not hybrid).
    type: raw
  prediction:
    description:
      - The prediction's details (filter P(lmcache_vllm.fleet.predicted_block_size#filter) with C(details=true)), to
        plan with instead of the lookup's own prediction; left out, the lookup predicts N and M itself.
    type: raw
  prediction_problem:
    description: Why N could not be predicted (a sentence naming the host).
    type: str
  mamba_blocks:
    description:
      - The Mamba cache blocks M vLLM reported on this host, a mapping with C(mamba_cache_blocks) and C(source)
        (V(refusal) or V(cached)), with C(group) and C(canary) when taken from the probe group's first host (filter
        P(lmcache_vllm.fleet.group_mamba_blocks#filter)); without it the lookup's predicted M is used.
        C(--max-num-seqs) is kept within M; the plan's C(derived.mamba) shows M and its source.
    type: raw
  check_names:
    description: Report role-prefixed variables that neither role knows (with the closest known name).
    type: bool
    default: true
  reuse:
    description:
      - A plan this lookup returned earlier in the same stage (C(deploy.yml) and C(validate.yml) keep it in the fact
        C(__fleet_plan)). It is returned as it is when it was planned for this host with the same O(block_size),
        O(probe), O(prediction), O(mamba_blocks) and gpu facts (its C(request_key)); otherwise the host is planned anew. This
        is how each stage computes a host's plan once and the roles read it, while a role run on its own plans
        for itself. The host's variables are not compared, so pass a plan of the same run, in which no task changes
        them.
    type: raw
notes:
  - With C(-vvv) each call says whether it planned the host or reused the stage's plan.
"""

EXAMPLES = r"""
- name: Plan this host with its probed N
  ansible.builtin.set_fact:
    fleet_plan: "{{ lookup('lmcache_vllm.fleet.host_plan', block_size=vllm_block_size, n_kind='probed', probe=vllm_block_size_probe) }}"
  no_log: true

- name: Show what vLLM would run
  ansible.builtin.debug:
    msg: "{{ fleet_plan.vllm.argv | join(' ') }}"
"""

RETURN = r"""
_raw:
  description:
    - One mapping, the host's plan (keys host, errors, warnings, derived, lmcache, vllm, probe, n_inputs, files, summary),
      with C(request_key), the digest O(reuse) compares.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.utils.display import Display

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_hosts import template_error
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.lookup.model_config import read_model_config
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import plan_tree
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import request_key
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import VARIABLE_RE
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.ownership import FLEET_PATHS
from ansible_collections.lmcache_vllm.fleet.plugins.plugin_utils.fleet_lookup import FleetLookupBase

KINDS = (None, 'expected', 'predicted', 'probed')

display = Display()


class LookupModule(FleetLookupBase):

    NAME = 'host_plan'

    def run(self, terms, variables=None, **kwargs):
        variables = self.task_variables(variables, kwargs)
        host = variables.get('inventory_hostname')
        n_kind = self.get_option('n_kind')
        if n_kind not in KINDS:
            raise AnsibleLookupError('host_plan: n_kind=%s is not one of expected, predicted, probed' % n_kind)
        block_size = self.get_option('block_size')
        if isinstance(block_size, str) and not block_size.strip():
            block_size = None
        asked = dict((name, self.get_option(name) if isinstance(self.get_option(name), dict) else None)
                     for name in ('probe', 'prediction', 'mamba_blocks'))
        gpus = self._variable(variables, 'fleet_gpus')
        key = request_key(block_size, gpus=gpus, **asked)
        reuse = self.get_option('reuse')
        if isinstance(reuse, dict) and reuse.get('host') == host and reuse.get('request_key') == key:
            display.vvv('host_plan: %s reuses the plan of this stage' % host)
            return [reuse]
        settings, unusable = self._settings(host, variables)
        facts = dict(n=block_size, n_kind=n_kind, gpus=gpus, probe=asked['probe'], mamba_blocks=asked['mamba_blocks'],
                     prediction=asked['prediction'], prediction_problem=self.get_option('prediction_problem') or None)
        _static, plan = plan_tree.plan_one(
            host, settings, plan_tree.ConfigReader(read_model_config), facts,
            override=settings.get('vllm_server_model_config'), paths=self._variable(variables, 'fleet_plan_model_paths'),
            known=None if self.get_option('check_names') else False, kv_stores=self._kv_stores(host, settings, variables))
        if unusable:
            plan['errors'] = unusable + list(plan['errors'])
        # the N the plan was made with, when it came from the prediction: the roles later ask for it by number
        planned_n = block_size if block_size is not None or n_kind != 'predicted' else plan['derived']['block_size']
        plan['request_key'] = request_key(planned_n, gpus=gpus, **asked)
        display.vvv('host_plan: %s planned' % host)
        return [plan]

    def _variable(self, variables, name):
        """A play or host variable, templated (None when it is not set or cannot be templated)."""
        if name not in variables:
            return None
        try:
            return self._templar.template(variables[name])
        except AnsibleError:
            return None

    def _settings(self, host, variables):
        """(the role variables and fleet paths of the host, templated; errors of those that cannot be)."""
        settings, unusable = {}, []
        for name in sorted(name for name in variables if VARIABLE_RE.match(name) or name in FLEET_PATHS):
            # one variable that cannot be templated is this host's problem, reported with all the others
            try:
                settings[name] = self._templar.template(variables[name])
            except AnsibleError as e:
                unusable.append(template_error(host, name, getattr(e, 'message', None) or e))
        return settings, unusable

    def _kv_stores(self, host, settings, variables):
        """The variables (kv_store_*, a P2P pool's peer variables, ansible_host) of the hosts the host's L2 pool reads
        (kv_pool.pool_hosts: the store group's hosts, or a P2P pool's coordinator and the host)."""
        names = kv_pool.pool_hosts(settings, host, variables.get('groups') or {})
        if names is None:
            return None
        hostvars = variables.get('hostvars') or {}
        return kv_pool.store_variables([name for name in names if name in hostvars], hostvars.get, self._templar.template)
