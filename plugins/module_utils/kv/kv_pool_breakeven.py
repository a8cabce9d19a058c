# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When an L2 pool loses against recompute: its break-even store throughput, the measured one, the verdict.

A page read from the store pays only when it arrives faster than vLLM computes it again. Break-even is
``bytes per token x prefill tokens per second`` of the model on that hardware (:func:`break_even`): the 27B on an
H200 at ~11,000 tokens/s needs ~2.9 GB/s. The prefill rate is the host's ``lmcache_server_kv_prefill_tokens_per_second``
(measured: docs/kv-pools.md); without it break-even is unknown, and said so.

The measured throughput is LMCache's own histogram ``lmcache_mp_l2_load_throughput_GB_per_second`` (LMCache 0.5.6,
``lmcache_mp.l2_load_throughput`` in GB/s per load task, from submit to completion; label ``l2_name``):
:func:`measured` takes its mean since the server started (``_sum / _count``). The alerting rule
``LmcacheL2SlowerThanRecompute`` compares the same histogram's 15-minute mean with the break-even series that
playbooks/monitoring.yml writes from :func:`rule_series`.
"""

from __future__ import annotations

GB = 1e9
L2_LOAD_METRIC = 'lmcache_mp_l2_load_throughput_GB_per_second'
PREFILL_VARIABLE = 'lmcache_server_kv_prefill_tokens_per_second'
# The recorded series of the plan's break-even (playbooks/monitoring.yml writes one rule per pooled host).
BREAK_EVEN_SERIES = 'host:fleet_l2_break_even_GB_per_second:plan'
FIXES = ('more shards (kv_store_cluster with more stores listing the pool)',
         'a faster link between the hosts and the store',
         'a larger chunk multiple (lmcache_server_chunk_multiple: fewer, larger reads)',
         'a P2P pool where the hosts reach each other over RDMA (lmcache_server_kv_transport: p2p; over TCP it '
         'loses too)',
         'no L2 for this pool (lmcache_server_kv_pool: null)')


def break_even(per_token_total, prefill_tokens_per_second):
    """``(bytes per second or None, why unknown or None)``: the store throughput at which a load costs what a
    recompute does."""
    if not per_token_total:
        return None, 'the bytes per token are unknown'
    if prefill_tokens_per_second in (None, '', 0):
        return None, ('%s is not set: measure the prefill tokens per second of the model on this hardware '
                      '(docs/kv-pools.md, "Break-even") and set it for the hardware group' % PREFILL_VARIABLE)
    return float(per_token_total) * float(prefill_tokens_per_second), None


def measured(samples_sum, samples_count):
    """The mean L2 load throughput (bytes per second) of the histogram's ``_sum`` and ``_count`` (GB/s), or None
    when LMCache loaded nothing from its L2 yet."""
    if samples_sum is None or not samples_count:
        return None
    return float(samples_sum) / float(samples_count) * GB


def gbps(value):
    """A byte rate in GB/s for reports (two decimals), or None."""
    return None if value is None else round(float(value) / GB, 3)


def verdict(host, pool, sizing, throughput):
    """The pool's verdict on ``host``: ``{'state': 'slower' | 'faster' | 'unknown', 'break_even', 'measured',
    'message', 'fixes'}`` from its plan's ``sizing`` (kv_pool.sizing) and the measured ``throughput`` (bytes/s)."""
    sizing = sizing or {}
    target = sizing.get('break_even_bytes_per_second')
    out = {'pool': pool, 'bytes_per_token': sizing.get('bytes_per_token'), 'break_even': target,
           'measured': throughput, 'fixes': [], 'message': None}
    if target is None:
        out.update(state='unknown', message='host %s: pool %s: break-even unknown: %s' % (
            host, pool, sizing.get('break_even_unknown') or 'no plan'))
        return out
    if throughput is None:
        out.update(state='unknown', message='host %s: pool %s: no L2 load measured yet (%s has no sample)' % (
            host, pool, L2_LOAD_METRIC))
        return out
    if throughput >= target:
        out['state'] = 'faster'
        return out
    out.update(state='slower', fixes=list(FIXES), message=(
        'host %s: pool %s: the L2 store is slower than recompute: it loads %.3f GB/s, break-even is %.3f GB/s (%s B '
        'per token x %s prefill tokens/s); fix: %s' % (
            host, pool, throughput / GB, target / GB, sizing.get('bytes_per_token'),
            sizing.get('prefill_tokens_per_second'), '; or '.join(FIXES))))
    return out


def rule_series(rows):
    """The break-even recording rules of the pooled hosts (``rows``: ``[{host, pool, break_even}]``, bytes per
    second; hosts without a known break-even left out): Prometheus rule mappings, the value and the ``break_even``
    label in GB/s."""
    rules = []
    for row in sorted(rows or [], key=lambda r: str(r.get('host'))):
        if row.get('break_even'):
            value = '%.3f' % (row['break_even'] / GB)
            rules.append({'record': BREAK_EVEN_SERIES, 'expr': 'vector(%s)' % value,
                          'labels': {'host': str(row['host']), 'pool': str(row['pool']), 'break_even': value}})
    return rules


def rules_file(endpoints):
    """The rules file playbooks/monitoring.yml writes (lmcache_vllm_fleet_l2.rules.yml) from the hosts' endpoints
    (each with ``host`` and its plan's ``kv_pool``)."""
    rows = [{'host': e.get('host'), 'pool': e['kv_pool'].get('pool'),
             'break_even': (e['kv_pool'].get('sizing') or {}).get('break_even_bytes_per_second')}
            for e in endpoints or [] if isinstance(e, dict) and isinstance(e.get('kv_pool'), dict)]
    return {'groups': [{'name': 'lmcache_vllm_fleet.l2_break_even', 'rules': rule_series(rows)}]}


def status_entry(host, kv, lmcache_metrics):
    """A pooled host's verdict for status.yml from its plan's pool (``kv``: the host plan's ``kv_pool``) and the
    summary of its LMCache /metrics (prometheus_text.lmcache_summary); None for a host in no pool."""
    if not isinstance(kv, dict) or not kv.get('pool'):
        return None
    metrics = lmcache_metrics or {}
    throughput = measured(metrics.get('l2_load_gbps_sum'), metrics.get('l2_load_count'))
    return verdict(host, kv['pool'], kv.get('sizing'), throughput)


def status_text(entry):
    """The status table's cell: ``<measured> / <break-even> GB/s`` and the state (``-`` outside a pool)."""
    if not entry:
        return '-'

    def shown(value):
        return '?' if value is None else '%.2f' % (value / GB)
    return '%s / %s %s' % (shown(entry['measured']), shown(entry['break_even']), entry['state'])
