# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation's result, one typed set of checked values by full names (plan_validate.checked_values), and the units
built from it (plan_units reads nothing else)."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan, plan_units, plan_validate
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    CheckedValues, HostSettings, argument_specs, resolved_settings)

from rule_messages import GOOD, HOST


def checked(**overrides):
    """The checked values of a host with ``overrides``, after the checks plan_host runs before its units."""
    p = HostSettings(HOST, resolved_settings(dict(GOOD, **overrides)))
    plan_validate.type_checks(p, argument_specs())
    device = plan_validate.devices(p)
    plan_validate.service_values(p, device, True, plan_validate.secrets(p))
    return p, plan_validate.checked_values(p, argument_specs())


def test_values_are_typed_as_their_spec_declares_whatever_yaml_or_extra_vars_gave():
    _p, c = checked(vllm_server_port='8100', vllm_server_probe_force='yes', vllm_server_prefetch_margin_gb='5',
                    vllm_server_service_enabled='no')
    assert (c['vllm_server_port'], c['vllm_server_probe_force'], c['vllm_server_service_enabled']) == (8100, True, False)
    assert c['vllm_server_prefetch_margin_gb'] == 5.0 and isinstance(c['vllm_server_prefetch_margin_gb'], float)
    # resolve() fills what follows another variable: it is in the set too
    assert c['vllm_server_lmcache_port'] == c['lmcache_server_port'] and c['vllm_server_venv'].startswith('/')


def test_a_value_that_failed_its_check_is_null_and_its_error_names_it():
    p, c = checked(vllm_server_port='eighty', lmcache_server_unit_verify='maybe')
    assert c['vllm_server_port'] is None and c['lmcache_server_unit_verify'] is None
    assert any('vllm_server_port' in error for error in p.errors)


def test_a_name_that_is_no_variable_of_the_roles_fails_loudly():
    _p, c = checked()
    assert isinstance(c, CheckedValues)
    with pytest.raises(KeyError, match='vllm_server_prot: not a variable of the roles'):
        c['vllm_server_prot']  # noqa: B018  (a misspelt name)


def test_the_units_read_the_checked_values_not_the_raw_settings():
    """A port given as a string by extra vars and a checked one give the same unit; the plan never raises on a value
    that failed its check (its error is listed)."""
    as_string = host_plan.plan_host(HOST, dict(GOOD, vllm_server_port='8100'))
    as_number = host_plan.plan_host(HOST, dict(GOOD, vllm_server_port=8100))
    assert as_string['vllm']['unit_lines'] == as_number['vllm']['unit_lines']
    assert as_string['vllm']['port'] == 8100 and '--port 8100' in as_string['vllm']['exec_start']
    bad = host_plan.plan_host(HOST, dict(GOOD, vllm_server_start_timeout='soon', lmcache_server_restart_sec=[1]))
    assert any('vllm_server_start_timeout' in error for error in bad['errors'])
    assert bad['vllm']['start_timeout'] == 0


def test_the_unit_builders_refuse_raw_settings_without_a_name_they_need():
    with pytest.raises(KeyError, match='not a variable of the roles'):
        plan_units.vllm_service(CheckedValues(), {}, {})
