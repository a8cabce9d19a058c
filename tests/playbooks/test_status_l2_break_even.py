# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""status.yml flags a pool whose store is slower than recompute, from real measured numbers.

A real redis-server, configured by the store plan for a pool of Qwen3.5-0.8B, holds two values of the pool's size;
they are read back through a slow link (24 MB/s) and the measured GB/s per load are what LMCache's /metrics shows
(both test doubles are in tests/kv_store_tools.py, named there). status.yml then runs against this machine
(``ansible_connection: local``, the roles' paths in a temporary directory, as in test_day2.py) with
``lmcache_server_kv_prefill_tokens_per_second: 10000``: break-even 49,152 B per token x 10,000 = 0.49 GB/s.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading

import pytest

from fleet_playbook_helpers import NO_CONTACT
from kv_store_tools import REDIS, SlowLink, fill, free_port, lmcache_metrics_double, running_store, timed_loads

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_CONFIG = os.path.join(HERE, '..', 'unit', 'fixtures', 'models', 'qwen3.5-0.8b', 'config.json')
PASSWORD = 'correct-horse-battery-staple'
VALUE = 544 * 49152  # the chunk (N 544 on CUDA) of one rank: what the pool's hosts write per key


def serve(pages):
    """A local HTTP server answering ``pages`` ({path: body}); 404 otherwise."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the name http.server calls)
            body = pages.get(self.path)
            data = (body or '').encode()
            self.send_response(200 if body is not None else 404)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(name='throttled_rates')
def throttled_rates_fixture(tmp_path):
    """GB/s of two loads of the pool's values from a real store behind the slow link."""
    if not os.path.exists(REDIS):
        pytest.skip('redis-server is not installed here')
    port = free_port()
    for name in ('data', 'etc'):
        (tmp_path / 'store' / name).mkdir(parents=True)
    plan = ks.plan_store('kv-01', {'kv_store_password': PASSWORD, 'kv_store_port': port, 'kv_store_maxmemory_keys': 4,
                                   'kv_store_home': str(tmp_path / 'store' / 'data'),
                                   'kv_store_config_dir': str(tmp_path / 'store' / 'etc')},
                         None, pool_values=[{'host': 'localhost', 'pool': 'default', 'value_bytes': VALUE}])
    assert plan['errors'] == []
    with running_store(plan, tmp_path / 'store'):
        keys = [b'default@fleet-test@0', b'default@fleet-test@1']
        fill(port, PASSWORD, keys, VALUE)
        link = SlowLink(('127.0.0.1', port), 24 * 1000 * 1000)
        try:
            return timed_loads(link.port, PASSWORD, keys, VALUE)
        finally:
            link.close()


def local_pool_host(tmp_path, vllm_port, lmcache_port):
    """This machine as a host of pool ``default`` serving the 0.8B (its config.json from the fixtures)."""
    return {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
        'vllm_server_model': '/srv/models/qwen3.5-0.8b', 'vllm_server_model_config': MODEL_CONFIG,
        'vllm_server_device': 'cuda', 'vllm_server_served_model_name': 'q08',
        'vllm_server_service_name': 'fleet-test-vllm', 'lmcache_server_service_name': 'fleet-test-lmcache',
        'vllm_server_config_dir': str(tmp_path / 'etc'), 'lmcache_server_config_dir': str(tmp_path / 'etc'),
        'vllm_server_venv': str(tmp_path / 'venv'), 'lmcache_server_venv': str(tmp_path / 'venv'),
        'vllm_server_home': str(tmp_path / 'var' / 'vllm'), 'lmcache_server_home': str(tmp_path / 'var' / 'lmcache'),
        'vllm_server_user': 'fleet-test-no-such-user', 'lmcache_server_user': 'fleet-test-no-such-user-2',
        'fleet_backup_dir': str(tmp_path / 'var' / 'rollback'),
        'fleet_probe_cache_path': str(tmp_path / 'facts.d' / 'vllm_block_size.fact'),
        'fleet_manifest_path': str(tmp_path / 'manifest' / 'manifest.json'),
        'vllm_server_port': vllm_port, 'lmcache_server_http_port': lmcache_port,
        'lmcache_server_kv_pool': 'default', 'lmcache_server_kv_prefill_tokens_per_second': 10000,
    }


def test_status_flags_the_throttled_pool_with_the_host_the_numbers_and_the_fixes(runner, tmp_path, throttled_rates):
    lmcache = serve({'/metrics': lmcache_metrics_double(throttled_rates), '/healthcheck': '{"status":"healthy"}'})
    vllm = serve({'/metrics': '', '/health': ''})
    try:
        store = dict(NO_CONTACT, kv_store_bind='10.0.0.9', kv_store_allow_network=True, kv_store_pools=['default'],
                     kv_store_password=PASSWORD)
        hosts = {'localhost': local_pool_host(tmp_path, vllm.server_address[1], lmcache.server_address[1])}
        inventory = {'all': {'children': {'vllm_hosts': {'hosts': hosts}, 'kv_stores': {'hosts': {'kv-01': store}}}}}
        (tmp_path / 'hosts.json').write_text(json.dumps(inventory))
        reports = tmp_path / 'reports'
        code, output = runner.run('status.yml', str(tmp_path / 'hosts.json'), '-e', 'ansible_become=false',
                                  '-e', 'fleet_status_dir=%s' % reports, '-e', 'fleet_status_gpus=false')
    finally:
        lmcache.shutdown()
        vllm.shutdown()
    assert code == 0, output[-6000:]
    entry = json.loads((reports / 'status.json').read_text())['localhost']['l2_pool']
    measured = sum(throttled_rates) / len(throttled_rates)
    assert entry['state'] == 'slower' and entry['break_even'] == 49152 * 10000
    assert entry['measured'] == pytest.approx(measured * 1e9)
    table = (reports / 'fleet.txt').read_text()
    assert ('host localhost: pool default: the L2 store is slower than recompute: it loads %.3f GB/s, break-even is '
            '0.492 GB/s (49152 B per token x 10000 prefill tokens/s); fix: more shards' % measured) in table
    assert 'no L2 for this pool (lmcache_server_kv_pool: null)' in table
    assert '%.2f / 0.49 slower' % measured in table
