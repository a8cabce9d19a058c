# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A KV store never takes an account or a home that is not its own: root and the distribution's accounts are
refused as kv_store_user, and on a host of the vLLM fleet the serving roles' homes (given, or their defaults) are
refused as kv_store_home, before any host changes."""

from __future__ import annotations

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks

GOOD = {'kv_store_password': 'correct-horse-battery-staple'}


def errors(**settings):
    return ks.plan_store('store-1', dict(GOOD, **settings))['errors']


@pytest.mark.parametrize('key, value', [('kv_store_user', 'root'), ('kv_store_group', 'root'),
                                        ('kv_store_user', 'man'), ('kv_store_user', 'daemon')])
def test_root_and_accounts_of_the_distribution_are_refused(key, value):
    found = [e for e in errors(**{key: value}) if e.startswith('host store-1: %s=%s ' % (key, value))]
    assert found and 'fleet-kv' in found[0], errors(**{key: value})


@pytest.mark.parametrize('settings, other', [
    ({'_serving_host': True, 'kv_store_home': '/var/lib/vllm'}, 'vllm_server_home'),
    ({'_serving_host': True, 'kv_store_home': '/var/lib/vllm/huggingface'}, 'vllm_server_home'),
    ({'vllm_server_hf_home': '/srv/hf', 'kv_store_home': '/srv/hf'}, 'vllm_server_hf_home'),
    ({'vllm_server_home': '/srv/vllm', 'kv_store_home': '/srv/vllm/kv'}, 'vllm_server_home'),
    ({'lmcache_server_home': '/srv/lm', 'kv_store_home': '/srv/lm'}, 'lmcache_server_home'),
])
def test_a_store_never_takes_a_serving_roles_home(settings, other):
    found = [e for e in errors(**settings) if e.startswith('host store-1: kv_store_home=%s ' % settings['kv_store_home'])]
    assert found and other in found[0], errors(**settings)
    plan = ks.plan_store('store-1', dict(GOOD, **settings))
    assert not plan.get('ownership'), 'nothing is claimed with a refused home'


def test_a_store_home_of_its_own_beside_vllm_is_accepted():
    assert not [e for e in errors(_serving_host=True) if 'kv_store_home' in e]
    assert not [e for e in errors(kv_store_home='/var/lib/vllm') if 'kv_store_home' in e]  # not a serving host


@pytest.mark.parametrize('bind', ['127.0.0.1', '::1'])
def test_a_loopback_store_that_advertises_a_network_address_is_refused(bind):
    found = [e for e in errors(kv_store_bind=bind, kv_store_advertise_address='10.0.0.9')
             if e.startswith('host store-1: kv_store_advertise_address=10.0.0.9 is a network address')]
    assert found and 'kv_store_bind=%s' % bind in found[0]
    assert not errors(kv_store_bind=bind, kv_store_advertise_address='127.0.0.1')
    assert not errors(kv_store_bind='10.0.0.9', kv_store_allow_network=True, kv_store_advertise_address='10.0.0.9')


@pytest.mark.parametrize('name, close', [('kv_store_maxmemory', 'kv_store_maxmemory_mb'),
                                         ('kv_store_alow_network', 'kv_store_allow_network'),
                                         ('kv_store_bnid', 'kv_store_bind')])
def test_a_misspelt_store_variable_is_refused(name, close):
    start = 'host store-1: %s=x is not a variable of the kv_store role' % name
    found = [e for e in errors(**{name: 'x'}) if e.startswith(start)]
    assert found and found[0].endswith('did you mean %s?' % close), errors(**{name: 'x'})


def test_a_misspelt_password_variable_is_refused_without_its_value():
    found = [e for e in errors(kv_store_pasword='correct-horse-battery-staple-2') if 'kv_store_pasword' in e]
    assert found and 'correct-horse-battery-staple-2' not in found[0] and 'kv_store_password' in found[0]
