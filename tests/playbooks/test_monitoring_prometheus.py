# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Debian's prometheus scrapes what monitoring.yml generates and the recording rules answer PromQL.

monitoring.yml writes the targets (here for a host bound to the IPv6 wildcard, reached at 127.0.0.1) and copies
the rules; a real Prometheus (scripts/setup-prometheus.sh) scrapes them with the targets file as its file_sd and
evaluates the rules. The /metrics endpoints are the TEST DOUBLE of test_day2 (a local HTTP server printing the
counters LMCache and vLLM print); the molecule day2 scenario does the same against the real services.
Also: monitoring.yml refuses labels that would replace the collection's or be Prometheus's own, before writing.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from prometheus_tools import prometheus_program
from test_day2 import endpoints_fixture, free_port, local_host, write_inventory  # noqa: F401 pylint: disable=unused-import


def query(port, expr):
    url = 'http://127.0.0.1:%d/api/v1/query?query=%s' % (port, urllib.parse.quote(expr))
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read().decode())['data']['result']


@pytest.fixture(name='prometheus_binary')
def prometheus_binary_fixture():
    return prometheus_program('prometheus')


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

    (out / 'prometheus.yml').write_text(
        'global: {scrape_interval: 1s, evaluation_interval: 1s}\n'
        'rule_files: [lmcache_vllm_fleet.rules.yml]\n'
        'scrape_configs:\n'
        '  - job_name: lmcache_vllm_fleet\n'
        '    file_sd_configs: [{files: [targets.json], refresh_interval: 1s}]\n')
    port = free_port()
    log = open(str(tmp_path / 'prometheus.log'), 'w')
    proc = subprocess.Popen([prometheus_binary, '--config.file=%s' % (out / 'prometheus.yml'),
                             '--storage.tsdb.path=%s' % (tmp_path / 'tsdb'), '--web.listen-address=127.0.0.1:%d' % port],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        ratio, external, up, deadline = [], [], [], time.time() + 90
        # the two recording rules may land in different evaluations: wait for both
        while time.time() < deadline and not (ratio and external and len(up) == 2):
            time.sleep(1)
            try:
                up = query(port, 'up == 1')
                ratio = query(port, 'fleet:lmcache_lookup_hit_ratio:total')
                external = query(port, 'fleet:vllm_external_prefix_cache_hit_ratio:total')
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
