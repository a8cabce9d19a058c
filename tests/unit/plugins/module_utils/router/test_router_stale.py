# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stale routers of a router host: the units its manifest lists that no entry of vllm_router_instances plans."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.filter.router import router_stale_units
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_config, router_units

GROUPS = {'qwen36_hosts': ['gpu-01'], 'qwen35_hosts': ['gpu-03']}
WORKERS = {
    'gpu-01': {'vllm_server_model': 'Qwen/Qwen3.6-27B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000},
    'gpu-03': {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_host': '0.0.0.0', 'vllm_server_port': 8000},
}


def instances():
    plan = router_config.plan_router('rt-01', {'vllm_router_instances': [
        {'group': 'qwen36_hosts', 'port': 30000, 'metrics_port': 29000},
        {'group': 'qwen35_hosts', 'port': 30001, 'metrics_port': 29001}]}, GROUPS, WORKERS.get)
    assert plan['errors'] == []
    return plan['instances']


def test_stale_units_are_only_the_manifests_units_no_entry_plans():
    one = {'instances': instances()}
    owned_units = ['vllm-router-qwen36-hosts', 'vllm-router-old-hosts', 'vllm-router-qwen35-hosts']
    owned_paths = ['/etc/systemd/system/%s.service' % u for u in owned_units] + ['/opt/vllm-router']
    assert router_units.stale_units(owned_units, owned_paths, one['instances']) == [
        {'unit': 'vllm-router-old-hosts', 'path': '/etc/systemd/system/vllm-router-old-hosts.service'}]
    # a unit name the manifest does not hold at the collection's path is not the collection's
    assert router_units.stale_units(['vllm-router-old-hosts'], ['/opt/vllm-router'], one['instances']) == []
    assert router_units.stale_units(owned_units, owned_paths, []) == [
        {'unit': u, 'path': '/etc/systemd/system/%s.service' % u} for u in sorted(owned_units)]
    assert router_units.stale_units([], [], one['instances']) == []


def test_the_filter_reads_the_ownership_modules_result():
    owned = {'owned_units': ['vllm-router-gone-hosts', 'vllm-router-qwen36-hosts'],
             'owned_paths': ['/etc/systemd/system/vllm-router-gone-hosts.service',
                             '/etc/systemd/system/vllm-router-qwen36-hosts.service', '/var/lib/vllm-router']}
    assert router_stale_units(owned, instances()) == [
        {'unit': 'vllm-router-gone-hosts', 'path': '/etc/systemd/system/vllm-router-gone-hosts.service'}]
    assert router_stale_units({'owned_units': [], 'owned_paths': []}, instances()) == []
