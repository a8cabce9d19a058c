# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Debian's prometheus scrapes what monitoring.yml generates and the recording rules answer PromQL.

monitoring.yml writes the targets (here for a host bound to the IPv6 wildcard, reached at 127.0.0.1) and copies
the rules; a real Prometheus (scripts/setup-prometheus.sh) scrapes them with the targets file as its file_sd and
evaluates the rules. The /metrics endpoints are the TEST DOUBLE of test_day2 (a local HTTP server printing the
counters LMCache and vLLM print); the molecule default scenario does the same against the real services.
Also: monitoring.yml refuses labels that would replace the collection's or be Prometheus's own, before writing.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from prometheus_tools import prometheus_program
import systemd_unit as su
from test_day2 import endpoints_fixture, free_port, local_host, write_inventory  # noqa: F401 pylint: disable=unused-import

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as ks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_exporter as kx


def query(port, expr):
    url = 'http://127.0.0.1:%d/api/v1/query?query=%s' % (port, urllib.parse.quote(expr))
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read().decode())['data']['result']


@pytest.fixture(name='prometheus_binary')
def prometheus_binary_fixture():
    return prometheus_program('prometheus')


def start_prometheus(binary, out, tmp_path):
    """Prometheus scraping the generated targets file in ``out`` with its recording rules: (process, port, log)."""
    (out / 'prometheus.yml').write_text(
        'global: {scrape_interval: 1s, evaluation_interval: 1s}\n'
        'rule_files: [lmcache_vllm_fleet.rules.yml, lmcache_vllm_fleet_l2.rules.yml]\n'
        'scrape_configs:\n'
        '  - job_name: lmcache_vllm_fleet\n'
        '    file_sd_configs: [{files: [targets.json], refresh_interval: 1s}]\n')
    port = free_port()
    log = open(str(tmp_path / 'prometheus.log'), 'w')
    proc = subprocess.Popen([binary, '--config.file=%s' % (out / 'prometheus.yml'),
                             '--storage.tsdb.path=%s' % (tmp_path / 'tsdb'), '--web.listen-address=127.0.0.1:%d' % port],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, port, log


def test_prometheus_scrapes_the_generated_targets_and_records_the_hit_ratio(runner, tmp_path, endpoints,
                                                                            prometheus_binary):
    host = local_host(tmp_path, ansible_host='127.0.0.1', vllm_server_host='::', lmcache_server_http_host='[::]',
                      vllm_server_allow_unauthenticated=True, lmcache_server_allow_unauthenticated=True,
                      vllm_server_port=endpoints['vllm'], lmcache_server_http_port=endpoints['lmcache'])
    inventory = write_inventory(tmp_path, {'gpu-01': host})
    out = tmp_path / 'monitoring'
    code, output = runner.run('monitoring.yml', inventory, '-e', 'fleet_monitoring_dir=%s' % out)
    assert code == 0, output[-4000:]
    targets = json.loads((out / 'targets.json').read_text())
    assert sorted(t['targets'][0] for t in targets) == sorted('127.0.0.1:%d' % p for p in endpoints.values())
    # a host in no L2 pool has no break-even series: the file holds an empty group, which Prometheus loads below
    assert yaml.safe_load((out / 'lmcache_vllm_fleet_l2.rules.yml').read_text()) == {
        'groups': [{'name': 'lmcache_vllm_fleet.l2_break_even', 'rules': []}]}

    proc, port, log = start_prometheus(prometheus_binary, out, tmp_path)
    try:
        ratio, external, up, deadline = [], [], [], time.time() + 90
        # the two recording rules may land in different evaluations: wait for both
        while time.time() < deadline and not (ratio and external and len(up) == 2):
            time.sleep(1)
            try:
                up = query(port, 'up == 1')
                ratio = query(port, 'job:lmcache_mp_lookup_hit_tokens:ratio')
                external = query(port, 'job:vllm_external_prefix_cache_hits:ratio')
            except OSError:
                continue
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert sorted(s['metric']['service'] for s in up) == ['lmcache', 'vllm'], (tmp_path / 'prometheus.log').read_text()
    assert {s['metric']['host'] for s in up} == {'gpu-01'}
    # test_day2's doubles: LMCache had 1500 of 2000 looked-up tokens, vLLM got 250 of 1000 from it
    assert float(ratio[0]['value'][1]) == pytest.approx(0.75)
    assert float(external[0]['value'][1]) == pytest.approx(0.25)


@pytest.mark.parametrize('labels, words', [
    ('{"host": "x"}', 'fleet_monitoring_labels sets host, which the collection sets on every target'),
    ('{"__address__": "evil:1"}', 'fleet_monitoring_labels sets __address__: names starting with __ are'),
])
def test_reserved_labels_are_refused_before_anything_is_written(runner, tmp_path, labels, words):
    inventory = write_inventory(tmp_path, {'gpu-01': local_host(tmp_path, vllm_server_host='0.0.0.0',
                                                                vllm_server_allow_unauthenticated=True)})
    out = tmp_path / 'monitoring'
    code, output = runner.run('monitoring.yml', inventory, '-e', 'fleet_monitoring_dir=%s' % out,
                              '-e', '{"fleet_monitoring_labels": %s}' % labels)
    assert code != 0
    assert words in output
    assert not out.exists()


def test_prometheus_scrapes_a_kv_stores_real_exporter(runner, tmp_path, prometheus_binary):
    """monitoring.yml lists the store's exporter (kv_store_exporter on, bound to the wildcard, reached at 127.0.0.1);
    the real redis-server and prometheus-redis-exporter run from the store plan's files (tests/unit's
    test_kv_store_exporter.py checks them in detail) and Prometheus records the store's memory ratio."""
    missing = [p for p in ('/usr/bin/redis-server', kx.BINARY) if not os.access(p, os.X_OK)]
    if missing:
        if os.environ.get('CI') or os.environ.get('FLEET_REQUIRE_REAL') == '1':
            pytest.fail('%s missing (scripts/setup-tools.sh)' % ', '.join(missing))
        pytest.skip('%s missing (scripts/setup-tools.sh)' % ', '.join(missing))
    store_port, metrics_port = free_port(), free_port()
    store = {'ansible_connection': 'local', 'ansible_host': '127.0.0.1', 'kv_store_pools': ['default'],
             'kv_store_password': 'a-store-password-for-the-test', 'kv_store_port': store_port,
             'kv_store_exporter': True, 'kv_store_exporter_password': 'an-exporter-password-for-the-test',
             'kv_store_exporter_bind': '0.0.0.0', 'kv_store_allow_network': True,
             'kv_store_exporter_port': metrics_port,
             'kv_store_home': str(tmp_path / 'kv' / 'data'), 'kv_store_config_dir': str(tmp_path / 'kv' / 'etc')}
    inventory = {'all': {'children': {'vllm_hosts': {'hosts': {'gpu-01': local_host(tmp_path)}},
                                      'kv_stores': {'hosts': {'kv-01': store}}}}}
    (tmp_path / 'hosts.json').write_text(json.dumps(inventory))
    out = tmp_path / 'monitoring'
    code, output = runner.run('monitoring.yml', str(tmp_path / 'hosts.json'), '-e', 'fleet_monitoring_dir=%s' % out)
    assert code == 0, output[-4000:]
    assert 'an-exporter-password-for-the-test' not in output
    targets = json.loads((out / 'targets.json').read_text())
    labels = {'host': 'kv-01', 'service': 'kv_store', 'pools': 'default'}
    assert [t for t in targets if t['labels']['service'] == 'kv_store'] == [
        {'targets': ['127.0.0.1:%d' % metrics_port], 'labels': labels}]

    plan = ks.plan_store('kv-01', store, None)
    assert plan['errors'] == []
    os.makedirs(store['kv_store_home'])
    os.makedirs(store['kv_store_config_dir'])
    conf = tmp_path / 'kv' / 'etc' / 'fleet-kv-store.conf'
    conf.write_text('\n'.join(line for line in plan['config_lines'] if line != 'supervised systemd') + '\n')
    (tmp_path / 'kv' / 'etc' / 'users.acl').write_text('\n'.join(plan['acl_lines']) + '\n')
    env = dict(os.environ, **su.parse_env_file('\n'.join(plan['exporter']['env_lines']) + '\n'))
    # the plan's command, listening on loopback only here (the target is reached at 127.0.0.1 all the same)
    argv = plan['exporter']['argv'][:-1] + ['-web.listen-address=127.0.0.1:%d' % metrics_port]
    procs = [subprocess.Popen(['/usr/bin/redis-server', str(conf)], stdout=subprocess.DEVNULL),
             subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)]
    prometheus, port, log = start_prometheus(prometheus_binary, out, tmp_path)
    procs.append(prometheus)
    try:
        up, ratio, deadline = [], [], time.time() + 90
        while time.time() < deadline and not (up and ratio):
            time.sleep(1)
            try:
                up = query(port, 'redis_up{service="kv_store"} == 1')
                ratio = query(port, 'host:redis_memory_used_bytes:ratio_max')
            except OSError:
                continue
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=30)
        log.close()
    assert [s['metric']['host'] for s in up] == ['kv-01'], (tmp_path / 'prometheus.log').read_text()
    # an empty store: about 1 MiB of its 1024 MiB
    assert 0 < float(ratio[0]['value'][1]) < 0.01
    # the scrape job and the target's labels stay on the recorded series
    assert ratio[0]['metric'] == {'__name__': 'host:redis_memory_used_bytes:ratio_max', 'host': 'kv-01',
                                  'pools': 'default', 'service': 'kv_store', 'job': 'lmcache_vllm_fleet'}
