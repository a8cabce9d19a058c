# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The counting rules of benchmarks/layout_measures.py (docs/layout.md)."""

from __future__ import annotations

import ast
import textwrap

import pytest

SOURCE = textwrap.dedent('''\
    """Module docstring,
    two lines."""
    DOCUMENTATION = r"""
    module: x
    """

    # a comment


    def short():
        """One line."""
        return 1


    def long_one():
    %s
    ''') % '\n'.join('    x%d = %d' % (i, i) for i in range(61))


@pytest.fixture(scope='module')
def measures(repo_script):
    return repo_script('benchmarks/layout_measures.py')


def test_code_lines_leave_out_docstrings_comments_and_documentation(measures):
    tree = ast.parse(SOURCE)
    # def short, return 1, def long_one and its 61 assignments
    assert measures.code_lines(SOURCE, tree) == 64


def test_long_functions_over_the_limit(measures):
    tree = ast.parse(SOURCE)
    assert measures.long_functions('x.py', tree) == [('x.py:15 long_one', 62)]
    assert measures.long_functions('x.py', tree, limit=62) == []


@pytest.mark.parametrize('left,right,counted', [
    ('plugins/module_utils/a.py', 'plugins/module_utils/b.py', True),
    ('tests/unit/x.py', 'plugins/modules/y.py', True),
    ('tests/real/helpers.py', 'benchmarks/probe_benchmark.py', True),
    ('tests/unit/x.py', 'tests/real/y.py', False),
    ('benchmarks/a.py', 'benchmarks/b.py', False),
])
def test_pairs_that_count(measures, left, right, counted):
    assert measures._touches(left, right) is counted  # pylint: disable=protected-access


def test_the_report_of_this_checkout_runs(measures):
    data = measures.measure(measures.REPO)
    assert data['jinja_statement_lines'] == sum(data['jinja_statement_lines_by_file'].values())
    assert all(length > 60 for _where, length in data['functions_over_60_lines'])
    assert 'functions in plugins/ over 60 lines' in measures.report(data)


@pytest.mark.parametrize('task,path,enters', [
    ({'ansible.builtin.include_role': {'name': 'lmcache_vllm.fleet.vllm_server', 'tasks_from': 'probe'}},
     'playbooks/tasks/x.yml', True),
    ({'ansible.builtin.include_role': {'name': 'lmcache_vllm.fleet.vllm_server', 'tasks_from': 'install'}},
     'playbooks/tasks/x.yml', False),
    ({'ansible.builtin.import_tasks': 'probe.yml'}, 'roles/vllm_server/tasks/main.yml', True),
    ({'ansible.builtin.include_tasks': 'probe.yml'}, 'roles/kv_store/tasks/main.yml', False),
])
def test_what_enters_the_probe(measures, task, path, enters):
    assert measures._enters_probe(task, path) is enters  # pylint: disable=protected-access


def test_the_issue_measures_of_this_checkout(measures):
    data = measures.measure(measures.REPO)
    assert any(entry.startswith('roles/vllm_server/tasks/main.yml') for entry in data['probe_entries'])
    assert all(name.startswith('__') for name in data['private_table_facts'])
    assert set(data['raw_reads_after_validation']) == set(measures.AFTER_VALIDATION)
    assert 'tasks entering roles/vllm_server/tasks/probe.yml' in measures.report(data)


def test_the_files_a_deploy_reads_follow_its_includes(measures):
    files = measures.deploy_files(measures.REPO)
    # deploy.yml imports validate.yml, which imports tasks/reach_and_claim.yml; stage 2 includes the probe role's task file
    assert {'playbooks/deploy.yml', 'playbooks/validate.yml', 'playbooks/tasks/reach_and_claim.yml',
            'roles/vllm_server/tasks/probe.yml', 'roles/kv_store/tasks/main.yml'} <= set(files)
    # remove.yml and the sandbox are no part of a deploy
    assert not any(f in files for f in ('playbooks/remove.yml', 'roles/vllm_router/tasks/remove.yml'))
