# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/vars/fleet_host.yml (how status, remove and monitoring see a host) falls back to the
roles' own defaults: each ``{{ <role variable> | default(<value>) }}`` there must name the value
the role's defaults/main.yml gives that variable."""

from __future__ import annotations

import ast
import os
import re

import yaml

from fleet_collection import REPO_ROOT

FALLBACK_RE = re.compile(r"^\{\{ (?P<var>(?:vllm|lmcache)_server_\w+) \| default\((?P<value>[^()]*)\) \}\}$")


def load(relpath):
    with open(os.path.join(REPO_ROOT, relpath), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def test_fallbacks_are_the_roles_defaults():
    view = load('playbooks/vars/fleet_host.yml')
    defaults = dict(load('roles/lmcache_server/defaults/main.yml'))
    defaults.update(load('roles/vllm_server/defaults/main.yml'))
    checked = []
    for name, expression in view.items():
        match = FALLBACK_RE.match(str(expression))
        if not match:
            continue
        var, value = match.group('var'), ast.literal_eval(match.group('value'))
        assert var in defaults, '%s: %s is not a role variable' % (name, var)
        assert defaults[var] == value, '%s falls back to %r, the role default of %s is %r' % (name, value, var, defaults[var])
        checked.append(var)
    assert len(checked) >= 15, checked


def test_every_view_variable_is_private():
    assert all(name.startswith('__fleet_host_') for name in load('playbooks/vars/fleet_host.yml'))
