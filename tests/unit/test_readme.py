# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""README.md is the operator's book: its first screen says where install, the first fleet, day two and
troubleshooting are; the set-up of a fresh machine is two commands; the first fleet's inventory is the file the
commands use; every filter and every cause of the journal explainer is listed."""

from __future__ import annotations

import glob
import os
import re

import yaml

from fleet_collection import REPO_ROOT

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size import journal_diagnose

FIRST_SCREEN = 30   # lines


def readme():
    with open(os.path.join(REPO_ROOT, 'README.md'), encoding='utf-8') as handle:
        return handle.read()


def section(text, title):
    start = text.index('\n## %s\n' % title)
    end = text.find('\n## ', start + 1)
    return text[start:end if end > 0 else len(text)]


def anchor(title):
    return '#' + re.sub(r'[^a-z0-9 -]', '', title.lower()).replace(' ', '-')


def test_the_first_screen_says_where_everything_is():
    text = readme()
    first = '\n'.join(text.splitlines()[:FIRST_SCREEN])
    headings = re.findall(r'^## (.+)$', text, re.M)
    for title in ('Quick start', 'Install', 'Your first fleet', 'Day two', 'Upgrades and rollback', 'Removal',
                  'Troubleshooting by symptom', 'Monitoring'):
        assert title in headings, title
        assert '](%s)' % anchor(title) in first, title


def test_a_fresh_machine_is_set_up_with_make_deploy_and_make_test():
    blocks = re.findall(r'^```sh\n(.*?)^```', section(readme(), 'Quick start'), re.S | re.M)
    commands = [re.sub(r'\s+#.*$', '', line).strip() for line in blocks[0].splitlines()]
    assert [c for c in commands if c] == ['make deploy', 'make test']


def test_the_first_fleet_shows_the_inventory_its_commands_use():
    text = section(readme(), 'Your first fleet')
    shown = re.search(r'```yaml\n(.*?)\n *```', text, re.S).group(1)
    with open(os.path.join(REPO_ROOT, 'inventories', 'first-fleet', 'hosts.yml'), encoding='utf-8') as handle:
        assert [line[3:] for line in shown.splitlines()] == handle.read().rstrip('\n').splitlines()
    assert 'make validate INVENTORY=inventories/first-fleet' in text
    assert 'playbooks/deploy.yml' in text


def test_every_filter_is_listed():
    text = readme()
    filters = text[text.index('\n### Filters\n'):]
    filters = filters[:filters.index('\n### ', 1)]
    listed = re.findall(r'^\| `([a-z_]+)` \| ', filters, re.M)
    names = []
    for path in glob.glob(os.path.join(REPO_ROOT, 'plugins', 'filter', '*.yml')):
        with open(path, encoding='utf-8') as handle:
            names.append(yaml.safe_load(handle)['DOCUMENTATION']['name'])
    assert sorted(listed) == sorted(names)


def test_troubleshooting_names_every_cause_of_the_journal_explainer():
    text = section(readme(), 'Troubleshooting by symptom')
    causes = {row[0] for row in journal_diagnose._TABLE}  # pylint: disable=protected-access
    assert len(causes) > 30
    missing = sorted(c for c in causes if '`%s`' % c not in text)
    assert not missing, missing
