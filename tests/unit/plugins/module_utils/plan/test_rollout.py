# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy's rollout (module_utils/plan/rollout.py, the action fleet_check and the filter fleet_rollout_stop): its
variables checked before any host changes, and stage 4's stop rule."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.filter.result import FilterModule as Results
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import rollout

GOOD = {'fleet_serial': '100%', 'fleet_max_fail_percentage': '100', 'fleet_probe_per_group': True,
        'fleet_warm_first_start': 'false'}


@pytest.mark.parametrize('serial', [1, '2', '25%', ' 12%', [1, '50%', '100%'], 1000])
def test_serial_as_ansible_takes_it(serial):
    assert rollout.rollout_errors(dict(GOOD, fleet_serial=serial)) == []


@pytest.mark.parametrize('serial, problem', [
    (0, 'is neither a number of hosts >= 1 nor a percentage'),
    ('-2', 'is neither a number of hosts >= 1 nor a percentage'),
    ('0%', 'is not a percentage in (0, 100]'),
    ('150%', 'is not a percentage in (0, 100]'),
    ('12.5%', 'is neither a number of hosts >= 1 nor a percentage'),
    ([1, 'all'], 'is neither a number of hosts >= 1 nor a percentage'),
    ([], 'is empty'),
    (None, 'is empty'),
    (True, 'is a boolean'),
])
def test_a_wrong_serial_is_named_with_its_fix(serial, problem):
    errors = rollout.rollout_errors(dict(GOOD, fleet_serial=serial))
    assert len(errors) == 1 and problem in errors[0] and 'as -e fleet_serial=2' in errors[0]


@pytest.mark.parametrize('share', ['half', -1, 101, None, True, float('nan')])
def test_a_wrong_max_fail_percentage_is_named(share):
    errors = rollout.rollout_errors(dict(GOOD, fleet_max_fail_percentage=share))
    assert errors == ['fleet_max_fail_percentage=%r is not a number in 0..100; use the share of the fleet that may fail '
                      'before the rollout stops, e.g. -e fleet_max_fail_percentage=25' % (share,)]


def test_every_wrong_variable_at_once_and_booleans_as_yaml_reads_them():
    errors = rollout.rollout_errors({'fleet_serial': 'x', 'fleet_max_fail_percentage': 'y',
                                     'fleet_probe_per_group': 'maybe', 'fleet_warm_first_start': 'yes'})
    assert [e.split('=')[0] for e in errors] == ['fleet_serial', 'fleet_max_fail_percentage', 'fleet_probe_per_group']


def test_the_rollout_stops_once_more_than_the_share_failed():
    failed, deployed = {'outcome': 'failed'}, {'outcome': 'deployed'}
    # 1 of 4 failed is 25%: stops above a 20% share, goes on at 25% (more than the share stops it)
    assert rollout.rollout_stop([failed, deployed, None, None], 20, 'gpu-03')['stopped'] is True
    going_on = rollout.rollout_stop([failed, deployed, None, None], '25', 'gpu-03')
    assert going_on == {'stopped': False, 'failed': 1, 'finding': None}
    stopped = Results().filters()['fleet_rollout_stop']([failed, failed, None], 'gpu-03', 50)
    assert stopped['finding'] == {'cause': 'rollout_stopped', 'message': 'host gpu-03: not deployed, the rollout stopped '
                                  'after 2 failed host(s) of 3 (more than fleet_max_fail_percentage=50)'}
    # the default share (100) never stops: a failed fleet is still rolled out host by host
    assert rollout.rollout_stop([failed, failed], None, 'gpu-03')['stopped'] is False
    with pytest.raises(AnsibleFilterError, match="results"):
        Results().filters()['fleet_rollout_stop']('failed', 'gpu-03', 50)
