# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status rows of a router host (``status.yml``): per router its unit state and each worker's state as the
router sees it (``vllm_router_worker_health`` of its Prometheus endpoint: 1 healthy, 0 taken out), and the
requests it routed to each (``vllm_router_processed_requests_total``)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import prometheus_text


def _worker_state(samples, url):
    health = prometheus_text.total(samples, 'vllm_router_worker_health', {'worker': url})
    if health is None:
        return 'unknown'
    return 'healthy' if health >= 1 else 'unhealthy'


def row(host, instance, active, metrics_text):
    """One router's row: host, router, state (routing, no healthy worker, down), listen, policy, workers, problems."""
    samples = prometheus_text.parse(metrics_text or '') if active == 'active' else []
    workers = []
    for worker in instance.get('workers') or []:
        requests = prometheus_text.total(samples, 'vllm_router_processed_requests_total', {'worker': worker['url']})
        workers.append({'host': worker['host'], 'url': worker['url'],
                        'state': _worker_state(samples, worker['url']) if samples else 'unknown',
                        'requests': int(requests) if requests is not None else None})
    problems = []
    if active != 'active':
        state = 'down'
        problems.append('host %s: the router %s is %s: clients of %s get no answer from it' % (
            host, instance['service_name'], active or 'unknown', instance['listen']))
    elif not samples:
        state = 'unanswered'
        problems.append('host %s: the router %s serves no metrics at %s' % (host, instance['service_name'],
                                                                            instance.get('metrics_url')))
    else:
        healthy = [w for w in workers if w['state'] == 'healthy']
        state = 'routing' if healthy else 'no healthy worker'
        problems += ['host %s: the router %s routes nothing to %s (its /health fails)' % (
            host, instance['service_name'], w['host']) for w in workers if w['state'] == 'unhealthy']
    return {'host': host, 'router': instance['service_name'], 'group': instance['group'], 'state': state,
            'listen': instance['listen'], 'policy': instance['policy'], 'workers': workers, 'problems': problems}


def rows(host, instances, states, metrics):
    """Rows of every router of a host from the registered loop results (``systemctl is-active``, the metrics)."""
    out = []
    for index, instance in enumerate(instances or []):
        state = (states[index] if index < len(states) else {}) or {}
        answer = (metrics[index] if index < len(metrics) else {}) or {}
        text = answer.get('content') if answer.get('status') == 200 else None
        out.append(row(host, instance, (state.get('stdout') or 'unknown').strip(), text))
    return out


def line(item):
    """One line of a row."""
    workers = ', '.join('%s %s%s' % (w['host'], w['state'], '' if w['requests'] is None else
                                     ' (%d requests)' % w['requests']) for w in item['workers'])
    return '%s: %s on %s (%s): %s; workers: %s' % (
        item['host'], item['router'], item['listen'], item['policy'], item['state'], workers)
