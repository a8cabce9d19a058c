# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the Prometheus text exposition format (what ``GET /metrics`` returns), pure functions.

:func:`parse` turns the text into samples ``(name, labels, value)``; :func:`total` sums the samples
of one metric (optionally only those whose labels match); :func:`ratio` divides two totals and says
"no data" (None) rather than dividing by zero. The cache hit ratios of the status playbook come from
here:

- LMCache: ``lmcache_mp_lookup_hit_tokens_total / lmcache_mp_lookup_requested_tokens_total``;
- vLLM: ``vllm:external_prefix_cache_hits_total / vllm:external_prefix_cache_queries_total``
  (tokens the KV connector, i.e. LMCache, served) and ``vllm:prefix_cache_hits_total /
  vllm:prefix_cache_queries_total`` (vLLM's own prefix cache).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

_NAME_RE = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
_LABEL_NAME_RE = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*')
_ESCAPES = {'\\': '\\', '"': '"', 'n': '\n'}

# The metrics the status playbook reads (name -> what it counts).
LMCACHE_HIT_TOKENS = 'lmcache_mp_lookup_hit_tokens_total'
LMCACHE_REQUESTED_TOKENS = 'lmcache_mp_lookup_requested_tokens_total'
LMCACHE_L1_WRITE_CHUNKS = 'lmcache_mp_l1_write_chunks_total'
# LMCache 0.5.6's histogram of L2 -> L1 load throughput in GB/s per load task (OpenTelemetry
# ``lmcache_mp.l2_load_throughput``, unit GB/s; label l2_name): its sum and count give the mean since the start.
LMCACHE_L2_LOAD_GBPS_SUM = 'lmcache_mp_l2_load_throughput_GB_per_second_sum'
LMCACHE_L2_LOAD_GBPS_COUNT = 'lmcache_mp_l2_load_throughput_GB_per_second_count'
VLLM_EXTERNAL_HITS = 'vllm:external_prefix_cache_hits_total'
VLLM_EXTERNAL_QUERIES = 'vllm:external_prefix_cache_queries_total'
VLLM_PREFIX_HITS = 'vllm:prefix_cache_hits_total'
VLLM_PREFIX_QUERIES = 'vllm:prefix_cache_queries_total'
VLLM_PROMPT_TOKENS_BY_SOURCE = 'vllm:prompt_tokens_by_source_total'
VLLM_REQUESTS_RUNNING = 'vllm:num_requests_running'
VLLM_REQUESTS_WAITING = 'vllm:num_requests_waiting'


class PrometheusTextError(ValueError):
    """A line of the exposition text could not be read."""


def _value(text):
    word = text.strip()
    lowered = word.lower()
    if lowered in ('+inf', 'inf'):
        return math.inf
    if lowered == '-inf':
        return -math.inf
    if lowered == 'nan':
        return math.nan
    return float(word)


def _labels(line, start, lineno):
    """Parse ``{a="x",b="y"}`` from ``line[start]`` (the ``{``); returns (labels, index after ``}``)."""
    labels = {}
    i = start + 1
    while True:
        while i < len(line) and line[i] in ' \t,':
            i += 1
        if i >= len(line):
            raise PrometheusTextError('line %d: unterminated label set' % lineno)
        if line[i] == '}':
            return labels, i + 1
        match = _LABEL_NAME_RE.match(line, i)
        if not match:
            raise PrometheusTextError('line %d: bad label name at column %d' % (lineno, i + 1))
        name = match.group(0)
        i = match.end()
        while i < len(line) and line[i] in ' \t':
            i += 1
        if line[i:i + 2] != '="':
            raise PrometheusTextError('line %d: label %s has no quoted value' % (lineno, name))
        i += 2
        chars = []
        while True:
            if i >= len(line):
                raise PrometheusTextError('line %d: unterminated value of label %s' % (lineno, name))
            char = line[i]
            if char == '\\' and i + 1 < len(line):
                chars.append(_ESCAPES.get(line[i + 1], '\\' + line[i + 1]))
                i += 2
                continue
            if char == '"':
                i += 1
                break
            chars.append(char)
            i += 1
        labels[name] = ''.join(chars)


def parse(text, strict=False):
    """Samples of the exposition ``text``: a list of ``(name, labels, value)`` in the order given.

    Comments (``# HELP``, ``# TYPE``, ``# EOF``) and blank lines are skipped. A line that cannot be
    read raises :class:`PrometheusTextError` when ``strict``, and is skipped otherwise (a status
    report should not fail on one odd line)."""
    samples = []
    for lineno, raw in enumerate((text or '').splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        try:
            match = _NAME_RE.match(line)
            if not match:
                raise PrometheusTextError('line %d: no metric name' % lineno)
            name = match.group(0)
            i = match.end()
            labels = {}
            if i < len(line) and line[i] == '{':
                labels, i = _labels(line, i, lineno)
            rest = line[i:].split()
            if not rest:
                raise PrometheusTextError('line %d: %s has no value' % (lineno, name))
            try:
                value = _value(rest[0])
            except ValueError:
                raise PrometheusTextError('line %d: %s has a bad value %r' % (lineno, name, rest[0]))
        except PrometheusTextError:
            if strict:
                raise
            continue
        samples.append((name, labels, value))
    return samples


def _matches(labels, match):
    return all(labels.get(key) == str(value) for key, value in (match or {}).items())


def total(samples, name, match=None):
    """Sum of the values of metric ``name`` over its samples (whose labels include ``match``).

    None when no such sample exists: "not exported" is not the same as zero."""
    values = [value for sample_name, labels, value in samples
              if sample_name == name and _matches(labels, match) and not math.isnan(value)]
    if not values:
        return None
    return sum(values)


def ratio(numerator, denominator):
    """``numerator / denominator`` or None when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


# what the status report shows of each server's /metrics: (key, metric, labels to match) totals, then
# (key, numerator key, denominator key) ratios
LMCACHE_SUMMARY = (
    (('lookup_hit_tokens', LMCACHE_HIT_TOKENS, None), ('lookup_requested_tokens', LMCACHE_REQUESTED_TOKENS, None),
     ('l1_write_chunks', LMCACHE_L1_WRITE_CHUNKS, None), ('l2_load_gbps_sum', LMCACHE_L2_LOAD_GBPS_SUM, None),
     ('l2_load_count', LMCACHE_L2_LOAD_GBPS_COUNT, None)),
    (('hit_ratio', 'lookup_hit_tokens', 'lookup_requested_tokens'),
     ('l2_load_gbps_mean', 'l2_load_gbps_sum', 'l2_load_count')),
)
VLLM_SUMMARY = (
    (('external_prefix_cache_hits', VLLM_EXTERNAL_HITS, None),
     ('external_prefix_cache_queries', VLLM_EXTERNAL_QUERIES, None),
     ('prefix_cache_hits', VLLM_PREFIX_HITS, None), ('prefix_cache_queries', VLLM_PREFIX_QUERIES, None),
     ('prompt_tokens_external', VLLM_PROMPT_TOKENS_BY_SOURCE, {'source': 'external_kv_transfer'}),
     ('requests_running', VLLM_REQUESTS_RUNNING, None), ('requests_waiting', VLLM_REQUESTS_WAITING, None)),
    (('external_hit_ratio', 'external_prefix_cache_hits', 'external_prefix_cache_queries'),
     ('prefix_hit_ratio', 'prefix_cache_hits', 'prefix_cache_queries')),
)


def summary(text, table):
    """The totals and ratios of ``table`` (LMCACHE_SUMMARY, VLLM_SUMMARY) in ``text``, with ``samples``."""
    samples = parse(text)
    totals, ratios = table
    out = dict((key, total(samples, name, match)) for key, name, match in totals)
    out.update((key, ratio(out[num], out[den])) for key, num, den in ratios)
    out['samples'] = len(samples)
    return out


def lmcache_summary(text):
    """What the status report shows of an LMCache server's /metrics."""
    return summary(text, LMCACHE_SUMMARY)


def vllm_summary(text):
    """What the status report shows of a vLLM server's /metrics."""
    return summary(text, VLLM_SUMMARY)
