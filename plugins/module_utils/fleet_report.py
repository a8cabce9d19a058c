# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet-wide reports built on the control node (pure functions).

- :func:`status_rows` turns every host's ``service_info`` result (or its failure) into one table row;
- :func:`status_lines` prints those rows as the text table of ``playbooks/status.yml``;
- :func:`file_sd_targets` lists every host's vLLM and LMCache ``/metrics`` endpoints as a Prometheus
  ``file_sd`` target list, with the labels ``host``, ``model`` and ``service``, and says which endpoints
  Prometheus cannot reach (bound to loopback).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.fleet_rules import (
    FleetRuleError, is_wildcard, monitoring_label_errors)

LOOPBACK_NAMES = ('localhost', 'localhost.localdomain', 'ip6-localhost')

COLUMNS = (('host', 'host'), ('state', 'state'), ('lmcache', 'lmcache'), ('vllm', 'vllm'), ('model', 'model'),
           ('n', 'N (source)'), ('versions', 'vllm / lmcache'), ('gpus', 'GPUs'),
           ('lmcache_hit', 'LMCache hit'), ('vllm_external_hit', 'vLLM ext. hit'), ('vllm_prefix_hit', 'vLLM prefix hit'))


def percent(value):
    """``0.512`` -> ``51.2%``; None -> ``-``."""
    if value is None:
        return '-'
    return '%.1f%%' % (100.0 * value)


def _health(service):
    health = (service or {}).get('health') or {}
    if health.get('ok'):
        return 'ok'
    return str(health.get('status') or 'no answer')


def _unit(service):
    service = service or {}
    if not service.get('present', False):
        return 'absent'
    state = service.get('active_state') or 'unknown'
    if state == 'active':
        return 'active/%s' % _health(service)
    return state


def _gpus(gpus):
    if gpus is None:
        return '-'
    if not gpus.get('driver_present'):
        return 'no driver'
    names = sorted(set(g.get('name') or '?' for g in gpus.get('gpus') or []))
    used = sum(g.get('memory_used_mib') or 0 for g in gpus.get('gpus') or [])
    total = sum(g.get('memory_total_mib') or 0 for g in gpus.get('gpus') or [])
    return '%dx %s %.0f/%.0f GiB' % (gpus.get('count') or 0, '+'.join(names), used / 1024.0, total / 1024.0)


def status_rows(results):
    """``results``: one dict per host, ``{'host', 'model', 'result'}`` where ``result`` is what the
    service_info module returned (or the failed/unreachable task's result, or None when the host
    never ran it). Returns the table rows."""
    rows = []
    for item in results or []:
        host = item.get('host')
        result = item.get('result') or {}
        model = item.get('model') or '-'
        if not result or result.get('unreachable') or result.get('failed') or 'state' not in result:
            if result.get('unreachable'):
                state, why = 'unreachable', result.get('msg') or 'unreachable'
            elif result.get('failed'):
                state, why = 'error', result.get('msg') or 'the status could not be read'
            else:
                state, why = 'unknown', 'the status was not read (the host left the play)'
            rows.append({'host': host, 'state': state, 'lmcache': '-', 'vllm': '-', 'model': model, 'n': '-',
                         'n_value': None, 'n_source': None, 'versions': '-', 'gpus': '-', 'gpu_lines': [],
                         'lmcache_hit': '-', 'vllm_external_hit': '-', 'vllm_prefix_hit': '-',
                         'problems': ['host %s: %s' % (host, str(why).strip().splitlines()[0] if str(why).strip() else why)]})
            continue
        services = result.get('services') or {}
        n = result.get('block_size') or {}
        versions = result.get('versions') or {}
        metrics = result.get('metrics') or {}
        lmcache_metrics = metrics.get('lmcache') or {}
        vllm_metrics = metrics.get('vllm') or {}
        gpus = result.get('gpus')
        rows.append({
            'host': host,
            'state': result.get('state'),
            'lmcache': _unit(services.get('lmcache')),
            'vllm': _unit(services.get('vllm')),
            'model': model,
            'n': '%s (%s)' % (n.get('n') if n.get('n') is not None else '?', n.get('source') or 'unknown'),
            'n_value': n.get('n'),
            'n_source': n.get('source'),
            'n_detail': n.get('detail'),
            'n_live': (n.get('live') or {}).get('n'),
            'n_live_source': (n.get('live') or {}).get('source'),
            'mamba_cache_blocks': (n.get('live') or {}).get('num_gpu_blocks'),
            'versions': '%s / %s' % (versions.get('vllm') or '-', versions.get('lmcache') or '-'),
            'vllm_version': versions.get('vllm'),
            'vllm_package': versions.get('vllm_package'),
            'lmcache_version': versions.get('lmcache'),
            'gpus': _gpus(gpus),
            'gpu_lines': (gpus or {}).get('summary') or [],
            'lmcache_hit': percent(lmcache_metrics.get('hit_ratio')),
            'lmcache_hit_tokens': lmcache_metrics.get('lookup_hit_tokens'),
            'lmcache_requested_tokens': lmcache_metrics.get('lookup_requested_tokens'),
            'vllm_external_hit': percent(vllm_metrics.get('external_hit_ratio')),
            'vllm_external_hits': vllm_metrics.get('external_prefix_cache_hits'),
            'vllm_external_queries': vllm_metrics.get('external_prefix_cache_queries'),
            'vllm_prefix_hit': percent(vllm_metrics.get('prefix_hit_ratio')),
            'problems': list(result.get('problems') or []),
        })
    return rows


def status_lines(rows):
    """The text table: a header line, one line per host, then every problem on its own line."""
    widths = {}
    for key, title in COLUMNS:
        widths[key] = max([len(title)] + [len(str(r.get(key, ''))) for r in rows])
    lines = [' '.join(title.ljust(widths[key]) for key, title in COLUMNS).rstrip()]
    for row in rows:
        lines.append(' '.join(str(row.get(key, '')).ljust(widths[key]) for key, _title in COLUMNS).rstrip())
    counts = {}
    for row in rows:
        counts[row['state']] = counts.get(row['state'], 0) + 1
    lines.append('%d host(s): %s' % (len(rows), ', '.join('%d %s' % (counts[s], s) for s in sorted(counts))))
    for row in rows:
        lines.extend(row['problems'])
    return lines


def _is_loopback(address):
    address = str(address or '').strip().strip('[]')
    if address.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _target(address, port):
    address = str(address).strip()
    if ':' in address and not address.startswith('['):
        address = '[%s]' % address
    return '%s:%d' % (address, int(port))


def file_sd_targets(hosts):
    """``hosts``: one dict per host: ``host``, ``address`` (how Prometheus reaches the host, e.g.
    ``ansible_host``), ``model``, ``vllm_host``, ``vllm_port``, ``lmcache_http_host``, ``lmcache_http_port``,
    and optionally ``labels`` (extra labels for both targets).

    Returns ``{'targets': [file_sd groups], 'skipped': [sentences]}``: an endpoint bound to loopback is
    left out (Prometheus on another machine cannot reach it) and named in ``skipped``. Extra labels may not
    replace ``host`` or ``service`` nor be Prometheus meta labels (``__*``): FleetRuleError names them."""
    errors = []
    for item in hosts or []:
        errors.extend(e for e in monitoring_label_errors(item.get('labels')) if e not in errors)
    if errors:
        raise FleetRuleError('; '.join(errors))
    groups, skipped = [], []
    for item in hosts or []:
        host = item['host']
        address = item.get('address') or host
        for service, bind_var, bind, port, label in (
                ('vllm', 'vllm_server_host', item.get('vllm_host'), item.get('vllm_port'), 'vLLM'),
                ('lmcache', 'lmcache_server_http_host', item.get('lmcache_http_host'), item.get('lmcache_http_port'),
                 "LMCache's HTTP API")):
            bind = '' if bind is None else str(bind).strip()
            if _is_loopback(bind):
                fix = ('set vllm_server_host to an address Prometheus reaches (0.0.0.0 or the host\'s private '
                       'address; set vllm_server_api_key when the network is not private)') if service == 'vllm' else (
                    'set lmcache_server_http_host to the host\'s private address (the API has no authentication: '
                    'never a public one)')
                skipped.append('host %s: %s listens on %s (%s), which Prometheus cannot reach from another machine; %s'
                               % (host, label, bind, bind_var, fix))
                continue
            scrape = address if is_wildcard(bind) else bind
            labels = {'host': str(host), 'model': str(item.get('model') or ''), 'service': service}
            labels.update(dict((str(k), str(v)) for k, v in (item.get('labels') or {}).items()))
            groups.append({'targets': [_target(scrape, port)], 'labels': labels})
    return {'targets': groups, 'skipped': skipped}
