# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The recording and alerting rules pass `promtool check rules` and `promtool test rules` (rules_test.yml), every
alert has a promtool test in which it fires and one in which it stays silent, and a runbook naming a playbook of
the collection; the recorded names follow Prometheus's level:metric:operations and keep the scrape job and the
user's labels; the Grafana dashboard shows every recorded series (the routers' too), filtered by its host and model variables.

promtool comes from Debian's prometheus package (scripts/setup-prometheus.sh); scripts/test.sh sets
FLEET_REQUIRE_PROMTOOL=1 so that a missing promtool fails there instead of skipping."""

from __future__ import annotations

import json
import os
import re
import subprocess

import yaml

from fleet_collection import REPO_ROOT
from prometheus_tools import rules_in

RULES = os.path.join(REPO_ROOT, 'playbooks', 'files', 'prometheus', 'lmcache_vllm_fleet.rules.yml')
ROUTER_RULES = os.path.join(REPO_ROOT, 'playbooks', 'files', 'prometheus', 'vllm_router.rules.yml')
DASHBOARD = os.path.join(REPO_ROOT, 'playbooks', 'files', 'grafana', 'lmcache_vllm_fleet.json')
HERE = os.path.dirname(os.path.abspath(__file__))
LEVELS = ('host', 'model', 'job')


def rules():
    return rules_in(RULES)


def recorded(path=RULES):
    return [rule['record'] for rule in rules_in(path) if 'record' in rule]


def alerts():
    return [rule for rule in rules() if 'alert' in rule]


def rule_tests():
    with open(os.path.join(HERE, 'rules_test.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)['tests']


def dashboard():
    with open(DASHBOARD, encoding='utf-8') as handle:
        return json.load(handle)


def test_promtool_checks_the_rules(promtool):
    proc = subprocess.run([promtool, 'check', 'rules', RULES], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'SUCCESS: %d rules found' % len(rules()) in proc.stdout + proc.stderr


def test_promtool_unit_tests_of_the_rules(promtool):
    proc = subprocess.run([promtool, 'test', 'rules', 'rules_test.yml'], cwd=HERE, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = {t['expr'] for case in rule_tests() for t in case.get('promql_expr_test', [])}
    assert tested == set(recorded()), 'every recorded series has a promtool test'


def test_every_alert_fires_once_and_stays_silent_once():
    fired, silent = set(), set()
    for case in rule_tests():
        for check in case.get('alert_rule_test', []):
            (fired if check['exp_alerts'] else silent).add(check['alertname'])
    names = {rule['alert'] for rule in alerts()}
    assert len(names) >= 10
    assert fired == names, 'alerts without a test in which they fire: %s' % sorted(names - fired)
    assert silent == names, 'alerts without a test in which they stay silent: %s' % sorted(names - silent)


def test_every_alert_has_a_severity_and_a_runbook_naming_a_playbook():
    for rule in alerts():
        assert rule['labels']['severity'] in ('critical', 'warning'), rule['alert']
        assert {'summary', 'description', 'runbook'} <= set(rule['annotations']), rule['alert']
        playbooks = re.findall(r'playbooks/(\w+)\.yml', rule['annotations']['runbook'])
        assert playbooks, '%s: the runbook names no playbook' % rule['alert']
        for name in playbooks:
            assert os.path.isfile(os.path.join(REPO_ROOT, 'playbooks', name + '.yml')), (rule['alert'], name)


def test_recorded_names_follow_prometheus_naming_and_keep_the_job_and_user_labels():
    for rule in rules():
        if 'record' not in rule:
            continue
        level, metric, operations = rule['record'].split(':')
        assert level in LEVELS and metric and operations, rule['record']
        # an aggregation names what it drops (without), so the scrape job and the user's labels stay
        assert ' by (' not in rule['expr'], rule['record']
        dropped = set(re.findall(r'without \(([^)]*)\)', rule['expr']))
        for labels in dropped:
            names = {name.strip() for name in labels.split(',')}
            assert 'job' not in names and 'service' not in names, rule['record']
            assert ('host' in names) == (level != 'host'), rule['record']


def test_the_dashboard_shows_every_recorded_series_by_host_and_model():
    board = dashboard()
    variables = {v['name']: v for v in board['templating']['list']}
    assert {'datasource', 'host', 'model'} <= set(variables)
    assert variables['host']['includeAll'] and variables['model']['multi']
    exprs = [t['expr'] for panel in board['panels'] for t in panel['targets']]
    shown = {re.match(r'[\w:]+', expr).group(0) for expr in exprs}
    # the ":ratio" of the job (since each server started) is for queries, the panels show the running ones
    every = recorded() + recorded(ROUTER_RULES)
    assert shown - {'up'} == {r for r in every if not (r.startswith('job:') and r.endswith(':ratio'))}
    up = [expr for expr in exprs if expr.startswith('up{')]
    assert up and all('router' in expr for expr in up), 'the routers are among the services shown up'
    assert 'router' in variables['host']['query']['query'], 'a router host can be chosen'
    for expr in exprs:
        if expr.startswith('host:'):
            assert 'host=~"$host"' in expr, expr
        # a router's series carry its model_group, not a served model
        if expr.startswith(('host:vllm', 'host:lmcache', 'model:')) and not expr.startswith('host:vllm_router'):
            assert 'model=~"$model"' in expr, expr
    assert all(t['datasource']['uid'] == '${datasource}' for panel in board['panels'] for t in panel['targets'])
    titles = [panel['title'] for panel in board['panels']]
    # the panels of vLLM's own example dashboard, then LMCache's and the KV stores'
    assert titles[:7] == ['Services up', 'Running and waiting requests', 'Queue time, p95', 'KV cache usage',
                          'Token throughput', 'Time to first token, p50, p95 and p99',
                          'Inter-token latency, p50, p95 and p99']
    assert len({panel['id'] for panel in board['panels']}) == len(board['panels'])
