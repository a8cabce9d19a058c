# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host plan's rules: each rule that follows from N or from the pairing of LMCache and vLLM, with the code
that applies it to one host (pure functions, no Ansible objects, no I/O).

The rules themselves (chunk size, max-num-batched-tokens, the kv-transfer config, transfer modes, the
connector, version pairing, ...) take plain values; the functions under "applied to one
host" (``decide_hybrid``, ``plan_n``, ``model_rules``, ``derive``, ``max_num_seqs``,
``compare_prediction``) apply them to the checked values of ``host_plan.plan_host`` and record what they
find on its ``plan_variables.HostSettings``. Every problem is one sentence of the form
``host <h>: <variable>=<value> <problem>; <fix with a valid value>`` (``plan_variables.msg``).
"""

from __future__ import annotations

import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import mamba_clamp
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.addresses import url_host
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    as_bool, as_int, as_number, fmt_value, host_label, msg)

# `lmcache server --help` (lmcache 0.5.6): --eviction-policy {LRU,ARC,IsolatedLRU,noop}; argparse choices are case-sensitive.
EVICTION_POLICIES = ('LRU', 'ARC', 'IsolatedLRU', 'noop')
# `lmcache server --help`: --supported-transfer-mode {lmcache_driven,engine_driven,auto}
SERVER_TRANSFER_MODES = ('lmcache_driven', 'engine_driven', 'auto')
# connector key lmcache.mp.mp_transfer_mode (None = not set = auto)
CONNECTOR_TRANSFER_MODES = ('auto', 'lmcache_driven', 'engine_driven')
DEVICES = ('cuda', 'cpu')
MAMBA_CACHE_MODES = ('none', 'align', 'all')

LMCACHE_DEFAULT_CHUNK_SIZE = 256

# The torch each vLLM release pins exactly (its requirements), by release prefix.
VLLM_TORCH_PINS = (('0.24.', '2.11.0'), ('0.27.', '2.13.0'), ('0.28.', '2.13.0'), ('0.29.', '2.13.0'),
                   ('0.30.', '2.13.0'), ('0.31.', '2.13.0'), ('0.32.', '2.13.0'), ('0.33.', '2.14.0'))
# The torch each LMCache release's compiled CUDA extension (lmcache.c_ops / cuda_ops) was built against: beside
# another torch it fails to load (an undefined symbol) and LMCache falls back to plain torch copies.
LMCACHE_TORCH_BUILDS = (('0.5.3', '2.11.0'), ('0.5.4', '2.13.0'), ('0.5.5', '2.13.0'), ('0.5.6', '2.13.0'))
# Packages an LMCache release's command line imports without declaring them (``lmcache server`` fails with
# "No module named 'openai'" in a venv of its own): installed with it.
LMCACHE_UNDECLARED_DEPS = (('0.5.3', ('openai',)), ('0.5.4', ('openai',)), ('0.5.5', ('openai',)))
# The first LMCache release whose connector accepts --max-num-batched-tokens >= 2N (with separate object groups).
LMCACHE_2N_SINCE = (0, 5, 4)
KV_CONNECTOR = 'LMCacheMPConnector'
KV_CONNECTOR_MODULE_PATH = 'lmcache.integration.vllm.lmcache_mp_connector'
KV_ROLE = 'kv_both'

# LMCache 0.5.6's own refusals for a hybrid KV layout on a CPU vLLM worker.
CPU_HYBRID_ENGINE_DRIVEN_REASON = 'engine-driven transfer does not support multiple KV transfer groups now'
CPU_HYBRID_LMCACHE_DRIVEN_REASON = 'migrate_to_shm_and_wrap requires a contiguous tensor'


class FleetRuleError(ValueError):
    """One or more rule violations; ``errors`` holds every sentence."""

    def __init__(self, errors):
        if isinstance(errors, str):
            errors = [errors]
        self.errors = list(errors)
        super().__init__('\n'.join(self.errors))


# --------------------------------------------------------------------------- helpers

def resolve_connector_transfer_mode(transfer_mode, device):
    """The mode a connector really uses: unset/``auto`` is engine_driven on CPU and lmcache_driven on CUDA."""
    if transfer_mode in (None, '', 'auto'):
        return 'engine_driven' if device == 'cpu' else 'lmcache_driven'
    return transfer_mode


# Labels the collection sets on every Prometheus target; Prometheus reserves names starting with __.
MONITORING_LABELS = ('host', 'service', 'fleet_block_size', 'fleet_hybrid')
LABEL_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def monitoring_label_errors(labels, variable='fleet_monitoring_labels'):
    """Why ``labels`` (added to every target) cannot be used: one sentence per bad label, naming the fix."""
    if labels in (None, ''):
        return []
    if not isinstance(labels, dict):
        return ['%s must be a mapping of label names to values, e.g. {cluster: eu-1}' % variable]
    errors = []
    for name in sorted(labels, key=str):
        value = labels[name]
        if str(name).startswith('__'):
            errors.append('%s sets %s: names starting with __ are Prometheus\'s own (meta) labels; drop it or use a '
                          'name without the leading underscores' % (variable, name))
        elif str(name) in MONITORING_LABELS:
            errors.append('%s sets %s, which the collection sets on every target (the inventory host and vllm or '
                          'lmcache); use another name, e.g. fleet_%s' % (variable, name, name))
        elif not LABEL_NAME_RE.match(str(name)):
            errors.append('%s sets %r, which is not a Prometheus label name (letters, digits and _, not starting '
                          'with a digit)' % (variable, name))
        elif isinstance(value, (dict, list, tuple)) or value is None:
            errors.append('%s sets %s to %r; a label value is a string' % (variable, name, value))
    return errors


# --------------------------------------------------------------------------- chunk size

def chunk_size(n, multiple=1):
    """LMCache ``--chunk-size`` for a hybrid model: ``n * multiple``."""
    return int(n) * int(multiple)


def default_chunk_size(n, multiple=1, hybrid=True):
    """Chunk size when none is given.

    Hybrid: ``N * multiple``.  Non-hybrid: LMCache's own default 256 when it is a
    multiple of the block size, else the block size; either times ``multiple``.
    """
    if hybrid:
        return chunk_size(n, multiple)
    base = LMCACHE_DEFAULT_CHUNK_SIZE if LMCACHE_DEFAULT_CHUNK_SIZE % int(n) == 0 else int(n)
    return base * int(multiple)


def check_chunk_size(host, n, value, variable='lmcache_server_chunk_size'):
    """Errors (list) when an explicit chunk size is not a positive multiple of N."""
    size = as_int(value)
    if size is None or size <= 0:
        return [msg(host, variable, value, 'is not a positive multiple of N=%d' % n, 'use %d' % n)]
    if size % n:
        lower = (size // n) * n
        upper = lower + n
        fix = 'use %d or %d' % (lower, upper) if lower > 0 else 'use %d' % upper
        return [msg(host, variable, value, 'is not a multiple of N=%d' % n, fix)]
    return []


# --------------------------------------------------------------------------- max-num-batched-tokens

def default_max_num_batched_tokens(n):
    """vLLM ``--max-num-batched-tokens`` default for a hybrid model: ``2N-1``."""
    return 2 * int(n) - 1


def version_tuple(version):
    """``'0.5.3'`` -> ``(0, 5, 3)`` (a pre-release suffix ends it: ``'0.5.10rc1'`` -> ``(0, 5, 10)``); None
    when it does not start with a number."""
    parts = []
    for part in str(version or '').split('.'):
        match = re.match(r'^(\d+)', part)
        if not match:
            break
        parts.append(int(match.group(1)))
        if match.group(1) != part:
            break
    return tuple(parts) or None


def torch_pin(version, table):
    """The torch ``table`` names for ``version`` (exact or by release prefix), or None."""
    text = str(version or '')
    for prefix, torch in table:
        if text == prefix or text.startswith(prefix if prefix.endswith('.') else prefix + '.') or text == prefix.rstrip('.'):
            return torch
    return None


def lmcache_packages(version):
    """The pip requirements of an LMCache server venv: lmcache itself and what its release needs undeclared."""
    extra = ()
    for release, packages in LMCACHE_UNDECLARED_DEPS:
        if str(version) == release:
            extra = packages
    return ['lmcache==%s' % version] + list(extra)


def check_version_pairing(host, vllm_version, lmcache_versions):
    """CUDA hosts: each LMCache release must be built for the torch the vLLM release pins.

    ``lmcache_versions``: ``{variable: version}``. Returns ``(errors, warnings)``.
    """
    errors, warnings = [], []
    torch = torch_pin(vllm_version, VLLM_TORCH_PINS)
    if torch is None:
        warnings.append(msg(host, 'vllm_server_version', vllm_version, 'is not in the collection\'s table of torch pins, so '
                            'its pairing with LMCache is not checked', 'check that LMCache was built for its torch'))
        return errors, warnings
    good = [v for v, t in LMCACHE_TORCH_BUILDS if t == torch]
    for variable, version in sorted(lmcache_versions.items()):
        built = torch_pin(version, LMCACHE_TORCH_BUILDS)
        if built is None:
            warnings.append(msg(host, variable, version, 'is not in the collection\'s table of LMCache builds, so its '
                                'pairing with vllm_server_version=%s (torch %s) is not checked' % (vllm_version, torch),
                                'use one of %s' % ', '.join(good) if good else 'check which torch it was built for'))
        elif built != torch:
            errors.append(msg(host, variable, version,
                              'is built for torch %s but vllm_server_version=%s pins torch %s: its CUDA extension would not '
                              'load and LMCache would fall back to slow copies' % (built, vllm_version, torch),
                              'use %s' % (' or '.join(good) if good else 'an LMCache release built for torch %s' % torch)))
    return errors, warnings


def check_max_num_batched_tokens(host, n, value, separate_object_groups=True,
                                 variable='vllm_server_max_num_batched_tokens', lmcache_version=None):
    """Hybrid rule for ``--max-num-batched-tokens``; returns ``(errors, warnings)``.

    ``None`` means the default 2N-1 (valid).  Below N is an error; exactly N is
    valid but warned (prefill serialises); [N, 2N) is valid; >= 2N needs separate
    object groups and is then warned (cached prefixes align to step boundaries).
    """
    errors = []
    warnings = []
    if value is None:
        return errors, warnings
    best = default_max_num_batched_tokens(n)
    tokens = as_int(value)
    if tokens is None or tokens < 1:
        errors.append(msg(host, variable, value, 'is not a positive integer', 'use %d (2N-1 for N=%d)' % (best, n)))
        return errors, warnings
    if tokens < n:
        errors.append(msg(host, variable, value,
                          'is below N=%d (every prefill step must advance at least one full block)' % n,
                          'use %d (2N-1)' % best))
    elif tokens == n:
        warnings.append(msg(host, variable, value,
                            'equals N=%d: it serialises prefill (batch stuck at 1; about 3x slower under load on an H200)' % n,
                            'use %d (2N-1)' % best))
    elif tokens >= 2 * n:
        release = version_tuple(lmcache_version)
        if release is not None and release < LMCACHE_2N_SINCE:
            errors.append(msg(host, variable, value,
                              'is >= 2N=%d, which the connector of LMCache %s refuses when vLLM starts' % (2 * n, lmcache_version),
                              'use %d (2N-1), or vllm_server_lmcache_version 0.5.4 or newer' % best))
        elif as_bool(separate_object_groups) is True:
            warnings.append(msg(host, variable, value,
                                'is >= 2N=%d: cached prefixes align to scheduler step boundaries, not to every block' % (2 * n),
                                'use %d (2N-1) for per-block prefix reuse' % best))
        else:
            errors.append(msg(host, variable, value,
                              'is >= 2N=%d, which needs LMCache separate object groups' % (2 * n),
                              'use %d (2N-1) or set lmcache_server_separate_object_groups=true' % best))
    return errors, warnings


# --------------------------------------------------------------------------- mamba / prefix caching

def check_mamba_cache_mode(host, mode, prefix_caching=True):
    """Hybrid (GDN) rule: ``--mamba-cache-mode align`` with prefix caching on. Returns errors."""
    errors = []
    if mode == 'all':
        errors.append(msg(host, 'vllm_server_mamba_cache_mode', mode,
                          'is not supported: GDN models do not support the all mode', 'use align'))
    elif mode != 'align':
        errors.append(msg(host, 'vllm_server_mamba_cache_mode', mode,
                          'is not usable with LMCache (only align keeps reusable Mamba state snapshots)', 'use align'))
    if as_bool(prefix_caching) is not True:
        errors.append(msg(host, 'vllm_server_enable_prefix_caching', prefix_caching,
                          'turns prefix caching off, which hybrid models with LMCache need', 'use true'))
    return errors


# --------------------------------------------------------------------------- kv-transfer-config

def kv_transfer_config(host, port, transfer_mode=None, mq_timeout=None):
    """vLLM ``--kv-transfer-config`` for LMCacheMPConnector talking to the server at ``host:port``."""
    url = str(host) if '://' in str(host) else 'tcp://%s' % url_host(host)
    port_int = as_int(port)
    extra = {
        'lmcache.mp.host': url,
        'lmcache.mp.port': port_int if port_int is not None else port,
    }
    if transfer_mode not in (None, ''):
        extra['lmcache.mp.mp_transfer_mode'] = transfer_mode
    if mq_timeout not in (None, ''):
        number = as_number(mq_timeout)
        if number is None:
            extra['lmcache.mp.mq_timeout'] = mq_timeout
        else:
            extra['lmcache.mp.mq_timeout'] = int(number) if number.is_integer() else number
    return {
        'kv_connector': KV_CONNECTOR,
        'kv_role': KV_ROLE,
        'kv_connector_module_path': KV_CONNECTOR_MODULE_PATH,
        'kv_connector_extra_config': extra,
    }


def check_transfer_modes(host, server_mode, connector_mode, device):
    """The server's --supported-transfer-mode must accept the connector's resolved mode. Returns errors."""
    errors = []
    if server_mode not in SERVER_TRANSFER_MODES:
        errors.append(msg(host, 'lmcache_server_supported_transfer_mode', server_mode,
                          'is not a transfer mode of lmcache server', 'use one of %s' % ', '.join(SERVER_TRANSFER_MODES)))
    if connector_mode not in (None, '') and connector_mode not in CONNECTOR_TRANSFER_MODES:
        errors.append(msg(host, 'vllm_server_lmcache_transfer_mode', connector_mode,
                          'is not a connector transfer mode', 'use null (auto), lmcache_driven or engine_driven'))
    if errors or device not in DEVICES:
        return errors
    resolved = resolve_connector_transfer_mode(connector_mode, device)
    if server_mode not in ('auto', resolved):
        shown = connector_mode if connector_mode not in (None, '') else None
        errors.append(msg(host, 'vllm_server_lmcache_transfer_mode', shown,
                          '(resolves to %s on %s) is not accepted by lmcache_server_supported_transfer_mode=%s'
                          % (resolved, device, server_mode),
                          'set vllm_server_lmcache_transfer_mode=%s or lmcache_server_supported_transfer_mode=auto' % server_mode))
    return errors


# --------------------------------------------------------------------------- the connector

def check_connector(host, cfg, device, hybrid, errors):
    """Connector rules for one host (``cfg``: resolved role variables); appends to ``errors``."""
    connector = as_bool(cfg.get('vllm_server_kv_connector'))
    if not isinstance(connector, bool):
        errors.append(msg(host, 'vllm_server_kv_connector', cfg.get('vllm_server_kv_connector'), 'is not a boolean', 'use true or false'))
        return
    if device not in DEVICES:
        return
    if connector and hybrid and device == 'cpu':
        resolved = resolve_connector_transfer_mode(cfg.get('vllm_server_lmcache_transfer_mode'), device)
        reason = CPU_HYBRID_ENGINE_DRIVEN_REASON if resolved == 'engine_driven' else CPU_HYBRID_LMCACHE_DRIVEN_REASON
        errors.append(msg(host, 'vllm_server_kv_connector', True,
                          'is refused on a CPU host serving a hybrid model: LMCache fails at KV registration with "%s" '
                          '(lmcache 0.5.6 has no CPU path for hybrid KV layouts)' % reason,
                          'set vllm_server_kv_connector=false on CPU hosts serving hybrid models'))
        return
    if not connector and hybrid and device == 'cuda':
        errors.append(msg(host, 'vllm_server_kv_connector', False,
                          'leaves a hybrid model on a GPU host without LMCache (only CPU hosts may run hybrids without the connector)',
                          'use true'))
        return
    if connector:
        errors.extend(check_transfer_modes(host, cfg.get('lmcache_server_supported_transfer_mode'),
                                           cfg.get('vllm_server_lmcache_transfer_mode'), device))


def check_shared_memory_user(host, settings):
    """CPU hosts with lmcache_driven transfer: LMCache must run as vLLM's user. Returns errors.

    vLLM's CPU worker shares the KV cache through a shared-memory segment created 0600 by its
    own user, which LMCache must open.  Checked only when ``settings`` names both users
    (``lmcache_server_user`` and ``vllm_server_user``); a view of one role alone is not checked.
    """
    settings = settings or {}
    cfg = settings
    lmcache_user = settings.get('lmcache_server_user')
    vllm_user = settings.get('vllm_server_user')
    if lmcache_user in (None, '') or vllm_user in (None, '') or lmcache_user == vllm_user:
        return []
    if as_bool(cfg.get('vllm_server_kv_connector')) is not True or cfg.get('vllm_server_device') != 'cpu':
        return []
    if resolve_connector_transfer_mode(cfg.get('vllm_server_lmcache_transfer_mode'), 'cpu') != 'lmcache_driven':
        return []
    return [msg(host, 'lmcache_server_user', lmcache_user,
                'differs from vllm_server_user=%s, but lmcache_driven transfer on CPU shares the KV cache through a shared-memory '
                'segment that only vLLM\'s user may open' % vllm_user,
                'set lmcache_server_user and lmcache_server_group to vLLM\'s user and group, or use engine_driven transfer '
                '(vllm_server_lmcache_transfer_mode=null and lmcache_server_supported_transfer_mode=auto)')]


# --------------------------------------------------------------------------- applied to one host

def decide_hybrid(cfg, probe=None, prediction=None):
    """(hybrid, source): the probe's outcome wins, then the prediction, then vllm_server_hybrid."""
    if isinstance(probe, dict) and probe.get('outcome') in ('found', 'not_hybrid'):
        return probe.get('outcome') != 'not_hybrid', 'probe'
    if isinstance(prediction, dict) and 'hybrid' in prediction:
        return bool(prediction.get('hybrid')), 'prediction'
    return as_bool(cfg.get('vllm_server_hybrid')) is not False, 'vllm_server_hybrid'


def plan_n(p, n, n_kind, prediction, prediction_problem, hybrid, hybrid_source):
    """(N, where it came from, vllm_server_expected_block_size): the probed or predicted N, else the expected one."""
    host = p.host
    expected = p.integer('vllm_server_expected_block_size', low=1)
    source = n_kind
    if n in (None, '') and n_kind in (None, 'predicted') and expected is not None:
        n, source = expected, 'expected'
        if n_kind == 'predicted' and prediction_problem:
            p.warnings.append('%s; planned with vllm_server_expected_block_size=%d' % (prediction_problem, expected))
    block = None
    if n not in (None, ''):
        block = as_int(n)
        if block is None or block < 1:
            p.error('vllm_block_size', n, 'is not a positive integer block size',
                    'use the N vLLM logs ("Setting attention block size to N tokens")')
            block = None
    elif n_kind == 'probed':
        p.errors.append('host %s: vllm_block_size is unknown (the probe gave no N); run the deploy again or check the '
                        'probe output above' % host_label(host))
    elif n_kind == 'predicted':
        p.errors.append('%s; or set vllm_server_expected_block_size to the N vLLM logs'
                        % (prediction_problem or 'host %s: N cannot be predicted' % host_label(host)))
    if block is None:
        source = None
    if block is not None and expected is not None and expected != block and source in ('predicted', 'probed'):
        p.error('vllm_server_expected_block_size', expected, 'does not match the %s N=%d' % (source, block),
                'use %d (or null%s)' % (block, '' if source == 'probed' else '; the probe on the host decides'))
    if as_bool(p.get('vllm_server_hybrid')) is False and hybrid and hybrid_source != 'vllm_server_hybrid':
        what = 'the probe found a hybrid model' if hybrid_source == 'probe' else \
            '%s is a hybrid model' % (prediction or {}).get('architecture', 'the model')
        p.errors.append('host %s: vllm_server_hybrid=false but %s%s; use true'
                        % (host_label(host), what, ' (N=%s)' % block if block else ''))
    return block, source, expected


def model_rules(p, v, lm, hybrid):
    """The hybrid, connector and version-pairing rules above, applied to this host."""
    host, cfg, device, connector = p.host, p.cfg, v['device'], v['connector']
    if hybrid and v['mamba_mode'] is not None and v['prefix'] is not None:
        p.errors.extend(e for e in check_mamba_cache_mode(host, v['mamba_mode'], v['prefix']) if e not in p.errors)
    server_mode = cfg.get('lmcache_server_supported_transfer_mode')
    if connector is not None and device is not None:
        view = dict(cfg, hybrid=hybrid)
        errors = []
        check_connector(host, view, device, hybrid, errors)
        p.errors.extend(e for e in errors if e not in p.errors)
        p.errors.extend(e for e in check_shared_memory_user(host, view) if e not in p.errors)
    elif server_mode not in SERVER_TRANSFER_MODES:
        p.errors.extend(check_transfer_modes(host, server_mode, None, 'cuda'))
    if connector and device == 'cuda':
        errs, warns = check_version_pairing(host, cfg.get('vllm_server_version'), {
            'vllm_server_lmcache_version': cfg.get('vllm_server_lmcache_version'),
            'lmcache_server_version': cfg.get('lmcache_server_version')})
        p.errors.extend(errs)
        p.warnings.extend(warns)


def derive(p, v, lm, block, source, hybrid, hybrid_source):
    """The N-dependent rules and every derived value."""
    host, cfg, connector = p.host, p.cfg, v['connector']
    chunk = None
    max_tokens = v['mnbt']
    if block is not None:
        if lm['explicit_chunk'] is not None:
            p.errors.extend(e for e in check_chunk_size(host, block, lm['explicit_chunk']) if e not in p.errors)
            chunk = lm['explicit_chunk']
        elif lm['multiple'] is not None:
            chunk = default_chunk_size(block, lm['multiple'], hybrid)
        if hybrid:
            errs, warns = check_max_num_batched_tokens(
                host, block, v['mnbt'], separate_object_groups=lm['separate'] is not False,
                lmcache_version=cfg.get('vllm_server_lmcache_version') if connector else None)
            p.errors.extend(e for e in errs if e not in p.errors)
            p.warnings.extend(warns)
            if max_tokens is None:
                max_tokens = default_max_num_batched_tokens(block)
            if v['spec'] and connector:
                p.warn('vllm_server_speculative_config', v['spec'],
                       'enables speculative decoding with LMCache on a hybrid model, which has produced corrupted output'
                       ' with prefix caching', 'use null unless this combination has been verified')
    workers = lm['workers']
    if workers is None and v['tp'] is not None and v['tp'] > 1:
        workers = v['tp']
    transfer = None
    if connector:
        transfer = kv_transfer_config(cfg.get('vllm_server_lmcache_host'), cfg.get('vllm_server_lmcache_port'),
                                      cfg.get('vllm_server_lmcache_transfer_mode'), v['mq_timeout'])
    return {
        'block_size': block,
        'n_source': source or 'unknown',
        'hybrid': hybrid,
        'hybrid_source': hybrid_source,
        'chunk_size': chunk,
        'max_num_batched_tokens': max_tokens,
        'separate_object_groups': True if hybrid else lm['separate'],
        'mamba_cache_mode': v['mamba_mode'] if hybrid else None,
        'enable_prefix_caching': True if hybrid else v['prefix'],
        'max_gpu_workers': workers,
        'kv_transfer_config': transfer,
        'warnings': p.warnings,
    }


def max_num_seqs(p, v, block, hybrid, prediction, mamba_blocks):
    """--max-num-seqs within vLLM's Mamba cache blocks M (mamba_clamp): M as vLLM reported it (on this host, or
    on its probe group's first host; whatever the device: that vLLM refused), else predicted (CUDA only); and the
    error of a model whose weights do not fit the GPU."""
    cuda = v['device'] == 'cuda'
    memory = prediction.get('memory') if cuda and isinstance(prediction, dict) else None
    fit = mamba_clamp.fit_error(host_label(p.host), memory)
    if fit and fit not in p.errors:
        p.errors.append(fit)
    mamba = _mamba_blocks(block, hybrid, cuda, prediction, mamba_blocks)
    total = (mamba or {}).get('gpu_memory_total_mib') or (memory or {}).get('gpu_memory_total_mib')
    default = mamba_clamp.vllm_default_max_num_seqs(v['device'], total or 160 * 1024)
    decision = mamba_clamp.decide_max_num_seqs(host_label(p.host), v['max_seqs'], mamba, default,
                                               full_cudagraphs=not v['eager'])
    p.errors.extend(decision['errors'])
    p.warnings.extend(decision['warnings'])
    shown = None
    if mamba is not None:
        shown = dict((k, mamba[k]) for k in ('mamba_cache_blocks', 'source', 'how', 'problem', 'kv_cache_gib',
                                             'weight_gib', 'weight_source', 'gpu_memory_source', 'group', 'canary')
                     if k in mamba)
        if 'group' in mamba:
            shown.update(source='group', group_source=mamba.get('source'))
        shown.update(clamped=decision['clamped'], vllm_default_max_num_seqs=default)
    inputs = {'gpu_memory_utilization': v['gpu_util'], 'max_model_len': v['max_len'], 'kv_cache_dtype': v['kv_dtype'],
              'mamba_cache_dtype': v['mamba_dtype'], 'mamba_ssm_cache_dtype': v['ssm_dtype']}
    return {'max_num_seqs': decision['value'], 'mamba': shown, 'mamba_inputs': inputs, 'gpu_memory': memory}


def _mamba_blocks(block, hybrid, cuda, prediction, mamba_blocks):
    """M of a hybrid model and its source: reported (refusal, cached, group; on any device), else on CUDA predicted,
    else unknown (``mamba_cache_blocks`` null and ``problem`` saying why); None for any other host."""
    if not hybrid:
        return None
    if isinstance(mamba_blocks, dict) and mamba_blocks.get('mamba_cache_blocks') is not None:
        return mamba_clamp.rescale(mamba_blocks, block)
    if not cuda:
        return None
    if isinstance(prediction, dict) and isinstance(prediction.get('mamba'), dict):
        return mamba_clamp.rescale(prediction['mamba'], block)
    return {'mamba_cache_blocks': None, 'source': 'unknown',
            'problem': 'M was not predicted (the model\'s config.json is not on the control node); vLLM\'s refusal '
                       'tells it at the first start'}


def compare_prediction(p, block, prediction, n_inputs):
    """A warning with both values and the prediction's inputs when the probed N differs from the predicted one."""
    if block is None or not isinstance(prediction, dict) or not as_int(prediction.get('block_size')) \
            or as_int(prediction.get('block_size')) == block:
        return
    shown = ['architecture=%s' % prediction.get('architecture', '?')]
    shown += ['%s=%s' % (k, fmt_value(n_inputs[k])) for k in
              ('tensor_parallel_size', 'dtype', 'kv_cache_dtype', 'mamba_ssm_cache_dtype', 'mamba_cache_dtype',
               'block_size', 'num_speculative_tokens', 'platform', 'vllm_version')]
    shown.append('config=%s' % n_inputs['config'])
    shown += ['%s=%s' % (k, prediction[k]) for k in ('model_dtype', 'conv_dtype', 'ssm_dtype', 'gpu_architecture')
              if k in prediction]
    p.warnings.append('host %s: the probed N=%d differs from the predicted N=%s (prediction inputs: %s); the probe '
                      'wins: N=%d is deployed' % (host_label(p.host), block, prediction.get('block_size'),
                                                  ', '.join(shown), block))
