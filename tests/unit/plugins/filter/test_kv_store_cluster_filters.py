# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the cluster filters of plugins/filter/kv_pool.py (roles/kv_store/tasks/cluster.yml) and their
documentation files."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.kv_pool import FilterModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks

FILTER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))), 'plugins', 'filter')
FILTERS = FilterModule().filters()
SETTINGS = {'kv_store_password': 'correct-horse-battery-staple', 'kv_store_cluster': True,
            'kv_store_cluster_admin_password': 'cluster-admin-password-0123'}


@pytest.mark.parametrize('name', ['kv_store_cluster_create', 'kv_store_cluster_problem'])
def test_documented(name):
    with open(os.path.join(FILTER_DIR, '%s.yml' % name), encoding='utf-8') as handle:
        assert yaml.safe_load(handle)['DOCUMENTATION']['name'] == name
    assert name in FILTERS


def test_the_create_filter_is_the_plans_command():
    plans = [ks.plan_store('kv-%d' % i, dict(SETTINGS, kv_store_port=7000 + i), None) for i in range(3)]
    assert FILTERS['kv_store_cluster_create'](plans) == ks.cluster_create(plans)
    assert FILTERS['kv_store_cluster_create'](plans)['argv'][-5:] == ['create', '127.0.0.1:7000', '127.0.0.1:7001',
                                                                      '127.0.0.1:7002', '--cluster-yes']
    with pytest.raises(AnsibleFilterError, match='expects a list of store plans'):
        FILTERS['kv_store_cluster_create']({'host': 'kv-0'})


def test_the_problem_filter():
    assert FILTERS['kv_store_cluster_problem']('cluster_state:ok\ncluster_slots_assigned:16384\n'
                                               'cluster_known_nodes:3\n', 3) == ''
    assert FILTERS['kv_store_cluster_problem']('cluster_state:fail\n', 3).startswith('the cluster is not formed')
