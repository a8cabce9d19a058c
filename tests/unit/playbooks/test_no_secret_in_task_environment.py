# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No task of the collection hands a secret to a command through ``environment:``: ansible-playbook -vvv prints a
task's environment in its EXEC line even under ``no_log`` (the store's password reaches redis-cli on its standard
input, ``--askpass``). Every task file of playbooks/ and roles/ is read, blocks included."""

from __future__ import annotations

import glob
import os
import re

import yaml

from fleet_collection import REPO_ROOT

SECRET = re.compile(r'password|passwd|secret|token|auth|health|cluster|api_key', re.IGNORECASE)


def tasks(items):
    for item in items or []:
        if not isinstance(item, dict):
            continue
        yield item
        for key in ('block', 'rescue', 'always', 'tasks', 'pre_tasks', 'post_tasks', 'handlers'):
            yield from tasks(item.get(key))


def task_files():
    patterns = ('playbooks/*.yml', 'playbooks/tasks/*.yml', 'roles/*/tasks/*.yml', 'roles/*/handlers/*.yml')
    for pattern in patterns:
        yield from sorted(glob.glob(os.path.join(REPO_ROOT, pattern)))


def test_no_task_passes_a_secret_in_its_environment():
    found = []
    for path in task_files():
        with open(path) as handle:
            data = yaml.safe_load(handle)
        for task in tasks(data if isinstance(data, list) else []):
            environment = task.get('environment')
            if environment is not None and SECRET.search(yaml.safe_dump(environment)):
                found.append('%s: %s' % (os.path.relpath(path, REPO_ROOT), task.get('name')))
    assert not found, found


def test_the_store_tasks_give_the_password_on_standard_input():
    with open(os.path.join(REPO_ROOT, 'roles', 'kv_store', 'tasks', 'service.yml')) as handle:
        ping = [t for t in tasks(yaml.safe_load(handle)) if 'PING' in t.get('name', '')][0]
    assert ping['ansible.builtin.command']['stdin'] == '{{ __kv_store_plan.health.stdin }}' and ping['no_log'] is True
