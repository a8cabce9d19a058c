# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/status/prometheus_text.py (the /metrics reader of the status report)."""

from __future__ import annotations

import math

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import prometheus_text as pt

# The shape LMCache 0.5.6's MP server and vLLM 0.32 print (prometheus_client, text format 0.0.4).
LMCACHE_METRICS = '''\
# HELP lmcache_mp_lookup_requested_tokens_total Number of tokens looked up
# TYPE lmcache_mp_lookup_requested_tokens_total counter
lmcache_mp_lookup_requested_tokens_total{cache_salt="",model_name="tiny-dense"} 3072.0
lmcache_mp_lookup_requested_tokens_total{cache_salt="tenant-b",model_name="tiny-dense"} 1024.0
# HELP lmcache_mp_lookup_hit_tokens_total Number of tokens found
# TYPE lmcache_mp_lookup_hit_tokens_total counter
lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="tiny-dense"} 2048.0
lmcache_mp_lookup_hit_tokens_total{cache_salt="tenant-b",model_name="tiny-dense"} 0.0
lmcache_mp_lookup_hit_tokens_created{cache_salt="",model_name="tiny-dense"} 1.7645e+09
# TYPE lmcache_mp_l1_write_chunks_total counter
lmcache_mp_l1_write_chunks_total 12.0
'''

VLLM_METRICS = '''\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny-dense"} 1.0
vllm:num_requests_waiting{engine="0",model_name="tiny-dense"} 0.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny-dense"} 4000.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny-dense"} 1000.0
vllm:external_prefix_cache_queries_total{engine="0",model_name="tiny-dense"} 3000.0
vllm:external_prefix_cache_hits_total{engine="0",model_name="tiny-dense"} 1536.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny-dense",source="local_compute"} 2464.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny-dense",source="external_kv_transfer"} 1536.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny-dense",source="local_cache_hit"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny-dense"} 6.0
'''


def test_parse_samples_names_labels_values():
    samples = pt.parse(LMCACHE_METRICS)
    assert ('lmcache_mp_l1_write_chunks_total', {}, 12.0) in samples
    assert ('lmcache_mp_lookup_hit_tokens_total', {'cache_salt': 'tenant-b', 'model_name': 'tiny-dense'}, 0.0) in samples
    assert len(samples) == 6


def test_names_with_colons_and_special_values():
    samples = pt.parse('vllm:x_total{le="+Inf"} +Inf\nvllm:y -Inf 1700000000\nz NaN\n')
    assert samples[0] == ('vllm:x_total', {'le': '+Inf'}, math.inf)
    assert samples[1] == ('vllm:y', {}, -math.inf)
    assert samples[2][0] == 'z' and math.isnan(samples[2][2])
    # NaN samples are not summed
    assert pt.total(samples, 'z') is None


def test_label_values_with_escapes_commas_and_braces():
    text = 'm{path="C:\\\\tmp",msg="say \\"hi\\", ok}",nl="a\\nb",} 2\n'
    (name, labels, value), = pt.parse(text)
    assert name == 'm' and value == 2.0
    assert labels == {'path': 'C:\\tmp', 'msg': 'say "hi", ok}', 'nl': 'a\nb'}


def test_timestamps_comments_and_openmetrics_eof_are_ignored():
    text = '# HELP a b\n\n   \na_total 3 1700000000000\n# EOF\n'
    assert pt.parse(text) == [('a_total', {}, 3.0)]


@pytest.mark.parametrize('line', ['m{a="x" 1', 'm{a=x} 1', 'm', 'm{1a="x"} 1', 'm notanumber', '{a="x"} 1'])
def test_bad_lines_are_skipped_or_raise_when_strict(line):
    text = 'good 1\n' + line + '\n'
    assert pt.parse(text) == [('good', {}, 1.0)]
    with pytest.raises(pt.PrometheusTextError) as err:
        pt.parse(text, strict=True)
    assert 'line 2' in str(err.value)


def test_total_sums_every_label_set_and_filters_by_labels():
    samples = pt.parse(LMCACHE_METRICS)
    assert pt.total(samples, pt.LMCACHE_REQUESTED_TOKENS) == 4096.0
    assert pt.total(samples, pt.LMCACHE_REQUESTED_TOKENS, {'cache_salt': 'tenant-b'}) == 1024.0
    assert pt.total(samples, pt.LMCACHE_REQUESTED_TOKENS, {'cache_salt': 'nobody'}) is None
    # the _created sample is another metric
    assert pt.total(samples, 'lmcache_mp_lookup_hit_tokens_total') == 2048.0
    assert pt.total(samples, 'absent_total') is None


@pytest.mark.parametrize('num, den, want', [(1, 4, 0.25), (0, 10, 0.0), (3, 0, None), (None, 2, None), (2, None, None)])
def test_ratio(num, den, want):
    assert pt.ratio(num, den) == want


def test_lmcache_summary():
    summary = pt.lmcache_summary(LMCACHE_METRICS)
    assert summary['lookup_hit_tokens'] == 2048.0
    assert summary['lookup_requested_tokens'] == 4096.0
    assert summary['hit_ratio'] == 0.5
    assert summary['l1_write_chunks'] == 12.0
    assert summary['samples'] == 6


def test_vllm_summary():
    summary = pt.vllm_summary(VLLM_METRICS)
    assert summary['external_prefix_cache_hits'] == 1536.0
    assert summary['external_prefix_cache_queries'] == 3000.0
    assert summary['external_hit_ratio'] == 0.512
    assert summary['prefix_hit_ratio'] == 0.25
    assert summary['prompt_tokens_external'] == 1536.0
    assert summary['requests_running'] == 1.0 and summary['requests_waiting'] == 0.0


def test_summaries_of_a_server_without_traffic_or_metrics():
    fresh = pt.lmcache_summary('# TYPE lmcache_mp_lookup_hit_tokens_total counter\n')
    assert fresh['hit_ratio'] is None and fresh['lookup_hit_tokens'] is None
    idle = pt.vllm_summary('vllm:external_prefix_cache_queries_total{engine="0"} 0.0\n'
                           'vllm:external_prefix_cache_hits_total{engine="0"} 0.0\n')
    assert idle['external_hit_ratio'] is None and idle['external_prefix_cache_queries'] == 0.0
    assert pt.vllm_summary('')['samples'] == 0
    assert pt.vllm_summary(None)['samples'] == 0
