# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy's rollout: its variables and its stop rule (pure functions, on the control node).

The rollout's variables are extra variables (play keywords cannot read the inventory): ``fleet_serial`` (hosts per
rolling batch: a number, a percentage, or a list of them, as Ansible's ``serial``), ``fleet_max_fail_percentage``
(stop once more than this share of the fleet failed), ``fleet_probe_per_group`` and ``fleet_warm_first_start``.
:func:`rollout_errors` checks them in stage 1, before any host changes (``validate.yml``, action
``fleet_check``); :func:`rollout_stop` is stage 4's rule (filter ``fleet_rollout_stop``).
"""

from __future__ import annotations

import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import as_bool, as_finite, as_int

# Ansible reads a percentage of serial as int(value without its %): a whole number ending in %.
PERCENT_RE = re.compile(r'^\s*(\d+)\s*%$')
BOOLEANS = ('fleet_probe_per_group', 'fleet_warm_first_start')
# Each rollout variable: (the environment variable read when the extra variable is not set, or None; the default).
ROLLOUT_DEFAULTS = {
    'fleet_serial': ('FLEET_SERIAL', '100%'),
    'fleet_max_fail_percentage': ('FLEET_MAX_FAIL_PERCENTAGE', '100'),
    'fleet_probe_per_group': (None, True),
    'fleet_warm_first_start': (None, True),
}


def _batch_problem(value):
    """Why one batch size of ``serial`` is not one (None when it is)."""
    if isinstance(value, bool):
        return 'is a boolean'
    match = PERCENT_RE.match(value) if isinstance(value, str) else None
    if match:
        return None if 0 < int(match.group(1)) <= 100 else 'is not a percentage in (0, 100]'
    number = as_int(value)
    return None if number is not None and number >= 1 else 'is neither a number of hosts >= 1 nor a percentage'


def rollout_errors(values):
    """One message per wrong rollout variable of ``values`` (``{name: value}``, the effective values)."""
    errors = []
    serial = values.get('fleet_serial')
    batches = serial if isinstance(serial, (list, tuple)) else [serial]
    for batch in batches if batches else [None]:
        problem = 'is empty' if batch is None else _batch_problem(batch)
        if problem:
            errors.append('fleet_serial=%r %s; use a number of hosts per batch (e.g. 2), a percentage ("25%%") or a '
                          'list of them ([1, "50%%"]), as -e fleet_serial=2' % (serial, problem))
            break
    share = as_finite(values.get('fleet_max_fail_percentage'))
    if isinstance(values.get('fleet_max_fail_percentage'), bool) or share is None or not 0 <= share <= 100:
        errors.append('fleet_max_fail_percentage=%r is not a number in 0..100; use the share of the fleet that may fail '
                      'before the rollout stops, e.g. -e fleet_max_fail_percentage=25'
                      % (values.get('fleet_max_fail_percentage'),))
    for name in BOOLEANS:
        if name in values and not isinstance(as_bool(values[name]), bool):
            errors.append('%s=%r is not a boolean; use true or false, as -e %s=false' % (name, values[name], name))
    return errors


def rollout_stop(results, max_fail_percentage, host):
    """Stage 4's rule before ``host``'s rollout: ``{'stopped', 'failed', 'finding'}``. ``results``: every host of the
    play's result (``fleet_result``, None where there is none); the rollout stops once the failed hosts are more
    than ``max_fail_percentage`` of them, and ``finding`` says so for ``host``."""
    results = list(results or [])
    failed = sum(1 for result in results if isinstance(result, dict) and result.get('outcome') == 'failed')
    share = as_finite(max_fail_percentage)
    share = 100.0 if share is None else share
    stopped = failed * 100 > share * len(results)
    finding = {'cause': 'rollout_stopped',
               'message': 'host %s: not deployed, the rollout stopped after %d failed host(s) of %d (more than '
                          'fleet_max_fail_percentage=%s)' % (host, failed, len(results), max_fail_percentage)}
    return {'stopped': stopped, 'failed': failed, 'finding': finding if stopped else None}
