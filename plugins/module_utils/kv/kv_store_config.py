# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The KV store of one store host (role ``kv_store``): which server, its checks, its files.

``plan_store(host, settings, candidates)`` takes the host's ``kv_store_*`` variables (missing
ones from the role's ``defaults/main.yml``) and the Debian candidates of the server packages
(``parse_apt_policy`` of ``apt-cache policy valkey-server redis-server``) and returns::

    {'host', 'errors', 'warnings', 'server': {name, package, binary, cli, package_unit},
     'config_lines', 'acl_lines', 'unit_lines', 'health': {argv, stdin}, 'cluster': {...} or None,
     'summary': {...}, ...}

The password reaches the store only as its SHA-256 (``#<hex>`` in the ACL file); the plain
password goes only to the LMCache hosts' 0600 environment files (``kv_pool``) and to the standard
input of the health check (``redis-cli --askpass``, a task with ``no_log``): never into an argv, nor into a
task's ``environment``, which ansible-playbook -vvv prints in its EXEC line even under ``no_log``. With ``kv_store_cluster`` the ACL file
also holds the cluster's administrator (``ACL_ADMIN_RULES``), whose password is used only by the
``CLUSTER INFO`` and ``--cluster create`` commands on the store hosts (``cluster_step``,
``cluster_create``), never by LMCache.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_exporter as exporter
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_sizing as sizes
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    ACCOUNT_RE, ACL_USER_RE, SAFE_PATH_RE, SERVICE_NAME_RE, HostSettings, as_int, host_label)
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.redact import is_secret_name
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_unit

PREFIX = 'kv_store_'
VARIABLE_RE = re.compile(r'^kv_store_[A-Za-z0-9_]+$')
# One rule: Valkey where Debian packages it, Redis otherwise (both speak RESP and take the same
# configuration and ACL syntax for everything written here).
SERVERS = {
    'valkey': {'name': 'valkey', 'package': 'valkey-server', 'binary': '/usr/bin/valkey-server',
               'cli': '/usr/bin/valkey-cli', 'package_unit': 'valkey-server.service'},
    'redis': {'name': 'redis', 'package': 'redis-server', 'binary': '/usr/bin/redis-server',
              'cli': '/usr/bin/redis-cli', 'package_unit': 'redis-server.service'},
}
PREFERENCE = ('valkey', 'redis')
# What the server packages themselves own (units, accounts, directories): the store's names and paths never
# name them, since the package may install them after the role claims its own (and remove.yml would then
# delete the package's).
PACKAGE_UNITS = ('valkey-server', 'valkey', 'valkey-sentinel', 'redis-server', 'redis', 'redis-sentinel')
PACKAGE_ACCOUNTS = ('valkey', 'redis')
PACKAGE_DIRECTORIES = ('/etc/valkey', '/etc/redis', '/var/lib/valkey', '/var/lib/redis', '/var/log/valkey',
                       '/var/log/redis', '/run/valkey', '/run/redis')
# LMCache writes its pages without a TTL: volatile-* policies would never evict and noeviction
# makes a full store refuse every write, so only the allkeys-* policies are accepted.
EVICTION_POLICIES = ('allkeys-lru', 'allkeys-lfu', 'allkeys-random')
# What the LMCache user may do: everything on keys, nothing administrative, no flushes. Its client reads the
# cluster's layout (CLUSTER SLOTS / NODES / SHARDS, not @admin) but cannot change it.
ACL_RULES = '~* &* +@all -@admin -flushall -flushdb'
# The cluster's administrator (kv_store_cluster): what `<cli> --cluster create` sends (CLUSTER ADDSLOTSRANGE,
# SET-CONFIG-EPOCH, MEET, NODES, INFO; INFO; PING) and nothing on keys or channels. Its password is used only on
# the store hosts, never given to LMCache.
ACL_ADMIN_RULES = 'resetkeys resetchannels -@all +cluster +info +ping'
# CLUSTER INFO of a node that holds no slot: the cluster is still to be created.
CLUSTER_UNFORMED = 'cluster_slots_assigned:0'
CLUSTER_SLOTS = 16384
MIN_MAXMEMORY_MB = 16
CLUSTER_MIN_NODES = 3
POOL_RE = re.compile(r'^[a-z0-9][a-z0-9_-]{0,31}$')
UNIT_DIR = '/etc/systemd/system'
# The store needs no GPU, no executable memory and no clock: a stricter sandbox than the serving units.
HARDENING = (
    'NoNewPrivileges=true', 'ProtectSystem=strict', 'ProtectHome=true', 'PrivateTmp=true',
    'PrivateDevices=true', 'ProtectClock=true', 'ProtectKernelTunables=true', 'ProtectKernelModules=true',
    'ProtectKernelLogs=true', 'ProtectControlGroups=true', 'ProtectHostname=true', 'ProtectProc=invisible',
    'RestrictNamespaces=true', 'RestrictRealtime=true', 'RestrictSUIDSGID=true', 'LockPersonality=true',
    'MemoryDenyWriteExecute=true', 'SystemCallArchitectures=native',
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6', 'CapabilityBoundingSet=', 'AmbientCapabilities=',
    'UMask=0077',
)


def parse_apt_policy(text):
    """``{package: candidate version or None}`` from ``apt-cache policy <packages>`` output."""
    found, package = {}, None
    for line in str(text or '').splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(':'):
            package = line.rstrip()[:-1].strip()
            found[package] = None
        elif package and line.strip().startswith('Candidate:'):
            value = line.split(':', 1)[1].strip()
            found[package] = None if value in ('', '(none)') else value
    return found


def choose_server(requested, candidates):
    """(server name, problem): ``auto`` takes Valkey where packaged, Redis otherwise.

    ``candidates`` None (not read from the host yet): the requested server, or the preferred one.
    """
    if candidates is None:
        return (PREFERENCE[0] if requested == 'auto' else requested), (
            None if requested == 'auto' or requested in SERVERS else 'is not one of auto, %s' % ', '.join(PREFERENCE))
    if requested == 'auto':
        for name in PREFERENCE:
            if candidates.get(SERVERS[name]['package']):
                return name, None
        return None, 'neither %s is packaged for this host (apt-cache policy)' % ' nor '.join(
            SERVERS[n]['package'] for n in PREFERENCE)
    if requested not in SERVERS:
        return None, 'is not one of auto, %s' % ', '.join(PREFERENCE)
    if candidates and not candidates.get(SERVERS[requested]['package']):
        return None, '%s is not packaged for this host (apt-cache policy)' % SERVERS[requested]['package']
    return requested, None


def password_hash(password):
    """The ACL file's form of a password: ``#`` and the hex SHA-256 of its UTF-8 bytes."""
    return '#' + hashlib.sha256(str(password).encode('utf-8')).hexdigest()


def store_defaults():
    """The role's ``defaults/main.yml`` (the only place its defaults are written)."""
    from ansible.module_utils.common.yaml import yaml_load  # controller side only
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, 'roles', 'kv_store', 'defaults', 'main.yml')) as handle:
        return yaml_load(handle) or {}


def store_endpoint(name, svars, defaults):
    """(address a client dials, port) of one store host."""
    cfg = dict(defaults)
    cfg.update(svars)
    address = cfg.get('kv_store_advertise_address')
    bind = str(cfg.get('kv_store_bind') or '')
    if not address:
        address = addresses.remote_address(bind, cfg.get('ansible_host') or name)
    return str(address), as_int(cfg.get('kv_store_port'))


def _control_characters(c):
    for name, value in sorted(c.cfg.items()):
        if not name.startswith(PREFIX) or name.endswith('_password'):
            continue
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and sq.has_control_character(text):
                c.error(name, text, 'contains a control character', 'write it on one line')


def _unknown_variables(c, known):
    """A kv_store_* variable the role does not have (a misspelt name would otherwise be ignored silently)."""
    for name in sorted(c.cfg):
        if VARIABLE_RE.match(name) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            secret = is_secret_name(name) or 'pass' in name or any(is_secret_name(n) for n in close)
            c.error(name, '(value hidden)' if secret else c.cfg[name],
                    'is not a variable of the kv_store role', 'did you mean %s?' % close[0] if close else
                    'remove it (see roles/kv_store/meta/argument_specs.yml)')


def _secret(c):
    password = c.cfg.get('kv_store_password')
    if not isinstance(password, str) or len(password) < 16 or sq.has_control_character(password) \
            or any(ch.isspace() for ch in password):
        c.errors.append('host %s: kv_store_password (value hidden) is missing, not a string, shorter than 16 '
                        'characters or holds spaces or control characters; set it from a vault, e.g. '
                        'kv_store_password: "{{ vault_kv_store_password }}"' % host_label(c.host))
        return None
    return password


def _cluster_admin(c, v):
    """The cluster's administrator (name, password): another user than LMCache's, with another password."""
    name = c.text('kv_store_cluster_admin_username', ACL_USER_RE, 'an ACL user name',
                  'use letters, digits and _.- (e.g. fleet-cluster-admin)')
    if name is not None and name in ('default', v['username']):
        c.error('kv_store_cluster_admin_username', name, 'is the default user or the LMCache user (kv_store_username)',
                'use a name of its own, e.g. fleet-cluster-admin')
        name = None
    password = c.cfg.get('kv_store_cluster_admin_password')
    if not isinstance(password, str) or len(password) < 16 or sq.has_control_character(password) \
            or any(ch.isspace() for ch in password) or password == c.cfg.get('kv_store_password'):
        c.errors.append('host %s: kv_store_cluster_admin_password (value hidden) is missing, not a string, shorter '
                        'than 16 characters, holds spaces or control characters, or equals kv_store_password; '
                        'kv_store_cluster needs a password of its own for the cluster\'s administrator, from a vault, '
                        'e.g. kv_store_cluster_admin_password: "{{ vault_kv_store_cluster_admin_password }}"'
                        % host_label(c.host))
        password = None
    return {'admin_username': name, 'admin_password': password}


def _exposure(c, bind):
    allow = c.boolean('kv_store_allow_network')
    if bind is not None and not addresses.is_loopback(bind) and allow is not True:
        c.error('kv_store_bind', bind, 'exposes the store beyond loopback (RESP without TLS: pages and the '
                'password cross the network in clear)', 'use 127.0.0.1 for LMCache servers on this host, or set '
                'kv_store_allow_network=true when other hosts must reach it over a trusted network')
    advertised = c.cfg.get('kv_store_advertise_address')
    if bind is not None and addresses.is_loopback(bind) and advertised and not addresses.is_loopback(str(advertised)):
        c.error('kv_store_advertise_address', advertised, 'is a network address while the store listens on loopback '
                'only (kv_store_bind=%s): serving hosts would send the password to an address where nothing '
                'listens' % bind, 'bind the store to that address (kv_store_bind, with kv_store_allow_network=true), '
                'or leave kv_store_advertise_address unset')


def _values(c):
    cfg = c.cfg
    v = {'port': c.required_integer('kv_store_port', 1, 65535, 'use a TCP port such as 6379'),
         'maxmemory_mb': c.required_integer('kv_store_maxmemory_mb', MIN_MAXMEMORY_MB,
                                            fix='use the MiB the store may hold, e.g. 1024'),
         'node_timeout': c.required_integer('kv_store_cluster_node_timeout_ms', 100, fix='use milliseconds, e.g. 5000'),
         'start_timeout': c.required_integer('kv_store_start_timeout', 1, fix='use seconds, e.g. 60'),
         'cluster': c.boolean('kv_store_cluster')}
    bind = cfg.get('kv_store_bind')
    if not isinstance(bind, str) or not bind.strip() or ' ' in bind.strip():
        c.error('kv_store_bind', bind, 'is not one address', 'use an IP address such as 127.0.0.1')
        bind = None
    v['bind'] = bind
    policy = cfg.get('kv_store_maxmemory_policy')
    if policy not in EVICTION_POLICIES:
        c.error('kv_store_maxmemory_policy', policy, 'would let a full store refuse writes (LMCache sets no TTL)'
                if isinstance(policy, str) and (policy == 'noeviction' or policy.startswith('volatile-'))
                else 'is not an eviction policy the store accepts', 'use one of %s' % ', '.join(EVICTION_POLICIES))
    v['policy'] = policy
    v['username'] = c.text('kv_store_username', ACL_USER_RE, 'an ACL user name', 'use letters, digits and _.- '
                           '(e.g. lmcache)')
    if v['username'] == 'default':
        c.error('kv_store_username', 'default', 'is the store\'s unauthenticated user, which the collection turns off',
                'use another name, e.g. lmcache')
    v.update(_cluster_admin(c, v) if v['cluster'] else {'admin_username': None})
    v.update(_names_and_paths(c))
    pools = cfg.get('kv_store_pools')
    if not isinstance(pools, list) or not pools or not all(isinstance(p, str) and POOL_RE.match(p) for p in pools) \
            or len(set(pools)) != len(pools):
        c.error('kv_store_pools', pools, 'is not a list of unique pool names', 'use e.g. [default] (lower-case '
                'letters, digits, _ and -, up to 32 characters)')
        pools = []
    v['pools'] = pools
    v['exporter'] = exporter.check(c, v)
    for key in ('kv_store_maxmemory_keys', 'kv_store_max_value_bytes'):
        v[key[len(PREFIX):]] = None if cfg.get(key) in (None, '') else c.required_integer(
            key, 1, fix='use null or a whole number, e.g. %s' % ('64' if key.endswith('keys') else '205520896'))
    return v


def _sizing(c, v, pool_values):
    """The store's limits from the largest value of its pools (kv_store_sizing); ``pool_values`` None: the pools'
    plans are not known here (validate, status), the limits follow kv_store_max_value_bytes alone."""
    largest, sources = sizes.largest_value(pool_values, v['pools'], v['max_value_bytes'])
    keys = v['maxmemory_keys']
    if keys and not largest:
        if pool_values is not None:
            c.error('kv_store_maxmemory_keys', keys, 'counts the store\'s memory in values, but the largest value of '
                    'its pools (%s) is unknown: no host of the play in those pools has a known page size' %
                    ', '.join(v['pools']), 'deploy the store with its pools\' hosts, or set kv_store_max_value_bytes')
        keys = None
    settings = sizes.store_settings(largest, keys, v['maxmemory_mb'])
    settings.update(max_value_bytes=largest, max_value_from=sources,
                    prompt_tokens=sizes.prompt_tokens(settings['maxmemory'], pool_values, v['pools']))
    for longer in sizes.longer_prompts(settings['maxmemory'], pool_values, v['pools']):
        c.warnings.append(
            'store %s keeps prompts of host %s whole up to %d tokens, but the host serves prompts of up to %d tokens '
            '(vllm_server_max_model_len): one that long writes %d values and evicts its own first chunks, so it never '
            'hits; give the store at least %d MiB (kv_store_maxmemory_mb, or kv_store_maxmemory_keys in values of its '
            'largest pool value), or accept that longer prompts recompute'
            % (c.host, longer['host'], longer['whole'], longer['max_model_len'], longer['values'],
               longer['maxmemory_mb']))
    if largest and settings['keys'] is not None and settings['keys'] < 1 and v['maxmemory_mb']:
        need = -(-sizes.maxmemory_bytes(1, largest) // sizes.MIB)
        c.error('kv_store_maxmemory_mb', v['maxmemory_mb'], 'holds no value of %d B (the largest of %s) with room for '
                '%d in flight' % (largest, ', '.join(sources), sizes.IN_FLIGHT_VALUES),
                'raise it to at least %d, or count it in values with kv_store_maxmemory_keys' % need)
    return settings


def _inside(path, directory):
    return path == directory or path.startswith(directory.rstrip('/') + '/')


def _names_and_paths(c):
    """The unit name, the account and the paths (the ownership rules); their errors go to ``c.ownership_errors`` too."""
    before, v = len(c.errors), {}
    name = c.text('kv_store_service_name', SERVICE_NAME_RE, 'a unit name', 'use letters, digits and _.:-')
    problem = ownership.unit_name_problem(name) if name else None
    if name in PACKAGE_UNITS:
        problem = ('is the unit of a server package (redis-server or valkey-server), which the role stops and '
                   'disables when it installs the package', 'use a name of its own such as fleet-kv-store')
    if name in exporter.PACKAGE_UNITS or (name or '') + exporter.SUFFIX in exporter.PACKAGE_UNITS:
        problem = ('names the unit of the package %s (or its exporter would)' % exporter.PACKAGE,
                   'use a name of its own such as fleet-kv-store')
    if problem:
        c.error('kv_store_service_name', name, *problem)
    v['service_name'] = None if problem else name
    for key in ('kv_store_user', 'kv_store_group'):
        value = c.text(key, ACCOUNT_RE, 'a system account name', 'use lower-case letters, digits, _ and - (e.g. fleet-kv)')
        if value in PACKAGE_ACCOUNTS + exporter.PACKAGE_ACCOUNTS:
            c.error(key, value, 'is the account of a server package', 'use an account of its own such as fleet-kv')
            value = None
        problem = ownership.account_name_problem(key.rsplit('_', 1)[1], value) if value else None
        if problem:
            c.error(key, value, problem[0], problem[1].replace('such as vllm', 'such as fleet-kv'))
            value = None
        v[key[len(PREFIX):]] = value
    for key in ('kv_store_home', 'kv_store_config_dir', 'kv_store_manifest_path'):
        v[key[len(PREFIX):]] = _path(c, key)
    home, conf = v['home'], v['config_dir']
    if home and conf and (_inside(home, conf) or _inside(conf, home)):
        c.error('kv_store_home', home, 'is, holds or lies inside kv_store_config_dir (%s)' % conf,
                'use two separate directories such as /var/lib/fleet-kv-store and /etc/fleet-kv-store')
        v['home'] = None
    _other_homes(c, v)
    c.ownership_errors = c.errors[before:]
    return v


# The serving roles' directories a store on the same host may never take as its home (their defaults apply on a
# host of the vLLM fleet, the setting "_serving_host" of the lookup; given values always).
SERVING_HOMES = ('vllm_server_home', 'vllm_server_hf_home', 'lmcache_server_home')


def _other_homes(c, v):
    home = v.get('home')
    for key in SERVING_HOMES if home else ():
        other = c.cfg.get(key)
        if other is None and c.cfg.get('_serving_host'):
            other = ownership.PATH_EXAMPLES[key]
        if isinstance(other, str) and other.startswith('/') and (_inside(home, other) or _inside(other, home)):
            c.error('kv_store_home', home, 'is, holds or lies inside %s (%s) of the serving roles on the same host: '
                    'the deploy would chown it and remove.yml would delete it' % (key, other),
                    'use a directory of its own such as /var/lib/fleet-kv-store')
            v['home'] = None
            return


def _path(c, key):
    if isinstance(c.cfg.get(key), str) and '..' in c.cfg[key].split('/'):
        c.error(key, c.cfg[key], 'contains ..', 'use an absolute path without .. such as %s' % ownership.path_example(key))
        return None
    value = c.text(key, SAFE_PATH_RE, 'an absolute path of plain characters', 'use an absolute path of letters, '
                   'digits and ._+@/- such as %s' % ownership.path_example(key))
    problem = ownership.path_problem(value, ownership.path_example(key)) if value else None
    for directory in PACKAGE_DIRECTORIES + exporter.PACKAGE_DIRECTORIES if value and not problem else ():
        if _inside(value, directory) or _inside(directory, value):
            problem = ('is or holds %s, a directory of a server package' % directory,
                       'use a directory of its own such as %s' % ownership.path_example(key))
    if problem:
        c.error(key, value, *problem)
        return None
    return value


def config_lines(v, server):
    """The store's configuration file (redis.conf / valkey.conf syntax)."""
    home = v['home'].rstrip('/')
    lines = ['bind %s' % v['bind'], 'port %d' % v['port'], 'protected-mode yes', 'daemonize no',
             'supervised systemd', 'logfile ""', 'dir %s' % home,
             # A cache: no snapshot and no append-only file; a restart starts empty.
             'save ""', 'appendonly no']
    lines += sizes.config_lines(v['sizing'])
    lines += ['maxmemory-policy %s' % v['policy'], 'aclfile %s/users.acl' % v['config_dir'].rstrip('/')]
    if v['cluster']:
        lines += ['cluster-enabled yes', 'cluster-config-file %s/nodes.conf' % home,
                  'cluster-node-timeout %d' % v['node_timeout'],
                  # LMCache keeps serving from the nodes it reaches when one is down.
                  'cluster-require-full-coverage no']
    return lines


def acl_lines(username, password, admin=None):
    """The ACL file: the unauthenticated default user off, the LMCache user with the password's hash and, for a
    cluster, ``admin`` (its administrator's (name, password)) with only the cluster's commands."""
    lines = ['user default off', 'user %s on %s %s' % (username, password_hash(password), ACL_RULES)]
    if admin:
        lines.append('user %s on %s %s' % (admin[0], password_hash(admin[1]), ACL_ADMIN_RULES))
    return lines


def cluster_step(server, v, admin_password):
    """The cluster part of a store's plan: its administrator's CLI (argv; the password is its ``stdin``, read by
    ``--askpass``) and ``CLUSTER INFO`` with it."""
    argv = [server['cli'], '--user', v['admin_username'], '--no-auth-warning', '--askpass']
    address = addresses.local_address(v['bind'])
    return {'admin_argv': argv, 'stdin': admin_password, 'unformed': CLUSTER_UNFORMED,
            'info': {'argv': argv[:1] + ['-h', address, '-p', str(v['port'])] + argv[1:] + ['CLUSTER', 'INFO'],
                     'stdin': admin_password}}


def cluster_create(plans):
    """``<cli> --cluster create`` of the stores among ``plans`` (store plans) with ``kv_store_cluster``.

    Returns ``{'host', 'nodes', 'argv', 'stdin', 'errors'}``: the first such store runs ``argv`` (with ``stdin``,
    the administrator's password) against every node; ``errors`` when the stores disagree on the administrator.
    """
    stores = [p for p in plans or [] if isinstance(p, dict) and p.get('cluster') and not p.get('errors')]
    if not stores:
        return {'host': None, 'nodes': [], 'argv': [], 'stdin': '', 'errors': []}
    first = stores[0]
    errors = ['host %s: kv_store_cluster_admin_username or kv_store_cluster_admin_password (value hidden) differs '
              'from %s\'s; every store of one cluster needs the same' % (host_label(p['host']), first['host'])
              for p in stores[1:] if (p['cluster']['admin_argv'], p['cluster']['stdin']) !=
              (first['cluster']['admin_argv'], first['cluster']['stdin'])]
    if len(stores) < CLUSTER_MIN_NODES:
        errors.append('the play has %d store(s) with kv_store_cluster (%s); a cluster needs at least %d'
                      % (len(stores), ', '.join(p['host'] for p in stores), CLUSTER_MIN_NODES))
    nodes = [p['endpoint'] for p in stores]
    return {'host': first['host'], 'nodes': nodes, 'stdin': first['cluster']['stdin'], 'errors': errors,
            'argv': first['cluster']['admin_argv'] + ['--cluster', 'create'] + nodes + ['--cluster-yes']}


def cluster_fields(text):
    """``{field: value}`` of ``CLUSTER INFO``."""
    return dict(line.strip().split(':', 1) for line in str(text or '').splitlines() if ':' in line)


def cluster_problem(text, nodes):
    """Why ``CLUSTER INFO`` (``text``) does not show a formed cluster of ``nodes`` primaries, or ''."""
    fields = cluster_fields(text)
    wanted = {'cluster_state': 'ok', 'cluster_slots_assigned': str(CLUSTER_SLOTS),
              'cluster_known_nodes': str(nodes)}
    wrong = ['%s:%s (not %s)' % (k, fields.get(k, '?'), want) for k, want in wanted.items() if fields.get(k) != want]
    return ('the cluster is not formed: %s; a create that stopped half way leaves nodes that `CLUSTER RESET` as the '
            'cluster\'s administrator returns to empty' % ', '.join(wrong)) if wrong else ''


def unit_lines(v, server):
    conf = '%s/%s.conf' % (v['config_dir'].rstrip('/'), v['service_name'])
    description = 'KV store of the LMCache pools %s (%s)' % (', '.join(v['pools']), server['name'])
    service = ['Type=notify',
               'User=%s' % v['user'], 'Group=%s' % v['group'],
               'WorkingDirectory=%s' % v['home'],
               'ExecStart=%s' % sq.exec_line([server['binary'], conf]),
               'Restart=on-failure', 'RestartSec=2',
               'TimeoutStartSec=%d' % v['start_timeout'], 'TimeoutStopSec=30',
               'ReadWritePaths=-%s' % sq.exec_word(v['home'])]
    return systemd_unit.unit_file(sq.specifier_text(description), 'https://valkey.io/topics/acl/',
                                  service + list(HARDENING))


def plan_store(host, settings, candidates=None, defaults=None, pool_values=None):
    """The plan of one store host (see the module docstring). Never raises for bad input.

    ``pool_values``: ``[{host, pool, value_bytes}]`` of the serving hosts' plans (kv_pool.pool_values); the store's
    limits (proto-max-bulk-len, buffers, maxmemory) are sized from the largest value of its pools."""
    cfg = store_defaults() if defaults is None else dict(defaults)
    known = set(cfg)
    cfg.update(dict(settings or {}))
    c = HostSettings(host, cfg)
    _control_characters(c)
    _unknown_variables(c, known)
    password = _secret(c)
    v = _values(c)
    v['sizing'] = _sizing(c, v, pool_values)
    admin_password = v.pop('admin_password', None)  # like the LMCache password: never in the plan's values
    _exposure(c, v['bind'])
    name, problem = choose_server(cfg.get('kv_store_server'), candidates)
    if problem:
        c.error('kv_store_server', cfg.get('kv_store_server'), problem, 'use auto, or install the package\'s '
                'source; Valkey is preferred where packaged, Redis otherwise')
    plan = {'host': host, 'errors': c.errors, 'warnings': c.warnings, 'values': v,
            'server': dict(SERVERS[name]) if name else None}
    plan['ownership_errors'] = c.ownership_errors
    names = ('service_name', 'user', 'group', 'home', 'config_dir', 'manifest_path')
    if not c.ownership_errors and all(v[key] for key in names):
        # The paths and what the role creates (remove.yml needs them even when another value is wrong).
        conf_dir = v['config_dir']
        plan.update({'config_path': '%s/%s.conf' % (conf_dir, v['service_name']),
                     'acl_path': '%s/users.acl' % conf_dir, 'marker_path': '%s/installed-by-collection' % conf_dir,
                     'unit_path': '%s/%s.service' % (UNIT_DIR, v['service_name']),
                     'manifest_path': v['manifest_path'], 'unit_marker': ownership.UNIT_MARKER})
        plan['exporter_paths'] = exporter.paths(v)
        # ownership: what a deploy claims; ownership_all: what remove.yml looks for (the exporter even when off)
        plan['ownership_all'] = ownership.store_candidates(dict(plan, **v), v['manifest_path'])
        plan['ownership'] = [entry for entry in plan['ownership_all'] if v['exporter']['enabled'] or
                             entry['path'] not in plan['exporter_paths'].values()]
    if c.errors or name is None:
        return plan
    server = plan['server']
    plan['exporter'] = exporter.plan(v['exporter'], plan['exporter_paths'], v, HARDENING, password_hash)
    plan.update({
        'config_lines': config_lines(v, server),
        'acl_lines': acl_lines(v['username'], password, (v['admin_username'], admin_password)
                               if v['cluster'] else None) + (
            [plan['exporter']['acl_line']] if v['exporter']['enabled'] else []),
        'unit_lines': unit_lines(v, server),
        'health': {'argv': [server['cli'], '-h', addresses.local_address(v['bind']), '-p', str(v['port']),
                            '--user', v['username'], '--no-auth-warning', '--askpass'],
                   'stdin': password},
        'endpoint': '%s:%s' % store_endpoint(host, cfg, {}),
        'cluster': cluster_step(server, v, admin_password) if v['cluster'] else None,
        'summary': _summary(host, v, server, plan['exporter']),
    })
    return plan


def _summary(host, v, server, exporter_plan):
    """The store's row of the plan and status: where it listens, its limits and its sizing line."""
    sized = v['sizing']
    return {'host': host, 'server': server['name'], 'bind': v['bind'], 'port': v['port'],
            'maxmemory_mb': v['maxmemory_mb'], 'policy': v['policy'], 'cluster': v['cluster'],
            'maxmemory': sized['maxmemory'], 'max_value_bytes': sized['max_value_bytes'], 'keys': sized['keys'],
            'proto_max_bulk_len': sized['proto_max_bulk_len'], 'prompt_tokens': sized['prompt_tokens'],
            'sizing_line': sizes.summary_line(host, sized), 'pools': v['pools'], 'service': v['service_name'],
            'exporter': exporter_plan['listen'] if v['exporter']['enabled'] else None}
