# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm-router's command line, unit lines and ownership entries (role ``vllm_router``), from ``router_config``.

``FLAGS`` is the one table of the router's knobs: each ``vllm_router_<name>`` variable, the flag of
``vllm-router`` 0.1.17 it sets, and what it accepts. A knob set to null is not passed (the router's own default).
No secret is ever passed: the router forwards each client's ``Authorization`` header to the workers
(docs/router.md), so the router host needs no key.
"""

from __future__ import annotations

import posixpath

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as store
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_unit
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import as_int, as_number

ROLE = 'vllm_router'
UNIT_DIR = '/etc/systemd/system'
DOCUMENTATION = 'https://github.com/vllm-project/router'
# (variable suffix, flag, kind, low, high): kind int, float, bool (a switch), str or a tuple of choices.
FLAGS = (
    ('health_check_interval_secs', '--health-check-interval-secs', 'int', 1, None),
    ('health_check_timeout_secs', '--health-check-timeout-secs', 'int', 1, None),
    ('health_failure_threshold', '--health-failure-threshold', 'int', 1, None),
    ('health_success_threshold', '--health-success-threshold', 'int', 1, None),
    ('health_check_endpoint', '--health-check-endpoint', 'path', None, None),
    ('worker_startup_timeout_secs', '--worker-startup-timeout-secs', 'int', 1, None),
    ('worker_startup_check_interval', '--worker-startup-check-interval', 'int', 1, None),
    ('request_timeout_secs', '--request-timeout-secs', 'int', 1, None),
    ('max_concurrent_requests', '--max-concurrent-requests', 'int', 1, None),
    ('queue_size', '--queue-size', 'int', 0, None),
    ('queue_timeout_secs', '--queue-timeout-secs', 'int', 1, None),
    ('cache_threshold', '--cache-threshold', 'float', 0.0, 1.0),
    ('balance_abs_threshold', '--balance-abs-threshold', 'int', 0, None),
    ('balance_rel_threshold', '--balance-rel-threshold', 'float', 1.0, None),
    ('eviction_interval_secs', '--eviction-interval-secs', 'int', 1, None),
    ('max_tree_size', '--max-tree-size', 'int', 1, None),
    ('max_payload_size', '--max-payload-size', 'int', 1, None),
    ('retry_max_retries', '--retry-max-retries', 'int', 1, None),
    ('retry_initial_backoff_ms', '--retry-initial-backoff-ms', 'int', 0, None),
    ('retry_max_backoff_ms', '--retry-max-backoff-ms', 'int', 0, None),
    ('cb_failure_threshold', '--cb-failure-threshold', 'int', 1, None),
    ('cb_success_threshold', '--cb-success-threshold', 'int', 1, None),
    ('cb_timeout_duration_secs', '--cb-timeout-duration-secs', 'int', 1, None),
    ('cb_window_duration_secs', '--cb-window-duration-secs', 'int', 1, None),
    ('disable_retries', '--disable-retries', 'bool', None, None),
    ('disable_circuit_breaker', '--disable-circuit-breaker', 'bool', None, None),
    ('log_level', '--log-level', ('debug', 'info', 'warning', 'error', 'critical'), None, None),
)
# The KV store's sandbox (no GPU, no devices, no clock, no executable memory, nothing written but the journal):
# measured to run vllm-router 0.1.17 (without its WebAssembly middleware, which the collection never enables).
HARDENING = store.HARDENING


def _flag_value(c, name, kind, low, high):
    raw = c.cfg.get(name)
    if raw is None:
        return None
    if kind == 'bool':
        return c.boolean(name)
    if isinstance(kind, tuple):
        if raw not in kind:
            c.error(name, raw, 'is not one of %s' % ', '.join(kind), 'use one of them or null')
            return None
        return raw
    if kind == 'path':
        if not isinstance(raw, str) or not raw.startswith('/') or ' ' in raw or sq.has_control_character(raw):
            c.error(name, raw, 'is not an HTTP path', 'use e.g. /health')
            return None
        return raw
    value = as_int(raw) if kind == 'int' else as_number(raw)
    if value is None or isinstance(raw, bool) or (low is not None and value < low) or \
            (high is not None and value > high):
        what = 'whole number' if kind == 'int' else 'number'
        bounds = ('' if low is None else ' >= %s' % low) + ('' if high is None else ' and <= %s' % high)
        c.error(name, raw, 'is not a %s%s' % (what, bounds), 'use such a value, or null for the router\'s own default')
        return None
    return value


def flag_values(c):
    """``[(flag, value)]`` of the knobs that are set, checked (errors go to ``c``)."""
    out = []
    for suffix, flag, kind, low, high in FLAGS:
        value = _flag_value(c, 'vllm_router_' + suffix, kind, low, high)
        if value is None or value is False:
            continue
        out.append((flag, None if value is True else value))
    return out


def argv(venv, cfg, entry, knobs):
    """vllm-router's command line of one instance."""
    out = ['%s/bin/vllm-router' % venv,
           '--host', str(cfg.get('vllm_router_bind')), '--port', str(entry['port']),
           '--policy', entry['policy'],
           '--prometheus-host', str(cfg.get('vllm_router_metrics_bind')),
           '--prometheus-port', str(entry['metrics_port'])]
    for flag, value in knobs:
        out += [flag] if value is None else [flag, str(value)]
    # --worker-urls takes every following word: it comes last.
    return out + ['--worker-urls'] + [w['url'] for w in entry['worker_list']]


def unit_lines(v, service_name, group, command, start_timeout):
    service = ['Type=exec',
               'User=%s' % v['user'], 'Group=%s' % v['group'],
               'WorkingDirectory=%s' % sq.exec_word(v['home']),
               'ExecStart=%s' % sq.exec_line(command),
               'KillSignal=SIGTERM', 'Restart=on-failure', 'RestartSec=2',
               'TimeoutStartSec=%d' % start_timeout, 'TimeoutStopSec=30']
    return systemd_unit.unit_file(sq.specifier_text('vllm-router in front of the vLLM hosts of %s' % group),
                                  DOCUMENTATION, service + list(HARDENING))


def instance(cfg, v, venv, entry, knobs):
    """One router instance of the plan: its unit, argv, listen address and workers."""
    name = '%s-%s' % (v['service_prefix'], entry['group'].replace('_', '-'))
    command = argv(venv, cfg, entry, knobs)
    bind = str(cfg.get('vllm_router_bind'))
    start_timeout = as_int(cfg.get('vllm_router_start_timeout')) or 120
    return {'group': entry['group'], 'service_name': name, 'unit_path': '%s/%s.service' % (UNIT_DIR, name),
            'policy': entry['policy'], 'port': entry['port'], 'metrics_port': entry['metrics_port'],
            'listen': '%s:%d' % (addresses.url_host(bind), entry['port']),
            'url': 'http://%s' % addresses.host_port(addresses.local_address(bind), entry['port']),
            'metrics_url': 'http://%s/metrics' % addresses.host_port(
                addresses.local_address(str(cfg.get('vllm_router_metrics_bind'))), entry['metrics_port']),
            'workers': entry['worker_list'], 'argv': command, 'start_timeout': start_timeout,
            'drain_timeout': as_int(cfg.get('vllm_router_drain_timeout')) or 0,
            'unit_lines': unit_lines(v, name, entry['group'], command, start_timeout)}


def _entry(kind, path, variable, value, **extra):
    entry = {'kind': kind, 'path': path, 'variable': variable, 'value': value, 'role': ROLE}
    entry.update(extra)
    return entry


def ownership_entries(v, venv, instances):
    """Every unit, directory, user and group the role creates on a router host (what remove.yml deletes)."""
    found = [_entry('unit', i['unit_path'], 'vllm_router_service_prefix', i['service_name'], unit=i['service_name'])
             for i in instances]
    found += [
        _entry('venvs_dir', v['venvs_dir'], 'vllm_router_venvs_dir', v['venvs_dir']),
        _entry('venv', venv, 'vllm_router_venvs_dir', v['venvs_dir']),
        _entry('data_dir', v['home'], 'vllm_router_home', v['home'], user=v['user']),
        _entry('user', v['user'], 'vllm_router_user', v['user'], home=v['home']),
        _entry('group', v['group'], 'vllm_router_group', v['group'], user=v['user']),
        _entry('manifest_dir', posixpath.dirname(v['manifest_path']), 'vllm_router_manifest_path',
               v['manifest_path']),
    ]
    seen, out = set(), []
    for entry in found:
        if ownership.key_of(entry) not in seen:
            seen.add(ownership.key_of(entry))
            out.append(entry)
    return out


def stale_units(owned_units, owned_paths, instances):
    """``[{unit, path}]``: the routers the manifest says the collection created on the host (``owned_units`` and
    ``owned_paths`` of ``fleet_ownership``) that no entry of ``vllm_router_instances`` plans any more."""
    planned = set(i['service_name'] for i in instances or [])
    out = []
    for unit in sorted(set(owned_units or [])):
        path = '%s/%s.service' % (UNIT_DIR, unit)
        if unit not in planned and path in set(owned_paths or []):
            out.append({'unit': unit, 'path': path})
    return out
