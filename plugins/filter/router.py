# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the routers: their status (plugins/module_utils/router/router_status.py), monitoring targets, stale units and
the put-back decision of a drained host (plugins/module_utils/router/router_drain.py)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import (
    router_drain,
    router_monitoring,
    router_status,
    router_units,
)


def router_status_rows(instances, host, states, metrics):
    return router_status.rows(host, instances, states or [], metrics or [])


def router_status_line(item):
    return router_status.line(item)


def router_file_sd(routers, labels=None):
    return router_monitoring.file_sd(routers, labels)


def router_stale_units(owned, instances):
    return router_units.stale_units(owned.get('owned_units'), owned.get('owned_paths'), instances)


def router_put_back(outcome, drained=False, before=None, restore=None):
    return router_drain.put_back(outcome, drained, before, restore)


class FilterModule:
    """lmcache_vllm.fleet router filters."""

    def filters(self):
        return {'router_status_rows': router_status_rows, 'router_status_line': router_status_line,
                'router_file_sd': router_file_sd, 'router_stale_units': router_stale_units,
                'router_put_back': router_put_back}
