# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router plan: its workers come from the inventory group, and every refusal names host, variable and fix."""

from __future__ import annotations

import os

import pytest
import yaml

from fleet_collection import REPO_ROOT

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_config, router_units

GROUPS = {'qwen36_hosts': ['gpu-01', 'gpu-02'], 'qwen35_hosts': ['gpu-03'], 'routers': ['rt-01']}
WORKERS = {
    'gpu-01': {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000,
               'ansible_host': '10.0.0.1'},
    'gpu-02': {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_host': '10.0.0.2', 'vllm_server_port': 8001},
    'gpu-03': {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000},
}


def plan(groups=None, workers=None, **settings):
    base = {'vllm_router_instances': [{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000}]}
    base.update(settings)
    ws = WORKERS if workers is None else workers
    return router_config.plan_router('rt-01', base, GROUPS if groups is None else groups, ws.get)


def errors_of(p):
    return ' | '.join(p['errors'])


def test_workers_are_the_groups_hosts_with_their_addresses():
    p = plan()
    assert p['errors'] == []
    (router,) = p['instances']
    assert [w['url'] for w in router['workers']] == ['http://10.0.0.1:8000', 'http://10.0.0.2:8001']
    assert router['service_name'] == 'vllm-router-qwen36-hosts'
    assert router['argv'][-3:] == ['--worker-urls', 'http://10.0.0.1:8000', 'http://10.0.0.2:8001']
    assert router['argv'][router['argv'].index('--policy') + 1] == 'cache_aware'
    assert router['argv'][router['argv'].index('--host') + 1] == '127.0.0.1'
    assert p['venv'] == '/opt/vllm-router/vllm-router-0.1.17'
    assert p['pip'][-1] == 'vllm-router==0.1.17'


def test_network_bind_needs_the_opt_in():
    assert 'vllm_router_allow_network=true' in errors_of(plan(vllm_router_bind='10.0.0.9'))
    assert 'vllm_router_metrics_bind' in errors_of(plan(vllm_router_metrics_bind='0.0.0.0'))
    assert plan(vllm_router_bind='10.0.0.9', vllm_router_allow_network=True)['errors'] == []


def test_a_worker_outside_the_model_group_is_refused():
    p = plan(vllm_router_instances=[{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000,
                                     'workers': ['gpu-01', 'gpu-03']}])
    assert 'host rt-01' in errors_of(p) and 'gpu-03 outside the model group qwen36_hosts' in errors_of(p)


def test_a_group_mixing_models_is_refused():
    groups = dict(GROUPS, mixed=['gpu-01', 'gpu-03'])
    p = plan(groups=groups, vllm_router_instances=[{'group': 'mixed', 'port': 30000, 'metrics_port': 29000}])
    assert 'mixes models' in errors_of(p)


def test_an_empty_or_unknown_group_is_refused():
    p = plan(vllm_router_instances=[{'group': 'nope', 'port': 30000, 'metrics_port': 29000}])
    assert 'has no worker' in errors_of(p)


@pytest.mark.parametrize('settings, clash', [
    ({'vllm_server_port': 30000}, 'collides with vllm_server_port'),
    ({'lmcache_server_http_port': 29000}, 'collides with lmcache_server_http_port'),
    ({'kv_store_port': 30000}, 'collides with kv_store_port'),
    ({'vllm_router_instances': [{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 30000}]},
     'collides with vllm_router_instances[qwen36_hosts].port'),
    ({'vllm_router_instances': [{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000},
                                {'group': 'qwen35_hosts', 'port': 30001, 'metrics_port': 29000}]},
     'collides with vllm_router_instances[qwen36_hosts].metrics_port'),
])
def test_ports_that_collide_are_refused(settings, clash):
    assert clash in errors_of(plan(**settings))


def test_two_groups_two_routers():
    p = plan(vllm_router_instances=[{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000},
                                    {'group': 'qwen35_hosts', 'port': 30001, 'metrics_port': 29001,
                                     'policy': 'round_robin'}])
    assert p['errors'] == []
    assert [i['policy'] for i in p['instances']] == ['cache_aware', 'round_robin']
    units = [e['path'] for e in p['ownership'] if e['kind'] == 'unit']
    assert units == ['/etc/systemd/system/vllm-router-qwen36-hosts.service',
                     '/etc/systemd/system/vllm-router-qwen35-hosts.service']


def test_a_loopback_worker_on_another_host_is_refused():
    workers = dict(WORKERS, **{'gpu-02': dict(WORKERS['gpu-02'], vllm_server_host='127.0.0.1')})
    assert 'listens on loopback' in errors_of(plan(workers=workers))


def test_kv_aware_is_refused_with_its_reason():
    assert 'KV-cache events' in errors_of(plan(vllm_router_policy='kv_aware'))


def test_knobs_become_flags_and_null_leaves_the_routers_default():
    p = plan(vllm_router_cache_threshold=0.5, vllm_router_disable_retries=True, vllm_router_queue_size=None)
    argv = p['instances'][0]['argv']
    assert argv[argv.index('--cache-threshold') + 1] == '0.5'
    assert '--disable-retries' in argv and '--queue-size' not in argv
    assert 'is not a number' in errors_of(plan(vllm_router_cache_threshold=2))


def test_the_roles_default_balance_threshold_spreads_conversations():
    """The role's default (defaults/main.yml, equal to its argument spec) reaches the router's command line."""
    with open(os.path.join(REPO_ROOT, 'roles', 'vllm_router', 'defaults', 'main.yml'), encoding='utf-8') as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(REPO_ROOT, 'roles', 'vllm_router', 'meta', 'argument_specs.yml'), encoding='utf-8') as h:
        spec = yaml.safe_load(h)['argument_specs']['main']['options']['vllm_router_balance_abs_threshold']
    assert defaults['vllm_router_balance_abs_threshold'] == spec['default'] == 2
    instances = [{'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000}]
    argv = plan(**dict(defaults, vllm_router_instances=instances))['instances'][0]['argv']
    assert argv[argv.index('--balance-abs-threshold') + 1] == '2'


def test_no_secret_and_no_api_key_reaches_the_command_line():
    argv = plan()['instances'][0]['argv']
    assert '--api-key' not in argv
    assert all('--api-key' not in line for line in plan()['instances'][0]['unit_lines'])


def test_every_knob_has_a_default_and_a_flag_of_the_table():
    defaults = router_config.router_defaults()
    for suffix, flag, _kind, _low, _high in router_units.FLAGS:
        assert 'vllm_router_' + suffix in defaults, suffix
        assert flag == '--' + suffix.replace('_', '-')


def test_unit_is_sandboxed_and_runs_as_the_router_user():
    lines = plan()['instances'][0]['unit_lines']
    assert 'User=vllm-router' in lines and 'ProtectSystem=strict' in lines and 'NoNewPrivileges=true' in lines
    assert any(line.startswith('ExecStart=/opt/vllm-router/vllm-router-0.1.17/bin/vllm-router') for line in lines)


def test_bad_names_and_paths_are_ownership_errors():
    p = plan(vllm_router_home='/tmp', vllm_router_user='Root!')
    assert p['ownership_errors'] and 'ownership' not in p


def test_defaults_and_argument_specs_do_not_drift():
    import os
    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
    with open(os.path.join(root, 'roles', 'vllm_router', 'meta', 'argument_specs.yml')) as handle:
        options = yaml.safe_load(handle)['argument_specs']['main']['options']
    defaults = router_config.router_defaults()
    assert sorted(defaults) == sorted(options)
    for name, spec in options.items():
        assert spec.get('default') == defaults[name], name
    assert options['vllm_router_policy']['choices'] == list(router_config.POLICIES)


def test_an_error_names_host_variable_and_fix():
    (error,) = plan(vllm_router_bind='10.0.0.9')['errors']
    assert error.startswith('host rt-01: vllm_router_bind=10.0.0.9 exposes the router')
    assert 'set vllm_router_allow_network=true' in error
