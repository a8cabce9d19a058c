# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recording rules pass `promtool check rules` and `promtool test rules` (rules_test.yml: hit ratios, TTFT
p50/p95 and the running batch on two hosts), and the Grafana dashboard shows exactly the series they record.

promtool comes from Debian's prometheus package (scripts/setup-prometheus.sh); scripts/test.sh sets
FLEET_REQUIRE_PROMTOOL=1 so that a missing promtool fails there instead of skipping."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from fleet_collection import REPO_ROOT
from prometheus_tools import prometheus_program

RULES = os.path.join(REPO_ROOT, 'playbooks', 'files', 'prometheus', 'lmcache_vllm_fleet.rules.yml')
DASHBOARD = os.path.join(REPO_ROOT, 'playbooks', 'files', 'grafana', 'lmcache_vllm_fleet.json')
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(name='promtool')
def promtool_fixture():
    return prometheus_program('promtool')


def recorded():
    with open(RULES, encoding='utf-8') as handle:
        return [rule['record'] for group in yaml.safe_load(handle)['groups'] for rule in group['rules']]


def test_promtool_checks_the_rules(promtool):
    proc = subprocess.run([promtool, 'check', 'rules', RULES], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'SUCCESS: %d rules found' % len(recorded()) in proc.stdout + proc.stderr


def test_promtool_unit_tests_of_the_rules(promtool):
    proc = subprocess.run([promtool, 'test', 'rules', 'rules_test.yml'], cwd=HERE, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(HERE, 'rules_test.yml'), encoding='utf-8') as handle:
        tested = {t['expr'] for case in yaml.safe_load(handle)['tests'] for t in case['promql_expr_test']}
    assert tested == set(recorded()), 'every recorded series has a promtool test'


def test_the_dashboard_shows_the_recorded_series():
    with open(DASHBOARD, encoding='utf-8') as handle:
        dashboard = json.load(handle)
    exprs = [t['expr'] for panel in dashboard['panels'] for t in panel['targets']]
    # the ":total" ratios (since each server started) are for queries, the panels show the running ones
    assert sorted(exprs) == sorted(r for r in recorded() if not r.endswith(':total'))
    assert all(t['datasource']['uid'] == '${datasource}' for panel in dashboard['panels'] for t in panel['targets'])
    titles = [panel['title'] for panel in dashboard['panels']]
    assert titles == ['LMCache lookup hit ratio', 'vLLM external prefix cache hit ratio',
                      'Time to first token, p50 and p95', 'Running batch', 'KV store memory used / maxmemory',
                      'KV store keyspace hit ratio', 'KV store evictions']
