# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The routers of one router host (role ``vllm_router``): their checks, workers, ports and names.

``plan_router(host, settings, groups, workers_of)`` takes the router host's ``vllm_router_*`` variables (missing
ones from the role's ``defaults/main.yml``) with the serving and store ports of that host, the inventory's groups
and ``workers_of(name)`` (a worker's ``vllm_server_*`` variables and ``ansible_host``) and returns::

    {'host', 'errors', 'values', 'instances': [...], 'venv', 'pip', 'ownership', 'summary', ...}

One router instance per entry of ``vllm_router_instances``; its workers are the vLLM hosts of that entry's
inventory group (all of them, or those it lists), never discovered from the network. The argv and the unit lines
are built by ``router_units``.
"""

from __future__ import annotations

import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import package_spec
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.router import router_units as units
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    ACCOUNT_RE, SAFE_PATH_RE, HostSettings)

PREFIX = 'vllm_router_'
VARIABLE_RE = re.compile(r'^vllm_router_[A-Za-z0-9_]+$')
# The variables of the router host's own services whose ports a router must not take.
HOST_PORTS = ('vllm_server_port', 'lmcache_server_port', 'lmcache_server_http_port', 'kv_store_port',
              'kv_store_exporter_port')
# What the lookup reads from each worker (with the vllm_server role's defaults under them).
WORKER_VARIABLES = ('vllm_server_model', 'vllm_server_served_model_name', 'vllm_server_host', 'vllm_server_port',
                    'ansible_host')
# vllm-router 0.1.17's policies (docs/router.md). kv_aware needs vLLM's KV-cache events of every worker, which the
# collection does not wire: it is refused with that reason rather than started without its inputs.
POLICIES = ('cache_aware', 'round_robin', 'power_of_two', 'consistent_hash', 'random', 'sticky_least_loaded')
UNWIRED_POLICIES = ('kv_aware',)
INSTANCE_KEYS = ('group', 'port', 'metrics_port', 'policy', 'workers')
GROUP_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]{0,100}$')
SERVICE_PREFIX_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]{0,100}$')
UNIT_DIR = '/etc/systemd/system'


def router_defaults():
    """The role's ``defaults/main.yml`` (the only place its defaults are written)."""
    from ansible.module_utils.common.yaml import yaml_load  # controller side only
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, 'roles', 'vllm_router', 'defaults', 'main.yml')) as handle:
        return yaml_load(handle) or {}


def worker_defaults():
    """The defaults of the vllm_server role's variables a worker's URL and model come from."""
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import role_defaults
    defaults = role_defaults()
    return dict((name, defaults.get(name)) for name in WORKER_VARIABLES if name in defaults)


def worker_address(name, wvars):
    """(the address a router on another host dials for the worker ``name``, or None when vLLM listens on loopback)."""
    bind = str(wvars.get('vllm_server_host') or '')
    if addresses.is_loopback(bind):
        return None
    if bind and not addresses.is_wildcard(bind):
        return bind
    return str(wvars.get('ansible_host') or name)


def _worker_url(c, router_host, group, name, wvars):
    address = worker_address(name, wvars)
    if address is None:
        if name != router_host:
            c.error('vllm_router_instances', group, 'lists the worker %s, whose vLLM listens on loopback (%s) on '
                    'another host' % (name, wvars.get('vllm_server_host')),
                    'set vllm_server_host of %s to its address (with vllm_server_api_key), or run the router on %s'
                    % (name, name))
            return None
        address = str(wvars.get('vllm_server_host'))
    port = wvars.get('vllm_server_port')
    return 'http://%s:%s' % (addresses.url_host(address), port)


def _model(wvars):
    return (wvars.get('vllm_server_model'), wvars.get('vllm_server_served_model_name') or '')


def check_workers(c, router_host, entry, groups, workers_of):
    """``[{host, url}]`` of one instance: the hosts of its group (or those it lists), all serving one model."""
    group, members = entry['group'], list(groups.get(entry['group']) or [])
    listed = entry.get('workers')
    if listed is not None:
        outside = [w for w in listed if w not in members]
        if outside:
            c.error('vllm_router_instances', group, 'lists the worker(s) %s outside the model group %s (%s)'
                    % (', '.join(map(str, outside)), group, ', '.join(members) or 'no host'),
                    'list only hosts of %s, or route them with an instance of their own group' % group)
        members = [w for w in listed if w in members]
    if not members:
        c.error('vllm_router_instances', group, 'has no worker: the inventory group %s has no host' % group,
                'name the inventory group of one model\'s vLLM hosts, e.g. qwen36_hosts')
        return []
    defaults = worker_defaults()
    first, workers = None, []
    for name in members:
        wvars = dict(defaults)
        wvars.update(workers_of(name) or {})
        if not wvars.get('vllm_server_model'):
            c.error('vllm_router_instances', group, 'lists %s, which serves no model (vllm_server_model is empty)'
                    % name, 'route only vLLM hosts of the fleet')
            continue
        first = first or (name, _model(wvars))
        if _model(wvars) != first[1]:
            c.error('vllm_router_instances', group, 'mixes models: %s serves %s, %s serves %s' % (
                first[0], '/'.join(filter(None, first[1])), name, '/'.join(filter(None, _model(wvars)))),
                'route one model per instance: use an inventory group per model')
            continue
        url = _worker_url(c, router_host, group, name, wvars)
        if url:
            workers.append({'host': name, 'url': url})
    return workers


def _instance(c, index, raw):
    """One entry of vllm_router_instances, checked (None when unusable)."""
    where = 'vllm_router_instances[%d]' % index
    if not isinstance(raw, dict) or set(raw) - set(INSTANCE_KEYS) or not {'group', 'port', 'metrics_port'} <= set(raw):
        c.error(where, raw, 'is not a mapping of group, port, metrics_port (and optionally policy, workers)',
                'use e.g. {group: qwen36_hosts, port: 30000, metrics_port: 29000}')
        return None
    entry = dict(raw)
    if not isinstance(entry['group'], str) or not GROUP_RE.match(entry['group']):
        c.error(where + '.group', entry['group'], 'is not an inventory group name', 'use e.g. qwen36_hosts')
        return None
    for key in ('port', 'metrics_port'):
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            c.error('%s.%s' % (where, key), value, 'is not a TCP port', 'use a number from 1 to 65535')
            return None
    workers = entry.get('workers')
    if workers is not None and (not isinstance(workers, list) or not all(isinstance(w, str) for w in workers)):
        c.error(where + '.workers', workers, 'is not a list of inventory host names', 'use e.g. [gpu-01, gpu-02]')
        return None
    entry['policy'] = _policy(c, where + '.policy', entry.get('policy', c.cfg.get('vllm_router_policy')))
    return entry if entry['policy'] else None


def _policy(c, name, policy):
    if policy in UNWIRED_POLICIES:
        c.error(name, policy, 'needs the KV-cache events of every worker (--kv-event-source, --kv-event-model), '
                'which the collection does not wire yet', 'use cache_aware (docs/router.md)')
        return None
    if policy not in POLICIES:
        c.error(name, policy, 'is not a policy of vllm-router', 'use one of %s' % ', '.join(POLICIES))
        return None
    return policy


def check_ports(c, instances):
    """Every router port and metrics port distinct, and none a port of the host's own services."""
    taken = {}
    for name in HOST_PORTS:
        value = c.cfg.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            taken.setdefault(value, name)
    for entry in instances:
        for key in ('port', 'metrics_port'):
            label = 'vllm_router_instances[%s].%s' % (entry['group'], key)
            if entry[key] in taken:
                c.error(label, entry[key], 'collides with %s on this host' % taken[entry[key]],
                        'give every router port, metrics port and service port of the host its own number')
            else:
                taken[entry[key]] = label


def check_exposure(c):
    """A router beyond loopback only with vllm_router_allow_network (its administration endpoints are open)."""
    allow = c.boolean('vllm_router_allow_network')
    for name in ('vllm_router_bind', 'vllm_router_metrics_bind'):
        bind = c.cfg.get(name)
        if not isinstance(bind, str) or not bind.strip() or ' ' in bind.strip():
            c.error(name, bind, 'is not one address', 'use an IP address such as 127.0.0.1')
        elif not addresses.is_loopback(bind) and allow is not True:
            c.error(name, bind, 'exposes the router beyond loopback (no client authentication of its own, and '
                    '/add_worker and /remove_worker open to anyone who reaches it)', 'use 127.0.0.1, or set '
                    'vllm_router_allow_network=true when clients on a trusted network must reach it')


def _control_characters(c):
    for name, value in sorted(c.cfg.items()):
        if name.startswith(PREFIX) and isinstance(value, str) and sq.has_control_character(value):
            c.error(name, value, 'contains a control character', 'write it on one line')


def _names(c):
    v = {'service_prefix': c.text('vllm_router_service_prefix', SERVICE_PREFIX_RE, 'a unit name prefix',
                                  'use letters, digits and _.:- such as vllm-router')}
    for key in ('vllm_router_user', 'vllm_router_group'):
        v[key[len(PREFIX):]] = c.text(key, ACCOUNT_RE, 'a system account name', 'use e.g. vllm-router')
    for key in ('vllm_router_home', 'vllm_router_venvs_dir', 'vllm_router_manifest_path'):
        value = c.text(key, SAFE_PATH_RE, 'an absolute path of plain characters', 'use e.g. %s'
                       % router_defaults_example(key))
        problem = ownership.path_problem(value, router_defaults_example(key)) if value else None
        if problem:
            c.error(key, value, *problem)
            value = None
        v[key[len(PREFIX):]] = value
    try:
        v['version'] = package_spec.parse_version(c.cfg.get('vllm_router_version'))
    except ValueError as exc:
        c.error('vllm_router_version', c.cfg.get('vllm_router_version'), str(exc), 'use one exact version such as '
                '"0.1.17"')
        v['version'] = None
    try:
        v['wheelhouse'] = package_spec.parse_wheelhouse(c.cfg.get('vllm_router_wheelhouse'))
    except ValueError as exc:
        c.error('vllm_router_wheelhouse', c.cfg.get('vllm_router_wheelhouse'), str(exc), 'use "" or /srv/wheels')
    extra = c.cfg.get('vllm_router_pip_extra_args')
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        c.error('vllm_router_pip_extra_args', extra, 'is not a list of strings', 'use one string per argument')
    return v


EXAMPLES = {'vllm_router_home': '/var/lib/vllm-router', 'vllm_router_venvs_dir': '/opt/vllm-router',
            'vllm_router_manifest_path': '/etc/lmcache-vllm-fleet/router-manifest.json'}


def router_defaults_example(key):
    return EXAMPLES[key]


def _instances(c, groups, workers_of):
    raw = c.cfg.get('vllm_router_instances')
    if not isinstance(raw, list) or not raw:
        c.error('vllm_router_instances', raw, 'is not a non-empty list (a host of the routers group runs at least '
                'one router)', 'use e.g. [{group: qwen36_hosts, port: 30000, metrics_port: 29000}]')
        return []
    entries = [e for e in (_instance(c, i, item) for i, item in enumerate(raw)) if e]
    seen = set()
    for entry in entries:
        if entry['group'] in seen:
            c.error('vllm_router_instances', entry['group'], 'names the model group twice', 'one router per group')
        seen.add(entry['group'])
        entry['worker_list'] = check_workers(c, c.host, entry, groups, workers_of)
    check_ports(c, entries)
    return entries


def host_settings(host, variables, template, template_error, error_types):
    """(the router host's ``vllm_router_*`` and service port variables, templated; the unusable ones' errors):
    ``template`` the lookup's templating, ``error_types`` the exceptions it raises for a value it cannot render."""
    settings, unusable = {}, []
    for name in sorted(n for n in variables if VARIABLE_RE.match(n) or n in HOST_PORTS):
        try:
            settings[name] = template(variables[name])
        except error_types as e:
            unusable.append(template_error(host, name, getattr(e, 'message', None) or e))
    return settings, unusable


def plan_from_inventory(host, variables, hostvars, groups, template, template_error, error_types):
    """The plan of the router host ``host`` as the lookups make it: its own ``variables`` (``host_settings``; a value
    that cannot be rendered is an error of the plan) and each worker's ``WORKER_VARIABLES`` from ``hostvars``,
    templated with ``template``."""
    settings, unusable = host_settings(host, variables, template, template_error, error_types)

    def workers_of(name):
        wvars = hostvars.get(name) or {}
        names = [n for n in WORKER_VARIABLES if n in wvars]
        return dict(zip(names, template([wvars[n] for n in names])))

    plan = plan_router(host, settings, groups, workers_of)
    if unusable:
        plan['errors'] = unusable + list(plan['errors'])
    return plan


def plan_router(host, settings, groups, workers_of, defaults=None):
    """The plan of one router host (see the module docstring). Never raises for bad input."""
    cfg = router_defaults() if defaults is None else dict(defaults)
    cfg.update(dict(settings or {}))
    c = HostSettings(host, cfg)
    _control_characters(c)
    v = _names(c)
    names_errors = list(c.errors)
    check_exposure(c)
    c.required_integer('vllm_router_drain_timeout', 0, fix='use the seconds a drained worker may take to finish its '
                       'requests, e.g. 120 (0: do not wait)')
    knobs = units.flag_values(c)
    entries = _instances(c, groups or {}, workers_of)
    plan = {'host': host, 'errors': c.errors, 'values': v, 'ownership_errors': names_errors}
    if not all(v.get(k) for k in ('service_prefix', 'user', 'group', 'home', 'venvs_dir', 'manifest_path', 'version')):
        return plan
    venv = '%s/vllm-router-%s' % (v['venvs_dir'].rstrip('/'), v['version'])
    plan.update({'venv': venv, 'metrics_bind': cfg.get('vllm_router_metrics_bind'), 'manifest_path': v['manifest_path'], 'unit_marker': ownership.UNIT_MARKER,
                 'pip': package_spec.pip_argv('%s/bin/pip' % venv, ['vllm-router==%s' % v['version']],
                                              cfg.get('vllm_router_wheelhouse') or '',
                                              [str(a) for a in cfg.get('vllm_router_pip_extra_args') or []])})
    plan['instances'] = [units.instance(cfg, v, venv, entry, knobs) for entry in entries]
    plan['ownership'] = units.ownership_entries(v, venv, plan['instances'])
    plan['summary'] = [{'host': host, 'group': i['group'], 'service': i['service_name'], 'listen': i['listen'],
                        'policy': i['policy'], 'workers': [w['host'] for w in i['workers']]}
                       for i in plan['instances']]
    if c.errors:
        plan['errors'] = c.errors
    return plan
