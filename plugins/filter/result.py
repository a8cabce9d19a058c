# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter that records a serving host's result of a deploy, the public host fact ``fleet_result``.

The contract lives in module_utils/report/host_result.py. Documentation: ``plugins/filter/fleet_result.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import rollout
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import host_result


def fleet_result(previous, host, stage, outcome, **learnt):
    """``previous`` (none: a new result) with what ``stage`` learnt about ``host``."""
    known = {'findings', 'plan', 'block_size', 'probe', 'gpus', 'services', 'warm_start', 'confirmation'}
    unknown = sorted(set(learnt) - known)
    if unknown:
        raise AnsibleFilterError('fleet_result: unknown argument(s) %s' % ', '.join(unknown))
    if previous is not None and not isinstance(previous, dict):
        raise AnsibleFilterError('fleet_result expects the previous result (a dict) or none, got %r' % (previous,))
    try:
        return host_result.record(previous, host, stage, outcome, **learnt)
    except host_result.ResultError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def fleet_rollout_stop(results, host, max_fail_percentage):
    """Stage 4's stop rule before ``host``'s rollout, from every play host's result (none where there is none)."""
    if isinstance(results, (str, dict)) or not hasattr(results, '__iter__'):
        raise AnsibleFilterError('fleet_rollout_stop expects the list of the play hosts\' results')
    return rollout.rollout_stop(results, max_fail_percentage, host)


class FilterModule:
    """lmcache_vllm.fleet deploy results."""

    def filters(self):
        return {'fleet_result': fleet_result, 'fleet_rollout_stop': fleet_rollout_stop}
