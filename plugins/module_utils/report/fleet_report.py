# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet-wide reports built on the control node (pure functions).

Every fleet table is built here, as rows and lines, and returned by :func:`fleet_table` (the filter
``lmcache_vllm.fleet.fleet_table``; the plan's action calls :func:`plan_table`). YAML only displays them:

- ``summary``: deploy.yml's stage 5, one row per host from its result (``host_result``, the fact ``fleet_result``);
- ``status``: status.yml's table from every host's ``service_info`` result (or its failure), with the HTML page;
- ``gpus``: gpus.yml's lines, every host's GPUs, and every GPU problem of the fleet;
- the plan (``plan_table``): fleet_plan's rows, the play's lines and the Markdown and HTML pages.

The pages are written by ``fleet_report_pages``. Besides the tables:
- :func:`file_sd_targets` lists every host's vLLM and LMCache ``/metrics`` endpoints as a Prometheus
  ``file_sd`` target list, with the labels ``host``, ``model`` and ``service``, and says which endpoints
  Prometheus cannot reach (bound to loopback).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool_breakeven
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import host_result
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report.fleet_report_pages import (
    plan_html, plan_markdown, status_html)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.addresses import is_wildcard
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules import FleetRuleError, monitoring_label_errors
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.hardware_groups import describe

LOOPBACK_NAMES = ('localhost', 'localhost.localdomain', 'ip6-localhost')

# The host variables each table reads (the filter passes only these, host by host).
INPUTS = {
    'summary': ('fleet_result',),
    'status': ('__fleet_status_model', '__fleet_status', '__fleet_plan'),
    'gpus': ('__fleet_gpus',),
}

SUMMARY_TITLES = ('host', 'model', 'TP', 'N (source)', 'predicted', 'chunk', 'mnbt', 'lmcache', 'vllm', 'GPUs', 'result')
PLAN_FORMAT = '%-14s %-32s %3s %-24s %5s %-9s %6s %7s %-17s %s'

COLUMNS = (('host', 'host'), ('state', 'state'), ('lmcache', 'lmcache'), ('vllm', 'vllm'), ('model', 'model'),
           ('n', 'N (source)'), ('mamba', 'M (source)'), ('versions', 'vllm / lmcache'), ('gpus', 'GPUs'),
           ('lmcache_hit', 'LMCache hit'), ('vllm_external_hit', 'vLLM ext. hit'), ('vllm_prefix_hit', 'vLLM prefix hit'),
           ('l2', 'L2 / break-even GB/s'))


def percent(value):
    """``0.512`` -> ``51.2%``; None -> ``-``."""
    if value is None:
        return '-'
    return '%.1f%%' % (100.0 * value)


def _health(service):
    health = (service or {}).get('health') or {}
    if health.get('ok'):
        return 'ok'
    return str(health.get('status') or 'no answer')


def _mamba(mamba):
    """``6 (refusal)``: the Mamba cache blocks M and where they come from; ``-`` when unknown."""
    if not isinstance(mamba, dict) or mamba.get('mamba_cache_blocks') is None:
        return '-'
    return '%s (%s)' % (mamba['mamba_cache_blocks'], mamba.get('source') or '?')


def _unit(service):
    service = service or {}
    if not service.get('present', False):
        return 'absent'
    state = service.get('active_state') or 'unknown'
    if state == 'active':
        return 'active/%s' % _health(service)
    return state


def _gpus(gpus):
    if gpus is None:
        return '-'
    if not gpus.get('driver_present'):
        return 'no driver'
    names = sorted(set(g.get('name') or '?' for g in gpus.get('gpus') or []))
    used = sum(g.get('memory_used_mib') or 0 for g in gpus.get('gpus') or [])
    total = sum(g.get('memory_total_mib') or 0 for g in gpus.get('gpus') or [])
    return '%dx %s %.0f/%.0f GiB' % (gpus.get('count') or 0, '+'.join(names), used / 1024.0, total / 1024.0)


def status_rows(results):
    """``results``: one dict per host, ``{'host', 'model', 'result'}`` where ``result`` is what the
    service_info module returned (or the failed/unreachable task's result, or None when the host
    never ran it). Returns the table rows."""
    rows = []
    for item in results or []:
        host = item.get('host')
        result = item.get('result') or {}
        model = item.get('model') or '-'
        if not result or result.get('unreachable') or result.get('failed') or 'state' not in result:
            if result.get('unreachable'):
                state, why = 'unreachable', result.get('msg') or 'unreachable'
            elif result.get('failed'):
                state, why = 'error', result.get('msg') or 'the status could not be read'
            else:
                state, why = 'unknown', 'the status was not read (the host left the play)'
            rows.append({'host': host, 'state': state, 'lmcache': '-', 'vllm': '-', 'model': model, 'n': '-',
                         'mamba': '-', 'n_value': None, 'n_source': None, 'versions': '-', 'gpus': '-', 'gpu_lines': [],
                         'lmcache_hit': '-', 'vllm_external_hit': '-', 'vllm_prefix_hit': '-',
                         'problems': ['host %s: %s' % (host, str(why).strip().splitlines()[0] if str(why).strip() else why)]})
            continue
        services = result.get('services') or {}
        n = result.get('block_size') or {}
        versions = result.get('versions') or {}
        metrics = result.get('metrics') or {}
        lmcache_metrics = metrics.get('lmcache') or {}
        vllm_metrics = metrics.get('vllm') or {}
        gpus = result.get('gpus')
        rows.append({
            'host': host,
            'state': result.get('state'),
            'lmcache': _unit(services.get('lmcache')),
            'vllm': _unit(services.get('vllm')),
            'model': model,
            'n': '%s (%s)' % (n.get('n') if n.get('n') is not None else '?', n.get('source') or 'unknown'),
            'n_value': n.get('n'),
            'n_source': n.get('source'),
            'n_detail': n.get('detail'),
            'n_live': (n.get('live') or {}).get('n'),
            'n_live_source': (n.get('live') or {}).get('source'),
            'mamba': _mamba(result.get('mamba')),
            'mamba_cache_blocks': (result.get('mamba') or {}).get('mamba_cache_blocks'),
            'mamba_source': (result.get('mamba') or {}).get('source'),
            'mamba_detail': (result.get('mamba') or {}).get('detail'),
            'versions': '%s / %s' % (versions.get('vllm') or '-', versions.get('lmcache') or '-'),
            'vllm_version': versions.get('vllm'),
            'vllm_package': versions.get('vllm_package'),
            'lmcache_version': versions.get('lmcache'),
            'gpus': _gpus(gpus),
            'gpu_lines': (gpus or {}).get('summary') or [],
            'lmcache_hit': percent(lmcache_metrics.get('hit_ratio')),
            'lmcache_hit_tokens': lmcache_metrics.get('lookup_hit_tokens'),
            'lmcache_requested_tokens': lmcache_metrics.get('lookup_requested_tokens'),
            'vllm_external_hit': percent(vllm_metrics.get('external_hit_ratio')),
            'vllm_external_hits': vllm_metrics.get('external_prefix_cache_hits'),
            'vllm_external_queries': vllm_metrics.get('external_prefix_cache_queries'),
            'vllm_prefix_hit': percent(vllm_metrics.get('prefix_hit_ratio')),
            'problems': list(result.get('problems') or []),
        })
    return rows


def status_lines(rows):
    """The text table: a header line, one line per host, then every problem on its own line."""
    widths = {}
    for key, title in COLUMNS:
        widths[key] = max([len(title)] + [len(str(r.get(key, ''))) for r in rows])
    lines = [' '.join(title.ljust(widths[key]) for key, title in COLUMNS).rstrip()]
    for row in rows:
        lines.append(' '.join(str(row.get(key, '')).ljust(widths[key]) for key, _title in COLUMNS).rstrip())
    counts = {}
    for row in rows:
        counts[row['state']] = counts.get(row['state'], 0) + 1
    lines.append('%d host(s): %s' % (len(rows), ', '.join('%d %s' % (counts[s], s) for s in sorted(counts))))
    for row in rows:
        lines.extend(row['problems'])
    return lines


def _is_loopback(address):
    address = str(address or '').strip().strip('[]')
    if address.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def file_sd_targets(hosts):
    """``hosts``: one dict per host: ``host``, ``address`` (how Prometheus reaches the host, e.g.
    ``ansible_host``), ``model``, ``vllm_host``, ``vllm_port``, ``lmcache_http_host``, ``lmcache_http_port``,
    and optionally ``labels`` (extra labels for both targets), ``block_size`` (the plan's N: the vLLM target gets
    ``fleet_block_size``, which the alert VllmBlockSizeDiffersFromPlan compares with the N vLLM reports) and
    ``hybrid`` (true: the vLLM target gets ``fleet_hybrid="true"``, for the alert of a hybrid model's refusal).

    Returns ``{'targets': [file_sd groups], 'skipped': [sentences]}``: an endpoint bound to loopback is
    left out (Prometheus on another machine cannot reach it) and named in ``skipped``. Extra labels may not
    replace ``host`` or ``service`` nor be Prometheus meta labels (``__*``): FleetRuleError names them."""
    errors = []
    for item in hosts or []:
        errors.extend(e for e in monitoring_label_errors(item.get('labels')) if e not in errors)
    if errors:
        raise FleetRuleError('; '.join(errors))
    groups, skipped = [], []
    for item in hosts or []:
        host = item['host']
        address = item.get('address') or host
        for service, bind_var, bind, port, label in (
                ('vllm', 'vllm_server_host', item.get('vllm_host'), item.get('vllm_port'), 'vLLM'),
                ('lmcache', 'lmcache_server_http_host', item.get('lmcache_http_host'), item.get('lmcache_http_port'),
                 "LMCache's HTTP API")):
            bind = '' if bind is None else str(bind).strip()
            if _is_loopback(bind):
                fix = ('set vllm_server_host to an address Prometheus reaches (0.0.0.0 or the host\'s private '
                       'address; set vllm_server_api_key when the network is not private)') if service == 'vllm' else (
                    'set lmcache_server_http_host to the host\'s private address (the API has no authentication: '
                    'never a public one)')
                skipped.append('host %s: %s listens on %s (%s), which Prometheus cannot reach from another machine; %s'
                               % (host, label, bind, bind_var, fix))
                continue
            scrape = address if is_wildcard(bind) else bind
            labels = {'host': str(host), 'model': str(item.get('model') or ''), 'service': service}
            labels.update(dict((str(k), str(v)) for k, v in (item.get('labels') or {}).items()))
            if service == 'vllm':
                labels.update(_plan_labels(item))
            groups.append({'targets': [addresses.host_port(scrape, int(port))], 'labels': labels})
    return {'targets': groups, 'skipped': skipped}


def _plan_labels(item):
    """The plan's N and whether the model is hybrid, as labels of the vLLM target (only what the plan knows)."""
    labels = {}
    block_size = item.get('block_size')
    if block_size not in (None, '') and str(block_size).isdigit() and int(block_size) > 0:
        labels['fleet_block_size'] = str(int(block_size))
    if item.get('hybrid') is True or str(item.get('hybrid')).lower() == 'true':
        labels['fleet_hybrid'] = 'true'
    return labels


def fleet_table(kind, hosts, host_vars):
    """The table ``kind`` (``summary``, ``status`` or ``gpus``) of ``hosts`` (in order), from ``host_vars``:
    ``{host: {variable: value}}`` holding the variables of ``INPUTS[kind]`` that the host has.

    Returns ``{'rows', 'lines'}`` and, per kind: ``problems`` (gpus: every GPU problem of the fleet),
    ``html`` and ``results`` (status: the page and every host's raw result)."""
    if kind not in INPUTS:
        raise ValueError('unknown fleet table %r; one of: %s' % (kind, ', '.join(sorted(INPUTS))))
    hosts = list(hosts or [])
    host_vars = dict((host, (host_vars or {}).get(host) or {}) for host in hosts)
    if kind == 'summary':
        rows = summary_rows(hosts, host_vars)
        return {'rows': rows, 'lines': summary_lines(rows)}
    if kind == 'gpus':
        return gpus_table(hosts, host_vars)
    results = dict((host, host_vars[host].get('__fleet_status')) for host in hosts)
    rows = status_rows([{'host': host, 'model': host_vars[host].get('__fleet_status_model') or '-',
                         'result': results[host]} for host in hosts])
    _l2_pools(rows, host_vars, results)
    return {'rows': rows, 'lines': status_lines(rows), 'html': status_html(rows), 'results': results}


def _l2_pools(rows, host_vars, results):
    """Each pooled host's L2 against its break-even (kv_pool_breakeven): the row's ``l2`` cell and ``l2_pool``, its
    result's ``l2_pool`` (status.json), and a problem when the store is slower than recompute."""
    for row in rows:
        kv = (host_vars[row['host']].get('__fleet_plan') or {}).get('kv_pool')
        result = results.get(row['host'])
        metrics = ((result or {}).get('metrics') or {}).get('lmcache') if isinstance(result, dict) else None
        entry = kv_pool_breakeven.status_entry(row['host'], kv, metrics)
        row.update(l2=kv_pool_breakeven.status_text(entry), l2_pool=entry)
        if entry and isinstance(result, dict):
            results[row['host']] = dict(result, l2_pool=entry)
        if entry and entry['state'] == 'slower':
            row['problems'].append(entry['message'])


def summary_rows(hosts, host_vars):
    """deploy.yml's stage 5: one row per host, read from its result (the public fact ``fleet_result``)."""
    return [host_result.summary_row(host, (host_vars.get(host) or {}).get('fleet_result')) for host in hosts]


def summary_lines(rows):
    """The summary as the play shows it: a header, one line per host, then every host's problems."""
    host_w = max([4] + [len(str(r['host'])) for r in rows])
    model_w = max([5] + [len(str(r['model'])) for r in rows])
    fmt = '%%-%ds %%-%ds %%3s %%-13s %%9s %%6s %%6s %%-9s %%-9s %%4s %%s' % (host_w, model_w)
    lines = [fmt % SUMMARY_TITLES]
    for r in rows:
        mnbt = r['max_num_batched_tokens'] if r['max_num_batched_tokens'] is not None else 'default'
        lines.append(fmt % (r['host'], r['model'], r['tp'], '%s (%s)' % (r['n'], r['n_source']), r['predicted'],
                            r['chunk_size'], mnbt, r['lmcache'], r['vllm'], r['gpus'], r['result']))
    for r in rows:
        lines.extend(r['problems'])
    return lines


def _gpu_line(gpu):
    used = gpu.get('memory_used_mib')
    return '  %s %s %s %s MiB, %s MiB used, compute %s' % (
        gpu.get('index'), gpu.get('name'), gpu.get('uuid'), gpu.get('memory_total_mib'),
        used if used is not None else '?', gpu.get('compute_cap') or '?')


def gpus_table(hosts, host_vars):
    """gpus.yml: every host's ``gpu_facts`` result (``__fleet_gpus``) as lines, and every GPU problem."""
    rows, lines, problems = [], [], []
    for host in hosts:
        result = host_vars.get(host, {}).get('__fleet_gpus') or {}
        facts = (result.get('ansible_facts') or {}).get('fleet_gpus')
        if facts is None:
            why = result.get('msg', 'the host left the play')
            rows.append({'host': host, 'read': False, 'reason': why, 'gpus': [], 'problems': []})
            lines.append('%s: not read (%s)' % (host, why))
            problems.append('host %s: the GPUs could not be read' % host)
            continue
        host_problems = list(result.get('problems') or [])
        rows.append({'host': host, 'read': True, 'reason': facts.get('reason'), 'gpus': list(facts.get('gpus') or []),
                     'problems': host_problems})
        lines.append('%s: %s' % (host, facts.get('reason')))
        lines.extend(_gpu_line(gpu) for gpu in facts.get('gpus') or [])
        problems.extend(host_problems)
    return {'rows': rows, 'lines': lines, 'problems': problems}


def plan_row(public, prediction):
    """A host's row of the plan (fleet.md, fleet.html and the play's output)."""
    summary = public['summary']
    p = prediction or {}
    gpu_kind = p.get('assumed_architecture', '?')
    if 'architecture_source' in p:
        gpu_kind = '%s (%s)' % (gpu_kind, p['architecture_source'])
    row = dict(summary)
    row.update(architecture=p.get('architecture', '?'), gpu_kind=gpu_kind,
               dtype=p.get('model_dtype', summary['dtype']), conv_dtype=p.get('conv_dtype', '-'),
               ssm_dtype=p.get('ssm_dtype', summary['ssm_dtype']))
    return row


def plan_lines(rows, plan_dir, groups=()):
    """The plan as the play shows it: one line per host, the probe groups, then where the plan was written."""
    lines = [PLAN_FORMAT % ('host', 'model', 'TP', 'dtype/kv/ssm', 'N', 'source', 'chunk', 'mnbt', 'ports vllm/lmc/http',
                            'group')]
    for r in rows:
        mnbt = r['max_num_batched_tokens'] if r['max_num_batched_tokens'] is not None else 'default'
        lines.append(PLAN_FORMAT % (
            r['host'], r['model'], r['tp'], '%s/%s/%s' % (r['dtype'], r['kv_cache_dtype'], r['ssm_dtype']),
            r['n'], r['n_source'], r['chunk_size'], mnbt,
            '%s/%s/%s' % (r['vllm_port'], r['lmcache_port'], r['lmcache_http_port']), r.get('group', '-')))
    lines.extend(describe(group) for group in groups)
    lines.append('plan written to %s (fleet.md, fleet.html, one folder per host)' % plan_dir)
    return lines


def plan_table(rows, groups, warnings, plan_dir):
    """The plan: ``{'rows', 'lines', 'markdown', 'html'}``; the warnings are the plan's, then each row's, each once."""
    shown = list(warnings or [])
    for row in rows:
        shown.extend(w for w in row.get('warnings') or [] if w not in shown)
    return {'rows': rows, 'lines': plan_lines(rows, plan_dir, groups),
            'markdown': plan_markdown(rows, groups, shown), 'html': plan_html(rows, shown)}
