# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""LMCache's peer-to-peer L2: a pool without a store (``lmcache_server_kv_transport: p2p``).

A server whose L1 misses asks its peers; the chunks go from a peer's L1 into its own through LMCache's transfer
channel (NIXL over UCX). The peers find each other through LMCache's coordinator (``lmcache coordinator``), one
per pool, which runs on the pool host named by ``lmcache_server_kv_coordinator`` in a unit of its own
(``<lmcache_server_service_name>-coordinator``). Each server of the pool gets:

    --instance-id <inventory host> --coordinator-url http://<coordinator>:<port>
    --coordinator-advertise-ip <its address> --p2p-advertise-url <its address>:<lmcache_server_kv_p2p_port>
    --p2p-listen-url <lmcache_server_host>:<lmcache_server_kv_p2p_port> --p2p-transfer-engine nixl

Its address is where the other hosts reach it: ``lmcache_server_host`` when it names one address, else its
``ansible_host``, else its inventory name.

Peers dial each other's request port (``--port``) and transfer port, so the server must bind an address the other
hosts reach (``lmcache_server_host``, which needs ``lmcache_server_allow_unauthenticated``: neither LMCache's ports
nor the coordinator authenticate). NIXL is not a dependency of ``lmcache``: the role installs ``PACKAGES[device]``
into LMCache's virtualenv. Measured: docs/kv-pools.md, "Without a store".
"""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import as_int, msg

TRANSPORTS = ('store', 'p2p')
ENGINE = 'nixl'
# NIXL's Python bindings with the UCX they bundle, per LMCache device: the CUDA 13 build on GPUs (LMCache's torch
# is a CUDA 13 build), the CUDA 12 build on CPU (it loads without a GPU; measured with LMCache 0.5.6, docs/kv-pools.md).
NIXL_VERSION = '1.5.1'
PACKAGES = {'cuda': ('nixl-cu13', NIXL_VERSION), 'cpu': ('nixl-cu12', NIXL_VERSION)}
COORDINATOR_SUFFIX = '-coordinator'
# What a member costs while idle: NIXL's Python agent runs its progress thread with no delay (it polls without
# sleeping), so each member's LMCache server keeps one CPU core busy (benchmarks/p2p_idle_cpu_benchmark.py).
IDLE_COST = 'NIXL keeps one CPU core of each member busy'
# The variables of other hosts a P2P pool reads (besides ansible_host): the coordinator's bind and port.
PEER_VARIABLES = ('lmcache_server_host', 'lmcache_server_kv_coordinator_port', 'lmcache_server_kv_pool',
                  'lmcache_server_kv_transport', 'lmcache_server_kv_coordinator')


def transport(cfg):
    """The pool transport of a host's settings: ``store`` (default) or ``p2p``."""
    return str(cfg.get('lmcache_server_kv_transport') or 'store')


def hosts_needed(cfg, host):
    """The inventory hosts whose variables a P2P pool member's plan reads: the coordinator and itself."""
    coordinator = cfg.get('lmcache_server_kv_coordinator')
    return sorted(set([str(host)] + ([str(coordinator)] if isinstance(coordinator, str) and coordinator else [])))


def _address(name, hostvars):
    """How other hosts reach inventory host ``name``: its ansible_host, else its name."""
    return str((hostvars or {}).get('ansible_host') or name)


def dial(name, bind, hostvars):
    """The address a peer on another host dials for a listener of host ``name`` bound to ``bind``."""
    return addresses.remote_address(str(bind or ''), _address(name, hostvars)).strip('[]')


# The server flags a P2P pool sets (server_flags): refused in lmcache_server_extra_args of a host in a P2P pool.
FLAGS = ('--instance-id', '--coordinator-url', '--coordinator-advertise-ip', '--p2p-advertise-url', '--p2p-listen-url',
         '--p2p-transfer-engine')


def _extra_problem(host, cfg):
    given = [str(a).split('=', 1)[0] for a in cfg.get('lmcache_server_extra_args') or []]
    found = [flag for flag in FLAGS if flag in given]
    if not found:
        return None
    return msg(host, 'lmcache_server_extra_args', ', '.join(found), 'sets what a P2P pool sets itself',
               'leave these flags out (lmcache_server_kv_coordinator, lmcache_server_kv_p2p_port and lmcache_server_host '
               'give them)')


def check(host, cfg, peers, device):
    """``(problems, values)`` for a host in a P2P pool; ``peers``: ``{host: its PEER_VARIABLES and ansible_host}``."""
    problems, coordinator = [], cfg.get('lmcache_server_kv_coordinator')
    names = ('lmcache_server_kv_coordinator_port', 'lmcache_server_kv_p2p_port')
    ports = dict((name, as_int(cfg.get(name))) for name in names)
    for name, port in ports.items():
        if port is None or not 0 < port < 65536:
            problems.append(msg(host, name, cfg.get(name), 'is not a TCP port', 'use a port such as 9300'))
    if not isinstance(coordinator, str) or not coordinator:
        problems.append(msg(host, 'lmcache_server_kv_coordinator', coordinator, 'is not set while '
                            'lmcache_server_kv_transport=p2p', 'name the pool host that runs the pool\'s coordinator '
                            '(an inventory host with the same lmcache_server_kv_pool)'))
    elif coordinator not in (peers or {}):
        problems.append(msg(host, 'lmcache_server_kv_coordinator', coordinator, 'is not a host of the inventory',
                            'name an inventory host of pool %s' % cfg.get('lmcache_server_kv_pool')))
    if addresses.is_loopback(cfg.get('lmcache_server_host')):
        problems.append(msg(host, 'lmcache_server_host', cfg.get('lmcache_server_host'), 'is loopback while '
                            'lmcache_server_kv_transport=p2p: the peers on other hosts could not reach its request '
                            'port', 'bind an address the pool\'s hosts reach (or 0.0.0.0) with '
                            'lmcache_server_allow_unauthenticated: true on a trusted network'))
    extra = _extra_problem(host, cfg)
    if extra:
        problems.append(extra)
    if str(device) not in PACKAGES:
        problems.append(msg(host, 'lmcache_server_device', device, 'has no NIXL build', 'use cuda or cpu'))
    if problems:
        return problems, None
    return [], {'coordinator': coordinator, 'ports': ports, 'device': str(device)}


def plan(host, cfg, peers, values):
    """The P2P part of a host's pool plan: the coordinator's URL, the server's identity and transfer channel,
    whether this host runs the coordinator and its argv's address, the NIXL package."""
    mine = (peers or {}).get(host) or {}
    coord = values['coordinator']
    theirs = (peers or {}).get(coord) or {}
    coord_bind = theirs.get('lmcache_server_host') or cfg.get('lmcache_server_host')
    coord_port = as_int(theirs.get('lmcache_server_kv_coordinator_port')) or values['ports'][
        'lmcache_server_kv_coordinator_port']
    address = dial(host, cfg.get('lmcache_server_host'), mine)
    package, version = PACKAGES[values['device']]
    return {'transport': 'p2p', 'coordinator': coord,
            'coordinator_url': 'http://%s' % addresses.host_port(dial(coord, coord_bind, theirs), coord_port),
            'coordinator_here': coord == host, 'coordinator_bind': str(cfg.get('lmcache_server_host')),
            'coordinator_port': values['ports']['lmcache_server_kv_coordinator_port'],
            'instance_id': str(host), 'advertise_ip': address,
            'p2p_url': addresses.host_port(address, values['ports']['lmcache_server_kv_p2p_port']),
            # the channel binds the server's own bind address (ZeroMQ binds an address, not a host name)
            'p2p_listen_url': addresses.host_port(cfg.get('lmcache_server_host'),
                                                  values['ports']['lmcache_server_kv_p2p_port']),
            'engine': ENGINE, 'package': package, 'package_version': version}


def server_flags(p2p):
    """The flags that make an LMCache server a peer of its pool."""
    return ['--instance-id', p2p['instance_id'], '--coordinator-url', p2p['coordinator_url'],
            '--coordinator-advertise-ip', p2p['advertise_ip'], '--p2p-advertise-url', p2p['p2p_url'],
            '--p2p-listen-url', p2p['p2p_listen_url'], '--p2p-transfer-engine', p2p['engine']]


def coordinator_argv(lmcache_bin, p2p, chunk_size):
    """``lmcache coordinator``'s command line on the coordinator host (its chunk size is the servers')."""
    return [lmcache_bin, 'coordinator', '--host', p2p['coordinator_bind'], '--port', str(p2p['coordinator_port']),
            '--chunk-size', str(chunk_size)]


def coordinator_health_url(p2p):
    """Where the coordinator host's readiness wait asks (``/healthz``)."""
    return 'http://%s/healthz' % addresses.host_port(addresses.local_address(p2p['coordinator_bind']),
                                                     p2p['coordinator_port'])


def fleet_errors(members):
    """Errors for P2P pools whose hosts disagree on the coordinator or its port, or whose coordinator is a host of
    the plans outside the pool. ``members``: ``[{host, pool, p2p}]`` of the planned hosts in a pool."""
    by_pool, errors = {}, []
    for member in members or []:
        by_pool.setdefault(member['pool'], []).append(member)
    for pool in sorted(by_pool):
        hosts = sorted(by_pool[pool], key=lambda m: str(m['host']))
        kinds = sorted(set('p2p' if m.get('p2p') else 'store' for m in hosts))
        if len(kinds) > 1:
            errors.append('pool %s: hosts %s mix lmcache_server_kv_transport store and p2p; give every host of the '
                          'pool the same transport' % (pool, ', '.join(str(m['host']) for m in hosts)))
            continue
        peers = [m for m in hosts if m.get('p2p')]
        seen = sorted(set((m['p2p']['coordinator'], m['p2p']['coordinator_url']) for m in peers))
        if len(seen) > 1:
            errors.append('pool %s: its hosts name different coordinators (%s); set one '
                          'lmcache_server_kv_coordinator and lmcache_server_kv_coordinator_port for the whole pool'
                          % (pool, ', '.join('%s at %s' % pair for pair in seen)))
    return errors
