# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/kv/kv_store_status.py (INFO as redis-server 7.0.15 prints it)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_status as st

INFO = """# Server
redis_version:7.0.15
redis_mode:standalone
# Clients
connected_clients:3
# Memory
used_memory:1048576000
maxmemory:1073741824
maxmemory_policy:allkeys-lru
# Stats
keyspace_hits:30
keyspace_misses:10
evicted_keys:7
# Cluster
cluster_enabled:0
# Keyspace
db0:keys=42,expires=0,avg_ttl=0
"""


def test_a_serving_store():
    row = st.status_row('kv-01', 'active', INFO)
    assert row['state'] == 'serving'
    assert (row['version'], row['keys'], row['hits'], row['misses'], row['hit_ratio'], row['evicted_keys']) == \
        ('7.0.15', 42, 30, 10, 0.75, 7)
    assert (row['used_memory_mb'], row['maxmemory_mb'], row['policy']) == (1000.0, 1024.0, 'allkeys-lru')
    assert row['problems'] == ['host kv-01: the store is full (1000.0 of 1024.0 MiB): it evicts the least recently '
                               'used pages (7 evicted so far)']


def test_a_stopped_store_says_what_serving_does():
    row = st.status_row('kv-01', 'inactive', '')
    assert row['state'] == 'down'
    assert row['problems'] == ["host kv-01: the store unit is inactive; its pools' LMCache servers keep serving from "
                               "their L1 and prefill; pages written meanwhile are not shared"]
    assert 'down' in st.status_line(row)


def test_the_exporter_state_is_shown_and_a_stopped_exporter_is_a_problem():
    assert st.status_row('kv-01', 'active', INFO)['exporter'] is None
    assert 'exporter' not in st.status_line(st.status_row('kv-01', 'active', INFO))
    running = st.status_row('kv-01', 'active', INFO, exporter='active')
    assert running['exporter'] == 'active' and ' exporter active' in st.status_line(running)
    assert not any('exporter' in p for p in running['problems'])
    stopped = st.status_row('kv-01', 'active', INFO, exporter='failed')
    assert stopped['problems'][-1] == ("host kv-01: the store's exporter unit is failed; Prometheus gets no metrics of "
                                       'this store (its target is down)')
    assert stopped['state'] == 'serving'


def test_an_active_store_that_does_not_answer():
    row = st.status_row('kv-01', 'active', '', error='NOAUTH Authentication required.')
    assert row['state'] == 'unanswered'
    assert 'NOAUTH' in row['problems'][0]


@pytest.mark.skipif(not os.path.exists('/usr/bin/redis-server'), reason='redis-server is not installed here')
def test_the_real_info_is_read(tmp_path):
    server = subprocess.Popen(['/usr/bin/redis-server', '--port', '16391', '--save', '', '--dir', str(tmp_path)],
                              stdout=subprocess.DEVNULL)
    try:
        for attempt in range(50):
            if subprocess.run(check=False, args=['redis-cli', '-p', '16391', 'PING'], capture_output=True, text=True).stdout.strip() \
                    == 'PONG':
                break
            subprocess.run(check=False, args=['sleep', '0.1'])
        subprocess.run(check=False, args=['redis-cli', '-p', '16391', 'SET', 'a', '1'], capture_output=True)
        subprocess.run(check=False, args=['redis-cli', '-p', '16391', 'GET', 'a'], capture_output=True)
        subprocess.run(check=False, args=['redis-cli', '-p', '16391', 'GET', 'b'], capture_output=True)
        info = subprocess.run(check=False, args=['redis-cli', '-p', '16391', 'INFO'], capture_output=True, text=True).stdout
        row = st.status_row('local', 'active', info)
        assert (row['state'], row['keys'], row['hits'], row['misses'], row['hit_ratio']) == ('serving', 1, 1, 1, 0.5)
    finally:
        server.terminate()
        server.wait(10)
