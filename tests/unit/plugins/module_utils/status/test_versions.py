# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reader of installed versions, run for real with this Python (as the roles and service_info run it)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.versions import FilterModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.versions import versions_argv


def test_prints_installed_versions_and_null_for_missing_ones():
    argv = versions_argv(sys.executable, ['pytest', 'ansible-core', 'no-such-distribution-xyz'])
    out = subprocess.run(argv, stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    assert json.loads(out) == {'pytest': importlib.metadata.version('pytest'),
                               'ansible-core': importlib.metadata.version('ansible-core'),
                               'no-such-distribution-xyz': None}


def test_the_filter_gives_the_same_argv():
    versions_filter = FilterModule().filters()['versions_argv']
    assert versions_filter('/opt/vllm/venv/bin/python', ['vllm', 'lmcache']) == versions_argv(
        '/opt/vllm/venv/bin/python', ['vllm', 'lmcache'])
    with pytest.raises(AnsibleFilterError, match='a list of distribution names'):
        versions_filter('/opt/vllm/venv/bin/python', 'vllm')
