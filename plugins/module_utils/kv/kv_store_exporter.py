# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The KV store's Prometheus exporter (``kv_store_exporter``): Debian's ``prometheus-redis-exporter``.

``check(c, v)`` checks the ``kv_store_exporter*`` variables with the store's checker ``c`` (``kv_store_config``)
and returns the clean values; ``paths(v)`` names what the role creates for it; ``plan(values, paths, store,
hardening, password_hash)`` returns the exporter's part of the store plan::

    {'enabled', 'port', 'listen', 'redis_addr', 'username', 'acl_line', 'env_lines', 'argv', 'unit_lines',
     'bind', 'package', 'package_unit', 'unit_path', 'env_path', 'marker_path', 'service_name'}

The exporter logs in as an ACL user of its own that may run only what the exporter 1.45 runs on a scrape
(``EXPORTER_COMMANDS``) and reads no key. Its password reaches the store only as its SHA-256 (the ACL file) and
the exporter only through its 0600 root environment file (``REDIS_USER`` / ``REDIS_PASSWORD``, which the exporter
reads from its environment); never a command line or a unit line.
"""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import ACL_USER_RE, as_bool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_unit

PACKAGE = 'prometheus-redis-exporter'
BINARY = '/usr/bin/prometheus-redis-exporter'
PACKAGE_UNIT = 'prometheus-redis-exporter.service'
# What the package owns besides its unit: the collection's names never name them.
PACKAGE_UNITS = ('prometheus-redis-exporter',)
PACKAGE_ACCOUNTS = ('prometheus',)
PACKAGE_DIRECTORIES = ('/var/lib/prometheus', '/var/log/prometheus')
# The commands prometheus-redis-exporter 1.45 runs on each scrape (read from the store's commandstats during a
# scrape of the real exporter): CLIENT SETNAME, CONFIG GET, INFO, LATENCY LATEST, SLOWLOG GET and LEN, and
# CLUSTER INFO on a cluster node; PING for -ping-on-connect. No key pattern: it reads no key.
EXPORTER_COMMANDS = ('info', 'ping', 'config|get', 'client|setname', 'latency|latest', 'slowlog|get', 'slowlog|len',
                     'cluster|info')
EXPORTER_ACL_RULES = 'resetkeys resetchannels -@all ' + ' '.join('+' + c for c in EXPORTER_COMMANDS)
SUFFIX = '-exporter'
ENV_NAME = 'exporter.env'
MARKER_NAME = 'exporter-installed-by-collection'
MIN_PASSWORD = 16


def _password(c, enabled):
    """The exporter's password (never shown); required only with the exporter on."""
    password = c.cfg.get('kv_store_exporter_password')
    if not enabled:
        return None
    if not isinstance(password, str) or len(password) < MIN_PASSWORD or sq.has_control_character(password) \
            or any(ch.isspace() for ch in password):
        c.errors.append('host %s: kv_store_exporter_password (value hidden) is missing, not a string, shorter than %d '
                        'characters or holds spaces or control characters; set it from a vault, e.g. '
                        'kv_store_exporter_password: "{{ vault_kv_store_exporter_password }}", or set '
                        'kv_store_exporter=false' % (c.host, MIN_PASSWORD))
        return None
    if password == c.cfg.get('kv_store_password'):
        c.errors.append('host %s: kv_store_exporter_password (value hidden) is the LMCache user\'s password '
                        '(kv_store_password); give the exporter a password of its own (a second vault '
                        'variable)' % c.host)
        return None
    return password


def check(c, v):
    """The exporter's clean values (``None`` where wrong; ``c`` collects the errors)."""
    enabled = c.boolean('kv_store_exporter')
    e = {'enabled': enabled is True,
         'port': c.required_integer('kv_store_exporter_port', 1, 65535, 'use a TCP port such as 9121')}
    if e['enabled'] and e['port'] is not None and e['port'] == v.get('port'):
        c.error('kv_store_exporter_port', e['port'], 'is the store\'s own port (kv_store_port)',
                'use another port, e.g. 9121')
    bind = c.cfg.get('kv_store_exporter_bind')
    if bind is None or bind == '':
        bind = v.get('bind')
    elif not isinstance(bind, str) or ' ' in bind.strip():
        c.error('kv_store_exporter_bind', bind, 'is not one address', 'use an IP address such as 127.0.0.1, or '
                'leave it null to listen where the store does (kv_store_bind)')
        bind = None
    elif not addresses.is_loopback(bind) and c.boolean('kv_store_allow_network') is not True:
        c.error('kv_store_exporter_bind', bind, 'exposes the exporter beyond loopback (its /metrics has no '
                'authentication)', 'use 127.0.0.1 for a Prometheus on this host, or set kv_store_allow_network=true '
                'when Prometheus scrapes it over a trusted network')
    e['bind'] = bind
    name = c.text('kv_store_exporter_username', ACL_USER_RE, 'an ACL user name',
                  'use letters, digits and _.- (e.g. fleet-exporter)')
    if name is not None and name in ('default', v.get('username')):
        c.error('kv_store_exporter_username', name, 'is %s' % ('the store\'s unauthenticated user' if name == 'default'
                                                               else 'the LMCache user (kv_store_username)'),
                'use a user of its own, e.g. fleet-exporter')
        name = None
    if name is not None and e['enabled'] and name == v.get('admin_username'):
        c.error('kv_store_exporter_username', name, 'is the cluster\'s administrator (kv_store_cluster_admin_username)',
                'use a user of its own, e.g. fleet-exporter')
        name = None
    e['username'] = name
    e['password'] = _password(c, e['enabled'])
    return e


def paths(v):
    """The exporter's unit name and what the role creates for it (from the store's checked names)."""
    conf = v['config_dir'].rstrip('/')
    name = v['service_name'] + SUFFIX
    return {'service_name': name, 'package': PACKAGE, 'unit_path': '/etc/systemd/system/%s.service' % name,
            'env_path': '%s/%s' % (conf, ENV_NAME), 'marker_path': '%s/%s' % (conf, MARKER_NAME)}


def acl_line(username, hashed):
    """The exporter's line of the ACL file; ``hashed``: the password's ACL form (``kv_store_config.password_hash``)."""
    return 'user %s on %s %s' % (username, hashed, EXPORTER_ACL_RULES)


def env_lines(username, password):
    """The exporter's environment file (0600 root): the user and the password it logs in with."""
    return [sq.env_file_line('REDIS_USER', username), sq.env_file_line('REDIS_PASSWORD', password)]


def argv(e, store_port):
    """The exporter's command: where it listens and which store it reads (``e['store_bind']``); no secret."""
    return [BINARY, '-redis.addr=redis://%s' % addresses.host_port(addresses.local_address(e['store_bind']), store_port),
            '-web.listen-address=%s' % addresses.host_port(e['bind'], e['port'])]


def unit_lines(e, names, store, hardening):
    """The exporter's unit: a dynamic user, the store's sandbox, the password from the environment file only."""
    description = 'Prometheus exporter of the KV store %s' % store['service_name']
    service = ['Type=exec', 'DynamicUser=true',
               'EnvironmentFile=%s' % sq.exec_word(names['env_path']),
               'ExecStart=%s' % sq.exec_line(argv(dict(e, store_bind=store['bind']), store['port']), continuation=False),
               'Restart=on-failure', 'RestartSec=2', 'TimeoutStopSec=20']
    return systemd_unit.unit_file(sq.specifier_text(description), 'man:prometheus-redis-exporter(1)',
                                  service + list(hardening), after=['%s.service' % store['service_name']])


def plan(e, names, store, hardening, password_hash):
    """The exporter's part of the store plan (``store``: the store's checked values; ``hardening`` and
    ``password_hash``: the store's sandbox lines and the ACL file's password form, from ``kv_store_config``)."""
    e = dict(e, store_bind=store['bind'])
    out = {'enabled': e['enabled'], 'port': e['port'], 'bind': e['bind'], 'username': e['username'],
           'package': PACKAGE, 'package_unit': PACKAGE_UNIT, 'listen': addresses.host_port(e['bind'], e['port']),
           'redis_addr': 'redis://%s' % addresses.host_port(addresses.local_address(store['bind']), store['port'])}
    out.update(names)
    if e['enabled']:
        out.update({'acl_line': acl_line(e['username'], password_hash(e['password'])),
                    'env_lines': env_lines(e['username'], e['password']),
                    'argv': argv(e, store['port']), 'unit_lines': unit_lines(e, names, store, hardening)})
    return out


def scrape_targets(stores):
    """Prometheus ``file_sd`` groups of the stores' exporters: ``{'targets': [...], 'skipped': [sentences]}``.

    ``stores``: one dict per store host: ``host``, ``address`` (how Prometheus reaches it, e.g. ``ansible_host``),
    ``exporter`` (the plan's ``exporter``), ``pools`` and optionally ``labels``. A store without the exporter is
    left out silently; an exporter on loopback is left out and named, with the variable to change."""
    groups, skipped = [], []
    for item in stores or []:
        e = item.get('exporter') or {}
        if as_bool(e.get('enabled')) is not True:
            continue
        host, bind = str(item['host']), str(e['bind']).strip()
        if addresses.is_loopback(bind):
            skipped.append('host %s: the KV store\'s exporter listens on %s (kv_store_exporter_bind, else kv_store_bind), '
                           'which Prometheus cannot reach from another machine; set kv_store_exporter_bind to the '
                           'host\'s private address and kv_store_allow_network=true' % (host, bind))
            continue
        address = addresses.remote_address(bind, item.get('address') or host)
        labels = {'host': host, 'service': 'kv_store', 'pools': ','.join(item.get('pools') or [])}
        labels.update(dict((str(k), str(v)) for k, v in (item.get('labels') or {}).items()))
        groups.append({'targets': [addresses.host_port(address, e['port'])], 'labels': labels})
    return {'targets': groups, 'skipped': skipped}
