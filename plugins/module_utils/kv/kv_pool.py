# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""LMCache L2 pools: which store a serving host's LMCache server uses, under which key prefix.

A serving host joins a pool with ``lmcache_server_kv_pool: <name>``; the stores of the pool are the
hosts of the group ``lmcache_server_kv_store_group`` (default ``kv_stores``) whose ``kv_store_pools``
lists it (role ``kv_store``). Its LMCache server then gets one ``--l2-adapter`` of LMCache's
``valkey`` type (the only RESP adapter of LMCache 0.5.6 with a key prefix; ``resp`` has none, so
two pools on one store would read each other's pages):

    {"type": "valkey", "startup_nodes": "store-1:6379", "cluster_mode": false, "username": "lmcache",
     "password": "...", "key_prefix": "<pool>.<model>.n<N>.c<chunk>.tp<TP>.<hash>", "shared": true,
     "max_capacity_gb": 0}

LMCache joins the prefix and its own key with ``@`` (``<prefix>@<model>@<rank>@<group>@<chunk hash>``),
so a page is read only by servers whose prefix is the same: the prefix carries a hash of everything
that must match for a page to be reusable (``PREFIX_INPUTS``). ``max_capacity_gb`` stays 0: the store
evicts by itself (``maxmemory`` with an ``allkeys-*`` policy); LMCache's own accounting would only
count what one server wrote.
"""

from __future__ import annotations

import hashlib
import json
import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import compile_cache
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_p2p
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool_breakeven as breakeven
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_sizing as sizes
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.fingerprint import relevant_env
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import as_bool, fmt_value, host_label, msg
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config as store
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import package_spec
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli

ADAPTER_TYPE = 'valkey'
# LMCache's valkey adapter imports glide_sync, which LMCache does not declare; its worker pool names
# >= 2.3.0 (copy-reduced memoryview SET, buffer GET). Checked with LMCache 0.5.6's ValkeyWorkerPool against
# redis-server 7.0.15: 2.5.3 stores a memoryview and reads it back into a buffer (docs/kv-pools.md).
CLIENT_VERSION = '2.5.3'
CLIENT_NAME = 'valkey-glide-sync'
CLIENT_PACKAGE = '%s==%s' % (CLIENT_NAME, CLIENT_VERSION)
CLIENT_MODULE = 'glide_sync'
# LMCache 0.5.6 builds its credentials as glide_sync.ServerCredentials(username, password), positionally;
# glide-sync (2.1.1 to 2.6.0) declares ServerCredentials(password, username=None). With the fields as named
# the store answers WRONGPASS (measured with 2.1.1 and 2.5.3), so the adapter JSON carries them crossed: the
# store then gets the right pair.
CREDENTIALS_CROSSED = True
# The environment file variable that carries the adapter JSON (with the password) to the launcher, which
# starts LMCache in its own process with --l2-adapter when a store answers, without it otherwise (LMCache
# 0.5.6 refuses to start when the store is down): roles/lmcache_server/files/fleet_lmcache_l2.py.
ADAPTER_ENV = 'LMCACHE_FLEET_L2_ADAPTER'
LAUNCHER = 'bin/fleet-lmcache-l2'
DEFAULT_GROUP = 'kv_stores'
# Everything that must match for an LMCache page to be reusable by another server. ``vllm_args``: every extra
# vLLM flag that is not known to leave the weights and the cached values alone (--quantization, --revision,
# --hf-overrides, --load-format ... split the pool; an unknown flag splits it too); ``vllm_env``: the service's
# environment as the probe's fingerprint sees it.
PREFIX_INPUTS = ('model', 'revision', 'block_size', 'chunk_size', 'separate_object_groups', 'dtype',
                 'kv_cache_dtype', 'mamba_ssm_cache_dtype', 'mamba_cache_dtype', 'tensor_parallel_size',
                 'platform', 'gpu_family', 'attention_backend', 'vllm_version', 'lmcache_version',
                 'connector_lmcache_version', 'load_format', 'vllm_args', 'vllm_env')
# LoRA adapters change the KV of a request, and LMCache's key does not hold the adapter: refused in a pool.
LORA_RE = re.compile(r'(?i)lora')
# Inputs hashed only when a host sets them (the keys of the other hosts stay what they were): the draft
# tokens of speculative decoding (they change the Mamba state's layout) and the inputs of N that only
# extra_args carry (vllm_cli.N_EXTRA_INPUTS). Every input of N in vllm_cli's table is in the key: as itself,
# as the resulting N (block_size) or here.
OPTIONAL_INPUTS = ('num_speculative_tokens', 'extra_n_inputs')
HASH_CHARS = 12
# lmcache_server_kv_request_timeout: seconds LMCache waits for the store per request. LMCache's own default (5 s)
# is what every request waits, L1 hits included, while a store is down or hung (docs/kv-pools.md, "Failure").
REQUEST_TIMEOUT_DEFAULT = 1.0
REQUEST_TIMEOUT_MAX = 60


# What a store's sizing reads of each pooled host (kv_store_sizing).
SIZED = ('value_bytes', 'chunk_size', 'ranks', 'max_model_len')


def attention_backend(extra_args, env):
    """The attention backend the host forces (``--attention-backend`` in any spelling vLLM accepts, or
    ``VLLM_ATTENTION_BACKEND``), or auto."""
    given = vllm_cli.extra_n_inputs(extra_args).get('attention_backend')
    if given not in (None, True):
        return given
    return str((env or {}).get('VLLM_ATTENTION_BACKEND') or 'auto')


def _other_n_inputs(n_inputs, cfg):
    """The inputs of N set through extra_args (vllm_cli.N_EXTRA_INPUTS) besides the attention backend."""
    given = n_inputs.get('extra_n_inputs')
    if given is None:
        given = vllm_cli.extra_n_inputs(cfg.get('vllm_server_extra_args'))
    return dict((k, v) for k, v in given.items() if k != 'attention_backend')


def prefix_inputs(n_inputs, derived, cfg):
    """The values of ``PREFIX_INPUTS`` for one host, from its plan."""
    platform = n_inputs.get('platform')
    return {
        'model': n_inputs.get('model'),
        'revision': n_inputs.get('revision') or 'main',
        'block_size': derived.get('block_size'),
        'chunk_size': derived.get('chunk_size'),
        'separate_object_groups': bool(derived.get('separate_object_groups')),
        'dtype': n_inputs.get('dtype'),
        'kv_cache_dtype': n_inputs.get('kv_cache_dtype'),
        'mamba_ssm_cache_dtype': n_inputs.get('mamba_ssm_cache_dtype'),
        'mamba_cache_dtype': n_inputs.get('mamba_cache_dtype'),
        'tensor_parallel_size': n_inputs.get('tensor_parallel_size'),
        'platform': platform,
        'gpu_family': n_inputs.get('gpu_architecture') or ('cpu' if platform == 'cpu' else 'default'),
        'attention_backend': attention_backend(cfg.get('vllm_server_extra_args'), cfg.get('vllm_server_env')),
        'vllm_version': str(cfg.get('vllm_server_version')),
        'lmcache_version': str(cfg.get('lmcache_server_version')),
        'connector_lmcache_version': str(cfg.get('vllm_server_lmcache_version')),
        'load_format': str(cfg.get('vllm_server_load_format') or 'auto'),  # dummy weights are random
        'vllm_args': _other_args(cfg.get('vllm_server_extra_args')),
        'vllm_env': relevant_env(cfg.get('vllm_server_env') if isinstance(cfg.get('vllm_server_env'), dict) else {}),
        'num_speculative_tokens': n_inputs.get('num_speculative_tokens') or 0,
        'extra_n_inputs': _other_n_inputs(n_inputs, cfg),
    }


def _other_args(extra_args):
    """The extra vLLM flags that may change the weights or the cached values, but the attention backend (an
    input of its own): every flag but the serving-only ones (``compile_cache.graph_argv``)."""
    out, skip = [], False
    for arg in [str(a) for a in extra_args or []]:
        if skip:
            skip = False
            continue
        if arg.split('=', 1)[0] in ('--attention-backend', '--attention_backend'):
            skip = '=' not in arg
            continue
        out.append(arg)
    return compile_cache.graph_argv(out)


def lora_problem(host, cfg):
    """The refusal of LoRA adapters on a host in a pool (LMCache's key does not cover the adapter), or None."""
    args = [str(a) for a in cfg.get('vllm_server_extra_args') or [] if str(a).startswith('-')]
    env = cfg.get('vllm_server_env') if isinstance(cfg.get('vllm_server_env'), dict) else {}
    found = [a.split('=', 1)[0] for a in args if LORA_RE.search(a.split('=', 1)[0])] + \
        [str(k) for k in env if LORA_RE.search(str(k))]
    if not found:
        return None
    return msg(host, 'vllm_server_extra_args', ', '.join(found),
               'enables LoRA adapters while lmcache_server_kv_pool=%s: LMCache\'s key does not hold the adapter, so '
               'hosts would read pages computed with another adapter' % cfg.get('lmcache_server_kv_pool'),
               'serve LoRA adapters without an L2 pool (lmcache_server_kv_pool: null)')


def _slug(text, limit=40):
    tail = str(text or 'model').rstrip('/').rsplit('/', 1)[-1].lower()
    return (re.sub(r'[^a-z0-9.-]+', '-', tail).strip('-.') or 'model')[:limit]


def key_prefix(pool, inputs):
    """``<pool>.<model>.n<N>.c<chunk>.tp<TP>.<hash>``: readable parts and a hash of every input."""
    pairs = [[name, inputs.get(name)] for name in PREFIX_INPUTS]
    pairs += [[name, inputs[name]] for name in OPTIONAL_INPUTS if inputs.get(name)]
    canonical = json.dumps(pairs, sort_keys=True)
    digest = hashlib.sha256(canonical.encode('utf-8')).hexdigest()[:HASH_CHARS]
    parts = (pool, _slug(inputs.get('model')), inputs.get('block_size'), inputs.get('chunk_size'),
             inputs.get('tensor_parallel_size'), digest)
    return '%s.%s.n%s.c%s.tp%s.%s' % parts


def _pool_stores(pool, stores, defaults):
    """{store name: merged kv_store_* settings} of the stores that list ``pool``."""
    found = {}
    for name in sorted(stores):
        cfg = dict(defaults)
        cfg.update(stores[name])
        pools = cfg.get('kv_store_pools')
        if isinstance(pools, list) and pool in pools:
            found[name] = cfg
    return found


def _same(found, variable):
    return len(set(json.dumps(cfg.get(variable), sort_keys=True) for cfg in found.values())) <= 1


def _topology_problem(pool, found):
    """Why the stores of a pool cannot serve it as one store or one cluster, or None."""
    clustered = [name for name, cfg in found.items() if as_bool(cfg.get('kv_store_cluster')) is True]
    names = ', '.join(found)
    if len(found) > 1 and len(clustered) != len(found):
        return ('has %d stores (%s) but not all set kv_store_cluster=true; give the pool one store, or set '
                'kv_store_cluster: true on all of them (one cluster)' % (len(found), names))
    if clustered and len(found) < store.CLUSTER_MIN_NODES:
        return ('is a cluster of %d store(s) (%s); a cluster needs at least %d primaries: add stores or set '
                'kv_store_cluster: false with one store' % (len(found), names, store.CLUSTER_MIN_NODES))
    for variable in ('kv_store_username', 'kv_store_password', 'kv_store_pools'):
        if len(found) > 1 and not _same(found, variable):
            return ('has stores (%s) that differ in %s; one cluster needs the same value on every store'
                    % (names, variable))
    return None


def pool_name_problem(host, pool):
    """The error of a pool name that is not one (store and P2P pools alike), else None."""
    if isinstance(pool, str) and store.POOL_RE.match(pool):
        return None
    return msg(host, 'lmcache_server_kv_pool', pool, 'is not a pool name',
               'use null (no shared cache) or a name such as default (lower-case letters, digits, _ and -)')


def resolve(host, pool, group, stores, defaults=None):
    """The store of ``host``'s pool: ``({nodes, cluster, username, password, stores}, errors)``.

    ``stores`` maps each host of the store group to its (templated) ``kv_store_*`` variables and
    ``ansible_host``. Errors name the serving host and the variable.
    """
    defaults = store.store_defaults() if defaults is None else defaults
    problem = pool_name_problem(host, pool)
    if problem:
        return None, [problem]
    found = _pool_stores(pool, stores or {}, defaults)
    if not found:
        return None, [msg(host, 'lmcache_server_kv_pool', pool, 'has no store: no host of group %s lists it '
                                'in kv_store_pools' % group, 'add it to a store\'s kv_store_pools, or put the store '
                                'host in group %s (lmcache_server_kv_store_group)' % group)]
    problem = _topology_problem(pool, found)
    if problem:
        return None, [msg(host, 'lmcache_server_kv_pool', pool, problem, 'then run the plan again')]
    errors, nodes = [], []
    for name, cfg in found.items():
        address, port = store.store_endpoint(name, stores[name], defaults)
        if addresses.is_loopback(address) and name != host:
            errors.append(msg(host, 'lmcache_server_kv_pool', pool, 'uses store %s, which binds %s (loopback) '
                                    'and cannot be reached from %s' % (name, address, host),
                                    'set kv_store_bind (and kv_store_allow_network: true) on %s, or serve the pool '
                                    'from this host' % name))
        nodes.append(addresses.host_port(address, port))
    first = next(iter(found.values()))
    password = first.get('kv_store_password')
    if not isinstance(password, str) or not password:
        errors.append('host %s: lmcache_server_kv_pool=%s uses store %s, whose kv_store_password (value hidden) is '
                      'not set; set it from a vault' % (host_label(host), pool, next(iter(found))))
    resolved = {'pool': pool, 'stores': list(found), 'nodes': nodes,
                'cluster': as_bool(first.get('kv_store_cluster')) is True,
                'username': first.get('kv_store_username'), 'password': password}
    return (None if errors else resolved), errors


def adapter(resolved, prefix):
    """The ``--l2-adapter`` JSON object (with the password) for a resolved pool and a key prefix."""
    user, password = resolved['username'], resolved['password']
    if CREDENTIALS_CROSSED:
        user, password = password, user
    found = {'type': ADAPTER_TYPE, 'startup_nodes': ','.join(resolved['nodes']),
             'cluster_mode': bool(resolved['cluster']), 'username': user, 'password': password,
             'key_prefix': prefix, 'shared': True, 'max_capacity_gb': 0}
    if resolved.get('request_timeout') is not None:
        found['request_timeout'] = float(resolved['request_timeout'])
    return found


def adapter_shown(resolved, prefix):
    """The adapter JSON with the password redacted, for plans and reports."""
    shown = adapter(resolved, prefix)
    shown['username' if CREDENTIALS_CROSSED else 'password'] = '<redacted>'
    return shown


def adapter_json(pool, nodes, username, password, inputs, cluster=False, request_timeout=None):
    """The ``--l2-adapter`` JSON text for a pool's store (``nodes``: ``['host:port']``, its ACL user and password)
    and one host's ``PREFIX_INPUTS`` values (``prefix_inputs``, or a plan's ``kv_pool.inputs``); without
    ``request_timeout`` LMCache's own default applies."""
    resolved = {'nodes': list(nodes), 'cluster': bool(cluster), 'username': username, 'password': password,
                'request_timeout': request_timeout}
    return json.dumps(adapter(resolved, key_prefix(pool, inputs)), sort_keys=True)


def sizing(prediction, derived, n_inputs, prefill=None):
    """What the host writes to its pool and when the store loses against recompute: bytes per token (every rank),
    the largest value (one chunk of one rank), the ranks and the longest prompt (vllm_server_max_model_len; None:
    the model's) that size the store in values, and the break-even store throughput (kv_pool_breakeven)."""
    per_token, unknown = sizes.bytes_per_token(prediction, n_inputs.get('tensor_parallel_size'))
    chunk = derived.get('chunk_size')
    value = sizes.value_bytes(chunk, per_token['rank']) if per_token and chunk else None
    target, why = breakeven.break_even(per_token and per_token['total'], prefill)
    return {'bytes_per_token': per_token and per_token['total'], 'bytes_per_token_rank': per_token and per_token['rank'],
            'bytes_per_token_unknown': unknown, 'chunk_size': chunk, 'value_bytes': value,
            'ranks': int(n_inputs.get('tensor_parallel_size') or 1),
            'max_model_len': (derived.get('mamba_inputs') or {}).get('max_model_len'),
            'prefill_tokens_per_second': prefill, 'break_even_bytes_per_second': target,
            'break_even_GB_per_second': breakeven.gbps(target), 'break_even_unknown': unknown or why}


def plan_pool(host, resolved, n_inputs, derived, cfg, prediction=None):
    """The pool part of one host's plan: its inputs, its key prefix, the adapter (None until N is known), its
    sizing (``sizing``; ``prediction``: block_size_predict.explain_block_size's result, or None)."""
    inputs = prefix_inputs(n_inputs, derived, cfg)
    known = derived.get('block_size') is not None and derived.get('chunk_size') is not None
    prefix = key_prefix(resolved['pool'], inputs) if known else None
    return {'pool': resolved['pool'], 'stores': resolved['stores'], 'nodes': resolved['nodes'],
            'cluster': resolved['cluster'], 'inputs': inputs, 'key_prefix': prefix,
            'request_timeout': resolved.get('request_timeout'),
            'sizing': sizing(prediction, derived, n_inputs, resolved.get('prefill')),
            'adapter_json': adapter_json(resolved['pool'], resolved['nodes'], resolved['username'],
                                         resolved['password'], inputs, resolved['cluster'],
                                         resolved.get('request_timeout')) if known else None,
            'adapter_shown': adapter_shown(resolved, prefix) if known else None}


def host_pool(host, cfg, derived, n_inputs, kv_stores, errors, request_timeout=None, prediction=None, prefill=None,
              device=None):
    """The host's pool (``plan_pool``), or None when lmcache_server_kv_pool is null; problems go to ``errors``.
    ``request_timeout``: the checked lmcache_server_kv_request_timeout; ``prefill``: the checked
    lmcache_server_kv_prefill_tokens_per_second; ``device``: LMCache's device (a P2P pool's NIXL build).
    ``kv_stores``: the variables of the store group's hosts, or for a P2P pool those of the coordinator and the host
    (``pool_hosts``)."""
    pool = cfg.get('lmcache_server_kv_pool')
    if pool in (None, ''):
        return None
    lora = lora_problem(host, cfg)
    if kv_p2p.transport(cfg) not in kv_p2p.TRANSPORTS:
        errors.append(msg(host, 'lmcache_server_kv_transport', cfg.get('lmcache_server_kv_transport'),
                          'is not a pool transport', 'use store (the pool\'s KV store) or p2p (LMCache\'s P2P L2)'))
        return None
    if kv_p2p.transport(cfg) == 'p2p':
        return _p2p_pool(host, cfg, derived, n_inputs, kv_stores, errors, lora, (prediction, prefill, device))
    resolved, found = resolve(host, pool, cfg.get('lmcache_server_kv_store_group'), kv_stores or {})
    errors.extend(e for e in found if e not in errors)
    if lora:
        errors.append(lora)
        return None
    if not resolved:
        return None
    resolved.update(request_timeout=request_timeout, prefill=prefill)
    return plan_pool(host, resolved, n_inputs, derived, cfg, prediction)


def _p2p_pool(host, cfg, derived, n_inputs, peers, errors, lora, extra):
    """A P2P pool's plan (kv_p2p): the pool's inputs and sizing as a store pool's, no store and no adapter."""
    prediction, prefill, device = extra
    pool = cfg.get('lmcache_server_kv_pool')
    problems, values = kv_p2p.check(host, cfg, peers, device)
    problems += [p for p in (pool_name_problem(host, pool), lora) if p]
    errors.extend(e for e in problems if e not in errors)
    if problems:
        return None
    inputs = prefix_inputs(n_inputs, derived, cfg)
    return {'pool': pool, 'transport': 'p2p', 'stores': [], 'nodes': [], 'cluster': False, 'inputs': inputs,
            'key_prefix': None, 'request_timeout': None,
            'sizing': sizing(prediction, derived, n_inputs, prefill), 'adapter_json': None, 'adapter_shown': None,
            'p2p': kv_p2p.plan(host, cfg, peers, values)}


def launch(cfg, service, argv, env_file, kv):
    """LMCache's argv for a host in a pool. A store pool: through the launcher, the adapter JSON in the 0600
    environment file (the launcher adds ``--l2-adapter`` when a store answers); ``service`` gets the launcher's path
    and pip's argv for the store client (``pip.kv_client``, ``pip.versions.kv_client``), ``env_file`` the JSON.
    A P2P pool: the peer flags (kv_p2p), pip's argv for NIXL (``pip.kv_p2p``), what status.yml asks
    (``p2p_status``) and, on the coordinator host, the coordinator (``service['coordinator']``: argv and readiness
    URL). Without a pool, ``argv`` unchanged.
    """
    if not kv:
        return argv
    venv = str(cfg.get('lmcache_server_venv') or '').rstrip('/')
    p2p = kv.get('p2p')
    if p2p:
        spec = '%s==%s' % (p2p['package'], p2p['package_version'])
        service['pip']['kv_p2p'] = package_spec.lmcache_pip(cfg, venv, [spec])['install']
        service['pip']['versions']['kv_p2p'] = p2p['package_version']
        service['pip']['kv_p2p_name'] = p2p['package']
        service['p2p_status'] = {'p2p': True, 'coordinator_service': None, 'coordinator_health_url': None}
        if p2p['coordinator_here']:
            chunk = (kv.get('sizing') or {}).get('chunk_size')
            service['coordinator'] = {'argv': kv_p2p.coordinator_argv(service['bin'], p2p, chunk),
                                      'health_url': kv_p2p.coordinator_health_url(p2p)}
            service['p2p_status'].update(coordinator_service=service['coordinator_service_name'],
                                         coordinator_health_url=service['coordinator']['health_url'])
        return list(argv) + kv_p2p.server_flags(p2p)
    service['kv_launcher'] = '%s/%s' % (venv, LAUNCHER)
    service['pip']['kv_client'] = package_spec.lmcache_pip(cfg, venv, [CLIENT_PACKAGE])['install']
    service['pip']['versions']['kv_client'] = CLIENT_VERSION
    if kv.get('adapter_json'):
        env_file[ADAPTER_ENV] = kv['adapter_json']
    return [service['python'], service['kv_launcher']] + list(argv[1:])


def shown(kv):
    """A host's pool for its plan: without the adapter JSON (it holds the password); None outside a pool."""
    return dict((k, v) for k, v in (kv or {}).items() if k != 'adapter_json') or None


def summary(kv):
    """The pool's fields of a host's summary row (plan.yml's pool lines)."""
    kv = kv or {}
    sized = kv.get('sizing') or {}
    p2p = kv.get('p2p') or {}
    store_text = 'p2p via %s' % p2p['coordinator_url'] if p2p else ','.join(kv.get('nodes') or [])
    return {'kv_pool': kv.get('pool'), 'kv_store': store_text, 'kv_prefix': kv.get('key_prefix'),
            'kv_transport': 'p2p' if p2p else ('store' if kv else None),
            'kv_coordinator': '%s (%s)' % (p2p['coordinator'], p2p['coordinator_url']) if p2p else None,
            'kv_bytes_per_token': sized.get('bytes_per_token'), 'kv_value_bytes': sized.get('value_bytes'),
            'kv_chunk_size': sized.get('chunk_size'), 'kv_ranks': sized.get('ranks'),
            'kv_max_model_len': sized.get('max_model_len'),
            'kv_break_even_GB_per_second': sized.get('break_even_GB_per_second'),
            'kv_break_even_unknown': sized.get('break_even_unknown')}


def sizing_text(row):
    """The sizing part of a pool line: bytes per token, the largest value and the break-even (or why unknown)."""
    if not row.get('kv_bytes_per_token'):
        return 'bytes per token unknown (%s)' % (row.get('kv_break_even_unknown') or 'no plan')
    text = '%s B per token, %s B per key' % (row['kv_bytes_per_token'], row.get('kv_value_bytes') or '?')
    if row.get('kv_break_even_GB_per_second') is None:
        return '%s, break-even unknown (%s)' % (text, row.get('kv_break_even_unknown'))
    return '%s, break-even %s GB/s' % (text, row['kv_break_even_GB_per_second'])


def pool_values(plans):
    """``[{host, pool, value_bytes, chunk_size, ranks, max_model_len}]`` of the host plans (or the plan's summary rows:
    ``kv_pool``, ``kv_value_bytes``, ``kv_chunk_size``, ...) in a pool whose largest value is known (the KV stores'
    sizing: kv_store_sizing.largest_value, prompt_tokens)."""
    out = []
    for plan in plans or []:
        if not isinstance(plan, dict):
            continue
        kv = plan.get('kv_pool')
        if isinstance(kv, dict) and kv.get('p2p'):
            continue
        if isinstance(kv, dict):
            sized = kv.get('sizing') or {}
            pool, found = kv.get('pool'), dict((k, sized.get(k)) for k in SIZED)
        else:
            pool, found = kv, dict((k, plan.get('kv_' + k)) for k in SIZED)
        if pool and found['value_bytes']:
            out.append(dict(found, host=plan.get('host'), pool=pool))
    return out


def store_group(settings):
    """The store group of a host's settings (lmcache_server_kv_store_group), or None when the host is in no pool or
    in a P2P pool (no store)."""
    if (settings or {}).get('lmcache_server_kv_pool') in (None, '') or kv_p2p.transport(settings or {}) == 'p2p':
        return None
    return (settings or {}).get('lmcache_server_kv_store_group') or DEFAULT_GROUP


def pool_hosts(settings, host, groups):
    """The inventory hosts whose variables ``host``'s pool plan reads (``store_variables``): the store group's hosts,
    or a P2P pool's coordinator and the host itself; None outside a pool."""
    if (settings or {}).get('lmcache_server_kv_pool') in (None, ''):
        return None
    if kv_p2p.transport(settings) == 'p2p':
        return kv_p2p.hosts_needed(settings, host)
    return list((groups or {}).get(store_group(settings), []))


def store_variables(names, variables_of, template=lambda values: values):
    """``{store host: its kv_store_* variables and ansible_host}`` for the hosts ``names`` of a store group.

    ``variables_of(name)`` gives a host's variables (a mapping); ``template(list)`` templates a list of values.
    """
    stores = {}
    for name in names or []:
        svars = variables_of(name) or {}
        keys = sorted(k for k in svars if store.VARIABLE_RE.match(k) or k == 'ansible_host' or k in kv_p2p.PEER_VARIABLES)
        stores[name] = dict(zip(keys, template([svars[k] for k in keys])))
    return stores


def plans_errors(plans):
    """The fleet-level pool checks (``check_pools``, kv_p2p.fleet_errors) over host plans (their ``kv_pool``)."""
    members, names = [], set()
    for plan in plans or []:
        pool = plan.get('kv_pool') if isinstance(plan, dict) else None
        names.add(plan.get('host') if isinstance(plan, dict) else None)
        if pool:
            members.append({'host': plan.get('host'), 'pool': pool.get('pool'), 'inputs': pool.get('inputs') or {},
                            'p2p': pool.get('p2p')})
    errors = check_pools(members) + kv_p2p.fleet_errors(members)
    in_pool = set((m['pool'], m['host']) for m in members)
    for member in members:
        coordinator = (member.get('p2p') or {}).get('coordinator')
        if coordinator in names and (member['pool'], coordinator) not in in_pool:
            errors.append('host %s: lmcache_server_kv_coordinator=%s is not a host of pool %s (lmcache_server_kv_pool); '
                          'name a host of the pool, which runs the coordinator' % (member['host'], coordinator,
                                                                                   member['pool']))
    return sorted(set(errors), key=errors.index)


def check_pools(members):
    """Errors for pools whose hosts disagree on a prefix input. ``members``: ``[{host, pool, inputs}]``."""
    by_pool = {}
    for member in members or []:
        if member and member.get('pool'):
            by_pool.setdefault(member['pool'], []).append(member)
    errors = []
    for pool in sorted(by_pool):
        hosts = sorted(by_pool[pool], key=lambda m: str(m.get('host')))
        first = hosts[0]
        for other in hosts[1:]:
            differ = [name for name in PREFIX_INPUTS + OPTIONAL_INPUTS
                      if name in first['inputs'] and name in other['inputs']
                      and first['inputs'][name] is not None and other['inputs'][name] is not None
                      and first['inputs'][name] != other['inputs'][name]]
            if differ:
                errors.append('pool %s: hosts %s and %s differ in %s, so they could never read each other\'s pages; '
                              'put them in different pools (lmcache_server_kv_pool) or give them the same values'
                              % (pool, first['host'], other['host'], ', '.join(
                                  '%s (%s vs %s)' % (n, fmt_value(first['inputs'][n]),
                                                     fmt_value(other['inputs'][n])) for n in differ)))
    return errors
