# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus file_sd targets of the routers' metrics endpoints (``monitoring.yml``), from the router plans."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses


def file_sd(routers, labels=None):
    """``{'targets', 'skipped'}`` of ``routers`` (``[{host, address, metrics_bind, instances}]``).

    A router whose metrics listen on loopback (the default) cannot be scraped from another machine: it is named in
    ``skipped`` with the variable to change."""
    targets, skipped = [], []
    for router in routers or []:
        bind = str(router.get('metrics_bind') or '')
        for instance in router.get('instances') or []:
            if addresses.is_loopback(bind):
                skipped.append('host %s: the router %s serves its metrics on loopback (vllm_router_metrics_bind=%s); '
                               'set vllm_router_metrics_bind (with vllm_router_allow_network) to scrape it'
                               % (router['host'], instance['service_name'], bind))
                continue
            address = router.get('address') or router['host'] if addresses.is_wildcard(bind) else bind
            target_labels = dict(labels or {})
            target_labels.update({'host': router['host'], 'service': 'router', 'model_group': instance['group'],
                                  'router': instance['service_name']})
            targets.append({'targets': ['%s:%d' % (addresses.url_host(address), instance['metrics_port'])],
                            'labels': target_labels})
    return {'targets': targets, 'skipped': skipped}
