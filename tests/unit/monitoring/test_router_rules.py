# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The routers' rules (vllm_router.rules.yml, which monitoring.yml copies beside router_targets.json) pass `promtool
check rules` and `promtool test rules` (router_rules_test.yml): every recorded series is tested, every alert fires
once and stays silent once and has a severity and a runbook naming a playbook of the collection; the recorded names
follow level:metric:operations and keep the scrape job and the user's labels."""

from __future__ import annotations

import os
import re
import subprocess

import yaml

from fleet_collection import REPO_ROOT
from prometheus_tools import rules_in

RULES = os.path.join(REPO_ROOT, 'playbooks', 'files', 'prometheus', 'vllm_router.rules.yml')
HERE = os.path.dirname(os.path.abspath(__file__))


def rules():
    return rules_in(RULES)


def rule_tests():
    with open(os.path.join(HERE, 'router_rules_test.yml'), encoding='utf-8') as handle:
        return yaml.safe_load(handle)['tests']


def test_promtool_checks_and_tests_the_router_rules(promtool):
    checked = subprocess.run([promtool, 'check', 'rules', RULES], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert 'SUCCESS: %d rules found' % len(rules()) in checked.stdout + checked.stderr
    proc = subprocess.run([promtool, 'test', 'rules', 'router_rules_test.yml'], cwd=HERE, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = {t['expr'] for case in rule_tests() for t in case.get('promql_expr_test', [])}
    assert tested == {rule['record'] for rule in rules() if 'record' in rule}


def test_every_router_alert_fires_once_stays_silent_once_and_names_a_playbook():
    fired, silent = set(), set()
    for case in rule_tests():
        for check in case.get('alert_rule_test', []):
            (fired if check['exp_alerts'] else silent).add(check['alertname'])
    alerts = [rule for rule in rules() if 'alert' in rule]
    assert {rule['alert'] for rule in alerts} == {'RouterDown', 'RouterNoHealthyWorker', 'RouterWorkersUnhealthy'}
    assert fired == silent == {rule['alert'] for rule in alerts}
    for rule in alerts:
        assert rule['labels']['severity'] in ('critical', 'warning'), rule['alert']
        assert {'summary', 'description', 'runbook'} <= set(rule['annotations']), rule['alert']
        playbooks = re.findall(r'playbooks/(\w+)\.yml', rule['annotations']['runbook'])
        assert playbooks, rule['alert']
        assert all(os.path.isfile(os.path.join(REPO_ROOT, 'playbooks', name + '.yml')) for name in playbooks)


def test_router_recorded_names_follow_prometheus_naming_and_keep_the_job():
    for rule in rules():
        if 'record' in rule:
            level, metric, operations = rule['record'].split(':')
            assert level == 'host' and metric and operations, rule['record']
            assert ' by (' not in rule['expr'], rule['record']
            for labels in re.findall(r'without \(([^)]*)\)', rule['expr']):
                assert not {'job', 'host', 'router', 'model_group'} & {n.strip() for n in labels.split(',')}
