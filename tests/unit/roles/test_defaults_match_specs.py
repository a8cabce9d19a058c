# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's defaults/main.yml and meta/argument_specs.yml describe the same variables with the same defaults,
and the choices the specs document are the host plan's own."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules, host_plan, plan_variables
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = ('lmcache_server', 'vllm_server', 'kv_store')


def load(role, *parts):
    with open(os.path.join(ROOT, 'roles', role, *parts), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize('role', ROLES)
def test_defaults_and_argument_specs_do_not_drift(role):
    defaults = load(role, 'defaults', 'main.yml')
    options = load(role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
    assert sorted(defaults) == sorted(options), 'only in defaults: %s; only in specs: %s' % (
        sorted(set(defaults) - set(options)), sorted(set(options) - set(defaults)))
    for name, spec in options.items():
        assert name.startswith(role + '_'), name
        assert spec.get('default') == defaults[name], (name, spec.get('default'), defaults[name])
        assert spec.get('description'), name


@pytest.mark.parametrize('role', ROLES)
def test_defaults_hold_no_templates(role):
    """A default that is a template would be a second place for a rule: the host plan resolves them."""
    for name, value in load(role, 'defaults', 'main.yml').items():
        assert '{{' not in str(value), name


def test_the_plan_reads_the_same_defaults():
    merged = {}
    for role in plan_variables.ROLES:
        merged.update(load(role, 'defaults', 'main.yml'))
    assert plan_variables.role_defaults() == merged
    assert plan_variables.known_variables() == set(merged)


@pytest.mark.parametrize('variable, choices', [
    ('vllm_server_dtype', plan_variables.VLLM_DTYPES),
    ('vllm_server_kv_cache_dtype', plan_variables.VLLM_KV_CACHE_DTYPES),
    ('vllm_server_mamba_ssm_cache_dtype', plan_variables.VLLM_MAMBA_DTYPES),
    ('vllm_server_mamba_cache_dtype', plan_variables.VLLM_MAMBA_DTYPES),
    ('vllm_server_mamba_cache_mode', fleet_rules.MAMBA_CACHE_MODES),
    ('vllm_server_device', fleet_rules.DEVICES),
    ('lmcache_server_eviction_policy', fleet_rules.EVICTION_POLICIES),
    ('lmcache_server_supported_transfer_mode', fleet_rules.SERVER_TRANSFER_MODES),
    ('lmcache_server_log_level', plan_variables.LMCACHE_LOG_LEVELS),
    ('kv_store_maxmemory_policy', kv_store_config.EVICTION_POLICIES),
    ('kv_store_server', ('auto',) + kv_store_config.PREFERENCE),
])
def test_documented_choices_are_the_plans(variable, choices):
    options = {}
    for role in ROLES:
        options.update(load(role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options'])
    assert sorted(options[variable]['choices']) == sorted(choices)


def test_the_plan_with_only_the_defaults_and_a_model_is_clean():
    plan = host_plan.plan_host('gpu-01', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B'}, n=544, n_kind='probed')
    assert plan['errors'] == [] and plan['warnings'] == []
