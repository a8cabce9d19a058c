# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Debian's prometheus and promtool for the tests (scripts/setup-prometheus.sh installs both).

A missing program skips the test, or fails it where scripts/test.sh sets FLEET_REQUIRE_PROMTOOL=1."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml


def prometheus_program(name):
    """The path of ``name`` (``promtool`` or ``prometheus``) on PATH; skips or fails the test without it."""
    found = shutil.which(name)
    if not found:
        if os.environ.get('FLEET_REQUIRE_PROMTOOL') == '1':
            pytest.fail('%s is missing: bash scripts/setup-prometheus.sh installs it' % name)
        pytest.skip('%s is missing (bash scripts/setup-prometheus.sh)' % name)
    return found


def rules_in(path):
    """Every rule (recording and alerting) of a Prometheus rules file, in the order of its groups."""
    with open(path, encoding='utf-8') as handle:
        return [rule for group in yaml.safe_load(handle)['groups'] for rule in group['rules']]
