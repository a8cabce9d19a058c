# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one unit builder (shared/systemd_unit.py): its head, the caller's [Service] lines, its tail, read back with
the tests' own systemd reader (tests/systemd_unit.py)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.systemd_unit import unit_file
from systemd_unit import parse_unit, values


def test_a_unit_has_the_callers_service_lines_between_the_shared_head_and_tail():
    lines = unit_file('KV store %%i', 'man:x(1)', ['Type=exec', 'ExecStart=/bin/x'], after=['a.service'],
                      requires=['b.service'], start_limit=(600, 3))
    unit = parse_unit('\n'.join(lines) + '\n')
    assert values(unit, 'Unit', 'After') == ['network-online.target a.service']
    assert values(unit, 'Unit', 'Requires') == ['b.service'] and values(unit, 'Unit', 'PartOf') == ['b.service']
    assert values(unit, 'Unit', 'StartLimitIntervalSec') == ['600'] and values(unit, 'Unit', 'StartLimitBurst') == ['3']
    assert values(unit, 'Service', 'ExecStart') == ['/bin/x']
    assert values(unit, 'Install', 'WantedBy') == ['multi-user.target']
    assert list(unit) == ['Unit', 'Service', 'Install']


def test_without_requires_nothing_is_required_and_the_start_limit_defaults():
    unit = parse_unit('\n'.join(unit_file('d', 'man:x(1)', [])) + '\n')
    assert values(unit, 'Unit', 'Requires') == [] and values(unit, 'Unit', 'StartLimitBurst') == ['5']
    assert values(unit, 'Unit', 'After') == ['network-online.target']
