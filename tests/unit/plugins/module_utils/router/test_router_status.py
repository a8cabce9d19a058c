# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Router status rows from the unit state and the router's metrics (the real router's text: tests/real)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_status

INSTANCE = {'service_name': 'vllm-router-small', 'group': 'small', 'listen': '127.0.0.1:30000',
            'policy': 'cache_aware', 'metrics_url': 'http://127.0.0.1:29000/metrics',
            'workers': [{'host': 'w1', 'url': 'http://10.0.0.1:8000'}, {'host': 'w2', 'url': 'http://10.0.0.2:8000'}]}
METRICS = """# TYPE vllm_router_worker_health gauge
vllm_router_worker_health{worker="http://10.0.0.1:8000"} 0
vllm_router_worker_health{worker="http://10.0.0.2:8000"} 1
vllm_router_processed_requests_total{worker="http://10.0.0.2:8000"} 7
"""


def test_a_worker_taken_out_is_named():
    (row,) = router_status.rows('rt-01', [INSTANCE], [{'stdout': 'active'}], [{'status': 200, 'content': METRICS}])
    assert row['state'] == 'routing'
    assert row['workers'] == [{'host': 'w1', 'url': 'http://10.0.0.1:8000', 'state': 'unhealthy', 'requests': None},
                              {'host': 'w2', 'url': 'http://10.0.0.2:8000', 'state': 'healthy', 'requests': 7}]
    assert row['problems'] == ['host rt-01: the router vllm-router-small routes nothing to w1 (its /health fails)']
    assert router_status.line(row) == ('rt-01: vllm-router-small on 127.0.0.1:30000 (cache_aware): routing; '
                                       'workers: w1 unhealthy, w2 healthy (7 requests)')


def test_a_stopped_router_and_one_without_metrics():
    down, silent = router_status.rows('rt-01', [INSTANCE, INSTANCE], [{'stdout': 'failed'}, {'stdout': 'active'}],
                                      [{'status': -1}, {'status': -1}])
    assert down['state'] == 'down' and 'is failed' in down['problems'][0]
    assert silent['state'] == 'unanswered' and [w['state'] for w in silent['workers']] == ['unknown', 'unknown']


def test_no_healthy_worker():
    text = METRICS.replace('} 1', '} 0')
    (row,) = router_status.rows('rt-01', [INSTANCE], [{'stdout': 'active'}], [{'status': 200, 'content': text}])
    assert row['state'] == 'no healthy worker' and len(row['problems']) == 2


def test_file_sd_scrapes_a_wildcard_bind_at_the_hosts_address_and_names_loopback():
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_monitoring
    instance = dict(INSTANCE, metrics_port=29000)
    out = router_monitoring.file_sd([
        {'host': 'rt-01', 'address': '10.0.0.9', 'metrics_bind': '0.0.0.0', 'instances': [instance]},
        {'host': 'rt-02', 'address': '10.0.0.8', 'metrics_bind': '10.1.0.8', 'instances': [instance]},
        {'host': 'rt-03', 'address': '10.0.0.7', 'metrics_bind': '127.0.0.1', 'instances': [instance]}],
        {'cluster': 'eu-1'})
    assert [t['targets'] for t in out['targets']] == [['10.0.0.9:29000'], ['10.1.0.8:29000']]
    assert out['targets'][0]['labels'] == {'cluster': 'eu-1', 'host': 'rt-01', 'service': 'router',
                                           'model_group': 'small', 'router': 'vllm-router-small'}
    assert out['skipped'] == ['host rt-03: the router vllm-router-small serves its metrics on loopback '
                              '(vllm_router_metrics_bind=127.0.0.1); set vllm_router_metrics_bind (with '
                              'vllm_router_allow_network) to scrape it']
