# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The break-even warning fires when the store is really throttled: a real redis-server on loopback, configured by the
store plan for a pool of Qwen3.5-0.8B (N 544), holds values of the pool's size; they are read back through a slow
link, and the status computation (fleet_report.fleet_table('status'), as status.yml runs it) is fed the measured
throughput.

The test doubles (a slow link, LMCache's /metrics) are in tests/kv_store_tools.py, named there.
"""

from __future__ import annotations

import json
import os

import pytest

from kv_store_tools import REDIS, SlowLink, fill, free_port, lmcache_metrics_double, running_store, timed_loads

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool_breakeven as breakeven
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import prometheus_text
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_predict import explain_block_size

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, '..', '..', '..', 'fixtures', 'models', 'qwen3.5-0.8b', 'config.json')
PASSWORD = 'correct-horse-battery-staple'
RATE = 24 * 1000 * 1000  # bytes per second through the slow link
READS = 2


def pooled_plan(prefill):
    with open(MODEL, encoding='utf-8') as handle:
        prediction = explain_block_size(json.load(handle), platform='cuda')
    cfg = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_device': 'cuda', 'lmcache_server_kv_pool': 'default',
           'lmcache_server_kv_prefill_tokens_per_second': prefill}
    store = {'kv_store_bind': '127.0.0.1', 'kv_store_password': PASSWORD}
    return host_plan.plan_host('gpu-1', cfg, n=prediction['block_size'], n_kind='probed', prediction=prediction,
                               kv_stores={'gpu-1': store})


@pytest.fixture(name='store', scope='module')
def store_fixture(tmp_path_factory):
    """The real store, configured by its plan for the pool's values, holding ``READS`` values of the pool's size."""
    if not os.path.exists(REDIS):
        pytest.skip('redis-server is not installed here')
    base = tmp_path_factory.mktemp('store')
    values = kv_pool.pool_values([pooled_plan(10000)])
    port = free_port()
    (base / 'data').mkdir()
    (base / 'etc').mkdir()
    store = ks.plan_store('gpu-1', {'kv_store_password': PASSWORD, 'kv_store_port': port, 'kv_store_maxmemory_keys': 4,
                                    'kv_store_home': str(base / 'data'), 'kv_store_config_dir': str(base / 'etc')},
                          None, pool_values=values)
    assert store['errors'] == []
    with running_store(store, base):
        keys = [b'default@fleet-test@%d' % i for i in range(READS)]
        fill(port, PASSWORD, keys, values[0]['value_bytes'])
        yield {'port': port, 'keys': keys, 'size': values[0]['value_bytes']}


def status_of(plan, rates):
    """The status table's row of the host, as status.yml computes it from the service_info result."""
    result = {'host': 'gpu-1', 'state': 'serving', 'services': {}, 'problems': [],
              'metrics': {'lmcache': prometheus_text.lmcache_summary(lmcache_metrics_double(rates)), 'vllm': {}}}
    table = fleet_report.fleet_table('status', ['gpu-1'], {'gpu-1': {'__fleet_plan': plan, '__fleet_status': result,
                                                                     '__fleet_status_model': 'm'}})
    return table['rows'][0], table


def test_a_throttled_store_is_flagged_slower_than_recompute(store):
    link = SlowLink(('127.0.0.1', store['port']), RATE)
    try:
        rates = timed_loads(link.port, PASSWORD, store['keys'], store['size'])
    finally:
        link.close()
    # the link really limits the loads: no read beats its rate
    assert max(rates) * 1e9 <= RATE * 1.05
    plan = pooled_plan(10000)
    sizing = plan['kv_pool']['sizing']
    assert sizing['bytes_per_token'] == 24 * 2048 and sizing['break_even_bytes_per_second'] == 24 * 2048 * 10000
    row, table = status_of(plan, rates)
    entry = row['l2_pool']
    assert entry['state'] == 'slower'
    assert entry['measured'] == pytest.approx(sum(rates) / len(rates) * 1e9)
    message = entry['message']
    assert message in row['problems'] and message in table['lines']
    for part in ('gpu-1', 'pool default', '%.3f GB/s' % (entry['measured'] / 1e9), '0.492 GB/s', 'more shards',
                 'a faster link', 'a larger chunk multiple', 'lmcache_server_kv_transport: p2p',
                 'lmcache_server_kv_pool: null'):
        assert part in message, part
    assert row['l2'].endswith('slower')
    assert table['results']['gpu-1']['l2_pool'] == entry


def test_the_same_store_unthrottled_beats_a_low_break_even_and_stays_silent(store):
    rates = timed_loads(store['port'], PASSWORD, store['keys'], store['size'])
    # break-even 49,152 B per token x 100 tokens/s = 4.9 MB/s: far below any loopback read
    row, _table = status_of(pooled_plan(100), rates)
    assert row['l2_pool']['state'] == 'faster'
    assert row['problems'] == []


def test_no_prefill_rate_says_break_even_is_unknown(store):
    row, _table = status_of(pooled_plan(None), [0.5])
    assert row['l2_pool']['state'] == 'unknown' and row['problems'] == []
    assert breakeven.PREFILL_VARIABLE in row['l2_pool']['message']
