# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of benchmarks/plan_benchmark.py: the generated inventory, the floor and the ratios."""

from __future__ import absolute_import, division, print_function

import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.host_plan import plan_host


@pytest.fixture(scope="module")
def bench(repo_script):
    return repo_script("benchmarks/plan_benchmark.py")


def test_generated_hosts_are_valid_and_never_reachable(bench):
    hosts = bench.inventory(8)['all']['children']['vllm_hosts']['hosts']
    assert len(hosts) == 8
    for name, host_vars in hosts.items():
        assert host_vars['ansible_ssh_executable'] == '/nonexistent/ssh'
        assert os.path.isfile(os.path.join(host_vars['vllm_server_model_config'], 'config.json'))
        settings = {k: v for k, v in host_vars.items() if k.startswith(('vllm_server_', 'lmcache_server_'))}
        settings.pop('vllm_server_model_config')
        assert plan_host(name, settings)['errors'] == []
    assert {h['vllm_server_model'] for h in hosts.values()} == {s['vllm_server_model'] for s in bench.SHAPES}


def test_the_floor_writes_the_plans_five_files_one_task_each(bench):
    tasks = bench.FLOOR_PLAYBOOK[0]['tasks']
    assert [t['ansible.builtin.copy']['dest'].rsplit('/', 1)[1] for t in tasks] == list(bench.FLOOR_FILES)
    plan = plan_host('h', {'vllm_server_model': 'x/y'})
    written = sorted(os.path.basename(item['dest']) for item in plan['rendered']) + ['plan.json']
    assert sorted(bench.FLOOR_FILES) == sorted(written)


def test_ratio_and_table(bench):
    row = {'hosts': 10, 'plan_wall_s': 3.0, 'plan_cpu_s': 1.0, 'validate_wall_s': 2.0, 'floor_wall_s': 30.0}
    for key in ('plan_wall_s', 'plan_cpu_s', 'validate_wall_s', 'floor_wall_s'):
        row[key.replace('_s', '_s_per_host')] = bench.per_host(row, key, 10)
    row.update(bench.ratios(row))
    assert row['plan_over_floor'] == 0.1 and row['plan_wall_s_per_host'] == 0.3
    assert bench.ratios({'plan_wall_s': 3.0}) == {}
    table = bench.markdown([row], 5)
    assert '| 10 | 3.0 | 0.3 | 0.1 | 2.0 | 0.2 | 30.0 | 3.0 | 0.1 |' in table
