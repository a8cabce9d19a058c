# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One status row of a KV store host, from its unit state and the store's own ``INFO``."""

from __future__ import annotations

# What the serving hosts do while their store is down, slow or full (measured, docs/kv-pools.md).
DOWN_NOTE = ('its pools\' LMCache servers keep serving from their L1 and prefill; pages written meanwhile are not '
             'shared')


def parse_info(text):
    """``{field: value}`` of ``INFO`` output (numbers as int or float), keyspace lines included."""
    fields = {}
    for line in str(text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or ':' not in line:
            continue
        key, value = line.split(':', 1)
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                continue
        fields[key] = value
    return fields


def _keys(fields):
    total = 0
    for key, value in fields.items():
        if key.startswith('db') and isinstance(value, str):
            for part in value.split(','):
                if part.startswith('keys='):
                    total += int(part[5:])
    return total


def status_row(host, active, info_text, error=None, exporter=None):
    """The row: state, memory, keys, hits, misses, hit ratio, evictions, the exporter unit's state (None: no
    exporter), and problems in plain words."""
    fields = parse_info(info_text) if active == 'active' and not error else {}
    hits, misses = fields.get('keyspace_hits'), fields.get('keyspace_misses')
    row = {'host': host, 'unit': active or 'unknown', 'server': fields.get('server_name') or
           ('redis' if 'redis_version' in fields else None),
           'version': fields.get('valkey_version') or fields.get('redis_version'),
           'used_memory_mb': round(fields['used_memory'] / 1048576.0, 1) if 'used_memory' in fields else None,
           'maxmemory_mb': round(fields['maxmemory'] / 1048576.0, 1) if 'maxmemory' in fields else None,
           'policy': fields.get('maxmemory_policy'), 'keys': _keys(fields) if fields else None,
           'hits': hits, 'misses': misses,
           'hit_ratio': round(hits / float(hits + misses), 3) if hits is not None and misses and hits + misses else
           (None if hits is None else 0.0),
           'evicted_keys': fields.get('evicted_keys'), 'clients': fields.get('connected_clients'),
           'cluster': fields.get('cluster_enabled') == 1, 'exporter': exporter, 'problems': []}
    if active != 'active':
        row['state'] = 'down'
        row['problems'].append('host %s: the store unit is %s; %s' % (host, active or 'unknown', DOWN_NOTE))
    elif error or not fields:
        row['state'] = 'unanswered'
        row['problems'].append('host %s: the store did not answer INFO (%s); %s' % (host, error or 'no output',
                                                                                    DOWN_NOTE))
    else:
        row['state'] = 'serving'
        if row['maxmemory_mb'] and row['used_memory_mb'] is not None and \
                row['used_memory_mb'] >= 0.95 * row['maxmemory_mb']:
            row['problems'].append('host %s: the store is full (%s of %s MiB): it evicts the least recently used '
                                   'pages (%s evicted so far)' % (host, row['used_memory_mb'], row['maxmemory_mb'],
                                                                  row['evicted_keys']))
    if exporter is not None and exporter != 'active':
        row['problems'].append('host %s: the store\'s exporter unit is %s; Prometheus gets no metrics of this store '
                               '(its target is down)' % (host, exporter or 'unknown'))
    return row


def unreachable_row(host, why=None):
    """The row of a store host Ansible could not reach: nothing of it was read."""
    why = str(why or 'unreachable').strip().splitlines()[0] if str(why or '').strip() else 'unreachable'
    row = {'host': host, 'unit': 'unknown', 'server': None, 'version': None, 'used_memory_mb': None,
           'maxmemory_mb': None, 'policy': None, 'keys': None, 'hits': None, 'misses': None, 'hit_ratio': None,
           'evicted_keys': None, 'clients': None, 'cluster': False, 'exporter': None, 'state': 'unreachable'}
    row['problems'] = ['host %s: unreachable (%s); nothing of the store was read; %s' % (host, why, DOWN_NOTE)]
    return row


def status_line(row):
    """One line of the printed table."""
    return '%-14s %-11s %-7s %9s / %-9s keys %-8s hits %-8s misses %-8s ratio %-6s evicted %s%s%s' % (
        row['host'], row['state'], row.get('version') or '-', row['used_memory_mb'], row['maxmemory_mb'],
        row['keys'], row['hits'], row['misses'], row['hit_ratio'], row['evicted_keys'],
        (' exporter %s' % row['exporter']) if row.get('exporter') is not None else '',
        ('  ' + ' | '.join(row['problems'])) if row['problems'] else '')
