# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installing belongs to the commands that say so: `make setup`, `make validate`, `make plan`, `make status`
(and every other day-two target) run no script that installs a system package or refreshes the package lists,
and status.yml (read-only) never refreshes a store host's package lists."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from fleet_collection import REPO_ROOT

INSTALLS = re.compile(r'^\s*[^#\n]*\b(apt-get|apt|dnf|yum)\s+(-\S+\s+)*(install|update|upgrade)\b', re.M)


def makefile_rules():
    """{target: (dependencies, [recipe lines])} of the Makefile, with the DAY_TWO pattern rule expanded."""
    text = open(os.path.join(REPO_ROOT, 'Makefile')).read()
    day_two = re.search(r'^DAY_TWO := (.*)$', text, re.M).group(1).split()
    rules, current = {}, None
    for line in text.splitlines():
        match = re.match(r'^([$()A-Za-z_ -]+):(?!=)\s*(.*)$', line)
        if match and not line.startswith('\t'):
            targets = day_two if match.group(1).strip() == '$(DAY_TWO)' else match.group(1).split()
            current = [(t, match.group(2).split()) for t in targets]
            for target, deps in current:
                rules[target] = (deps, [])
        elif line.startswith('\t') and current:
            for target, _deps in current:
                rules[target][1].append(line.strip())
    return rules


def scripts_of(target, rules, seen=None):
    seen = set() if seen is None else seen
    if target in seen or target not in rules:
        return set()
    seen.add(target)
    deps, recipe = rules[target]
    found = set(re.findall(r'scripts/[\w.-]+\.sh', ' '.join(recipe)))
    for dep in deps:
        found |= scripts_of(dep, rules, seen)
    return found


@pytest.mark.parametrize('target', ['setup', 'validate', 'plan', 'status', 'monitoring', 'gpus', 'lint', 'sanity'])
def test_a_target_that_does_not_say_so_installs_no_system_package(target):
    rules = makefile_rules()
    assert target in rules
    for script in sorted(scripts_of(target, rules)):
        text = open(os.path.join(REPO_ROOT, script)).read()
        assert not INSTALLS.search(text), '%s (make %s) installs: %s' % (script, target, INSTALLS.search(text).group(0))


def test_the_tests_packages_are_installed_by_the_test_targets():
    rules = makefile_rules()
    assert 'scripts/setup-test-packages.sh' in scripts_of('unit', rules)
    assert 'bash scripts/setup-test-packages.sh' in open(os.path.join(REPO_ROOT, 'scripts', 'test.sh')).read()


def test_status_never_refreshes_a_store_hosts_package_lists():
    status = yaml.safe_load(open(os.path.join(REPO_ROOT, 'playbooks', 'status.yml')))
    includes = [t for play in status for t in play.get('tasks', [])
                if (t.get('ansible.builtin.include_role') or {}).get('tasks_from') == 'plan'
                and (t.get('ansible.builtin.include_role') or {}).get('name') == 'lmcache_vllm.fleet.kv_store']
    assert includes and all(t.get('vars', {}).get('__kv_store_read_only') is True for t in includes)
    plan = yaml.safe_load(open(os.path.join(REPO_ROOT, 'roles', 'kv_store', 'tasks', 'plan.yml')))
    refresh = [t for t in plan if 'ansible.builtin.apt' in t]
    assert refresh and all('not (__kv_store_read_only | default(false) | bool)' in t['when'] for t in refresh)
