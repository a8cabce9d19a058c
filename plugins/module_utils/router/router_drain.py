# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which routers a serving host is a worker of (the rolling restart of ``deploy.yml`` drains it from them).

``targets(host, plans)`` takes the plans of every router host (``router_config.plan_router``, made from the
inventory) and returns, for the serving host ``host``, one entry per router instance whose workers include it::

    [{'router_host', 'router', 'router_url', 'worker_url', 'wait_idle'}, ...]

``router_url`` is the router's own address on its host (loopback for a wildcard bind): the administration calls
run there. ``wait_idle`` (seconds) is set on the last entry only: once the host is out of every router, wait at
most that long for the requests it runs to end (the largest ``vllm_router_drain_timeout`` of those routers).
A host no router routes to gets ``[]``.

``put_back(outcome, drained, before, restore)`` decides whether the host goes back into its routers once its
restart is over (deployed, or rolled back).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.parsing.convert_bool import boolean


def targets(host, plans):
    """The routers ``host`` is a worker of (see the module docstring)."""
    out = []
    for plan in plans or []:
        for instance in plan.get('instances') or []:
            for worker in instance.get('workers') or []:
                if worker.get('host') == host:
                    out.append({'router_host': plan['host'], 'router': instance['service_name'],
                                'router_url': instance['url'], 'worker_url': worker['url'],
                                'wait_idle': 0, 'drain_timeout': instance.get('drain_timeout') or 0})
    if out:
        out[-1]['wait_idle'] = max(t['drain_timeout'] for t in out)
    for target in out:
        del target['drain_timeout']
    return out


def describe(host, found):
    """One line naming the routers ``host`` is taken out of (or that it is in none)."""
    if not found:
        return 'host %s: no router routes to it, nothing to drain' % host
    return 'host %s: worker %s of %s' % (host, found[0]['worker_url'], ', '.join(
        '%s on %s' % (t['router'], t['router_host']) for t in found))


def put_back(outcome, drained=False, before=None, restore=None):
    """Whether the host goes back into its routers after stage 4 of deploy.yml: a deployed host (it answers /health,
    also one a former run left out), or a host taken out of its routers (``drained``) whose vLLM ran before the
    deploy (``before``: the state read before it, ``vllm_active``) and came back after a rollback (``restore``: the
    registered restart of the previous vLLM, not ``failed``)."""
    if outcome == 'deployed':
        return True
    was_active = boolean((before or {}).get('vllm_active', False), strict=False)
    restore_failed = boolean((restore or {}).get('failed', False), strict=False)
    return boolean(drained, strict=False) and was_active and not restore_failed
