# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Derivation and validation rules for one vLLM + LMCache host (pure functions).

Everything here works on plain Python values: no Ansible objects, no I/O.
Every problem is reported as one sentence of the form
``host <h>: <variable>=<value> <problem>; <fix with a valid value>``.

``settings`` dictionaries use the role variable names (``lmcache_server_*`` and
``vllm_server_*``).  Missing keys fall back to :data:`DEFAULTS`, which mirrors the
role defaults.  Two extra keys are understood:

``hybrid``
    ``True`` (default) for a hybrid Mamba/GDN + attention model, ``False`` for an
    ordinary attention-only model (the probe outcome ``not_hybrid``).  When the key
    is missing or ``None`` and a ``vllm_block_size_probe`` result dictionary is given,
    its ``outcome`` decides (``not_hybrid`` means not hybrid).
``vllm_block_size_probe``
    the probe module's result, only used to decide ``hybrid`` as described above.
"""

from __future__ import annotations

import json
import math

# Role defaults (roles/lmcache_server/defaults/main.yml and roles/vllm_server/defaults/main.yml).
DEFAULTS = {
    'lmcache_server_host': '127.0.0.1',
    'lmcache_server_port': 5555,
    'lmcache_server_http_host': '127.0.0.1',
    'lmcache_server_http_port': 8080,
    'lmcache_server_chunk_multiple': 1,
    'lmcache_server_chunk_size': None,
    'lmcache_server_separate_object_groups': True,
    'lmcache_server_l1_size_gb': 1,
    'lmcache_server_eviction_policy': 'LRU',
    'lmcache_server_supported_transfer_mode': 'auto',
    'lmcache_server_max_gpu_workers': None,
    'vllm_server_model': '',
    'vllm_server_host': '127.0.0.1',
    'vllm_server_port': 8000,
    'vllm_server_tensor_parallel_size': 1,
    'vllm_server_dtype': 'auto',
    'vllm_server_kv_cache_dtype': 'auto',
    'vllm_server_mamba_ssm_cache_dtype': 'auto',
    'vllm_server_block_size': None,
    'vllm_server_speculative_config': None,
    'vllm_server_max_num_batched_tokens': None,
    'vllm_server_max_num_seqs': None,
    'vllm_server_max_model_len': None,
    'vllm_server_enable_prefix_caching': True,
    'vllm_server_mamba_cache_mode': 'align',
    'vllm_server_kv_connector': True,
    'vllm_server_lmcache_transfer_mode': None,
    'vllm_server_lmcache_mq_timeout': None,
    'vllm_server_device': 'cuda',
    'vllm_server_gpus': [],
    'hybrid': True,
}

# `lmcache server --help` (lmcache 0.5.6): --eviction-policy {LRU,ARC,IsolatedLRU,noop}; argparse choices are case-sensitive.
EVICTION_POLICIES = ('LRU', 'ARC', 'IsolatedLRU', 'noop')
# `lmcache server --help`: --supported-transfer-mode {lmcache_driven,engine_driven,auto}
SERVER_TRANSFER_MODES = ('lmcache_driven', 'engine_driven', 'auto')
# connector key lmcache.mp.mp_transfer_mode (None = not set = auto)
CONNECTOR_TRANSFER_MODES = ('auto', 'lmcache_driven', 'engine_driven')
DEVICES = ('cuda', 'cpu')
MAMBA_CACHE_MODES = ('none', 'align', 'all')

LMCACHE_DEFAULT_CHUNK_SIZE = 256
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

def _label(host):
    return host if host not in (None, '') else '(unnamed)'


def fmt_value(value):
    """Render a value the way a user writes it in YAML."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, str) and value == '':
        return '""'
    return str(value)


def msg(host, variable, value, problem, fix):
    """Build one rule message: ``host <h>: <variable>=<value> <problem>; <fix>``."""
    return 'host %s: %s=%s %s; %s' % (_label(host), variable, fmt_value(value), problem, fix)


def as_int(value):
    """Return ``value`` as an int when it is an integer (or a string of one), else None. Booleans are not integers."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ('+', '-'):
            sign, text = text[0], text[1:]
        else:
            sign = ''
        if text.isdigit():
            return int(sign + text)
    return None


def as_number(value):
    """Return ``value`` as a float when it is a number (or a string of one), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def as_bool(value):
    """Interpret YAML-ish booleans; anything unknown is returned unchanged."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ('true', 'yes', 'on', '1'):
            return True
        if low in ('false', 'no', 'off', '0'):
            return False
    if isinstance(value, int):
        return bool(value)
    return value


def effective(settings):
    """Return DEFAULTS overlaid with ``settings``."""
    merged = dict(DEFAULTS)
    merged.update(settings or {})
    return merged


def is_hybrid(settings):
    """Decide whether the host serves a hybrid model (see the module docstring)."""
    settings = settings or {}
    flag = settings.get('hybrid')
    if flag is not None:
        return as_bool(flag) is not False
    probe = settings.get('vllm_block_size_probe')
    if isinstance(probe, dict) and probe.get('outcome') == 'not_hybrid':
        return False
    return True


def gpu_list(value):
    """Normalise ``vllm_server_gpus`` (list, or comma separated string) into a list of strings."""
    if value is None or value == '':
        return []
    if isinstance(value, (list, tuple)):
        return [str(item).strip() for item in value if str(item).strip() != '']
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]
    return [item.strip() for item in str(value).split(',') if item.strip() != '']


def resolve_connector_transfer_mode(transfer_mode, device):
    """The mode a connector really uses: unset/``auto`` is engine_driven on CPU and lmcache_driven on CUDA."""
    if transfer_mode in (None, '', 'auto'):
        return 'engine_driven' if device == 'cpu' else 'lmcache_driven'
    return transfer_mode


def connect_host(host):
    """Address the connector dials for a server bound to ``host`` (wildcard binds are reached on loopback)."""
    host = str(host or '127.0.0.1').strip()
    if host in ('0.0.0.0', '::', '[::]', '*'):
        return '127.0.0.1'
    return host


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


def check_max_num_batched_tokens(host, n, value, separate_object_groups=True,
                                 variable='vllm_server_max_num_batched_tokens'):
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
                            'equals N=%d: it serialises prefill (about 7x slower under load, batch stuck at 1)' % n,
                            'use %d (2N-1)' % best))
    elif tokens >= 2 * n:
        if as_bool(separate_object_groups) is True:
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
    host = connect_host(host)
    url = host if '://' in host else 'tcp://%s' % host
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


# --------------------------------------------------------------------------- static validation

def _check_port(host, variable, value, errors):
    port = as_int(value)
    if port is None or not 1 <= port <= 65535:
        errors.append(msg(host, variable, value, 'is not a TCP port', 'use an integer in 1..65535'))
        return None
    return port


def _check_ports(host, cfg, errors):
    names = ('lmcache_server_port', 'lmcache_server_http_port', 'vllm_server_port')
    seen = {}
    for name in names:
        port = _check_port(host, name, cfg.get(name), errors)
        if port is None:
            continue
        if port in seen:
            errors.append(msg(host, name, cfg.get(name), 'is already used by %s on this host' % seen[port],
                              'give the LMCache ZMQ port, the LMCache HTTP port and the vLLM port distinct values'))
        else:
            seen[port] = name


def _check_lmcache_static(host, cfg, hybrid, errors):
    policy = cfg.get('lmcache_server_eviction_policy')
    if policy not in EVICTION_POLICIES:
        fix = 'use one of %s' % ', '.join(EVICTION_POLICIES)
        for known in EVICTION_POLICIES:
            if isinstance(policy, str) and policy.lower() == known.lower():
                fix = 'use %s (lmcache server is case-sensitive)' % known
        errors.append(msg(host, 'lmcache_server_eviction_policy', policy, 'is not an eviction policy of lmcache server', fix))

    l1_size = as_number(cfg.get('lmcache_server_l1_size_gb'))
    if l1_size is None or l1_size <= 0:
        errors.append(msg(host, 'lmcache_server_l1_size_gb', cfg.get('lmcache_server_l1_size_gb'),
                          'is not a positive size in GB', 'use a number > 0, e.g. 1'))

    multiple = as_int(cfg.get('lmcache_server_chunk_multiple'))
    if multiple is None or multiple < 1:
        errors.append(msg(host, 'lmcache_server_chunk_multiple', cfg.get('lmcache_server_chunk_multiple'),
                          'is not an integer >= 1', 'use 1 (chunk size = N) or another whole number'))

    explicit = cfg.get('lmcache_server_chunk_size')
    if explicit not in (None, '') and (as_int(explicit) is None or as_int(explicit) < 1):
        errors.append(msg(host, 'lmcache_server_chunk_size', explicit,
                          'is not a positive integer', 'leave it null to derive it from N, or use a multiple of N'))

    separate = as_bool(cfg.get('lmcache_server_separate_object_groups'))
    if not isinstance(separate, bool):
        errors.append(msg(host, 'lmcache_server_separate_object_groups', cfg.get('lmcache_server_separate_object_groups'),
                          'is not a boolean', 'use true'))
    elif hybrid and not separate:
        errors.append(msg(host, 'lmcache_server_separate_object_groups', False,
                          'turns separate object groups off, which hybrid models need (their Mamba layers get their own cache objects)',
                          'use true'))

    workers = cfg.get('lmcache_server_max_gpu_workers')
    if workers not in (None, ''):
        count = as_int(workers)
        if count is None or count < 1:
            errors.append(msg(host, 'lmcache_server_max_gpu_workers', workers, 'is not an integer >= 1',
                              'use null or at least the tensor parallel size'))


def _check_vllm_static(host, cfg, device, errors):
    model = cfg.get('vllm_server_model')
    if not isinstance(model, str) or not model.strip():
        errors.append(msg(host, 'vllm_server_model', model, 'is empty', 'set a hub id (e.g. Qwen/Qwen3.6-27B) or a local model directory'))

    if device not in DEVICES:
        errors.append(msg(host, 'vllm_server_device', device, 'is not a supported device', 'use cuda or cpu'))

    tp_value = cfg.get('vllm_server_tensor_parallel_size')
    tp = as_int(tp_value)
    if tp is None or tp < 1:
        errors.append(msg(host, 'vllm_server_tensor_parallel_size', tp_value, 'is not an integer >= 1', 'use 1 or the number of GPUs'))
    else:
        gpus = gpu_list(cfg.get('vllm_server_gpus'))
        if gpus and len(gpus) != tp:
            errors.append(msg(host, 'vllm_server_tensor_parallel_size', tp_value,
                              'does not match the GPU list: TP=%d needs %d GPUs, vllm_server_gpus lists %d' % (tp, tp, len(gpus)),
                              'list exactly %d GPU ids in vllm_server_gpus, or leave it empty' % tp))

    spec = cfg.get('vllm_server_speculative_config')
    if spec not in (None, '') and not isinstance(spec, dict):
        errors.append(msg(host, 'vllm_server_speculative_config', spec, 'is not a dictionary',
                          'use null or a mapping such as {"method": "mtp", "num_speculative_tokens": 1}'))
    elif isinstance(spec, dict) and 'num_speculative_tokens' in spec:
        count = as_int(spec.get('num_speculative_tokens'))
        if count is None or count < 0:
            errors.append(msg(host, 'vllm_server_speculative_config', spec, 'has a num_speculative_tokens that is not an integer >= 0',
                              'use a whole number such as 1'))

    mnbt = cfg.get('vllm_server_max_num_batched_tokens')
    if mnbt not in (None, '') and (as_int(mnbt) is None or as_int(mnbt) < 1):
        errors.append(msg(host, 'vllm_server_max_num_batched_tokens', mnbt, 'is not a positive integer',
                          'leave it null (2N-1 for hybrid models) or use an integer >= N'))

    timeout = cfg.get('vllm_server_lmcache_mq_timeout')
    if timeout not in (None, '') and (as_number(timeout) is None or as_number(timeout) <= 0):
        errors.append(msg(host, 'vllm_server_lmcache_mq_timeout', timeout, 'is not a positive number of seconds',
                          'use null (LMCache default 300) or e.g. 30'))


def _check_connector(host, cfg, device, hybrid, errors):
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
    cfg = effective(settings)
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


def validate_host(host, settings):
    """Every static (N-independent) check of one host's settings; returns a list of error sentences."""
    cfg = effective(settings)
    hybrid = is_hybrid(cfg)
    device = cfg.get('vllm_server_device')
    errors = []
    _check_ports(host, cfg, errors)
    _check_lmcache_static(host, cfg, hybrid, errors)
    _check_vllm_static(host, cfg, device, errors)
    if hybrid:
        errors.extend(check_mamba_cache_mode(host, cfg.get('vllm_server_mamba_cache_mode'),
                                             cfg.get('vllm_server_enable_prefix_caching')))
    _check_connector(host, cfg, device, hybrid, errors)
    errors.extend(check_shared_memory_user(host, settings))
    return errors


def check_host(host, settings, n=None):
    """``{'errors': [...], 'warnings': [...]}`` for one host, without raising: the static checks,
    plus the N-dependent ones when ``n`` is given (None or '' = N not known yet)."""
    errors = validate_host(host, settings)
    warnings = []
    if n not in (None, ''):
        more, warnings = validate_with_n(host, n, settings)
        errors.extend(error for error in more if error not in errors)
    return {'errors': errors, 'warnings': list(warnings)}


# --------------------------------------------------------------------------- N-dependent validation and derivation

def check_n(host, n, variable='vllm_block_size'):
    """Errors when N is not a positive integer."""
    value = as_int(n)
    if value is None or value < 1:
        return [msg(host, variable, n, 'is not a positive integer block size',
                    'run the block-size probe or set lmcache_server_block_size to the N vLLM logs')]
    return []


def validate_with_n(host, n, settings):
    """The N-dependent checks; returns ``(errors, warnings)``."""
    errors = check_n(host, n)
    warnings = []
    if errors:
        return errors, warnings
    n = as_int(n)
    cfg = effective(settings)
    hybrid = is_hybrid(cfg)
    explicit = cfg.get('lmcache_server_chunk_size')
    if explicit not in (None, '') and as_int(explicit) is not None and as_int(explicit) >= 1:
        errors.extend(check_chunk_size(host, n, explicit))
    if hybrid:
        mnbt = cfg.get('vllm_server_max_num_batched_tokens')
        if mnbt in (None, '') or (as_int(mnbt) is not None and as_int(mnbt) >= 1):
            errs, warns = check_max_num_batched_tokens(
                host, n, None if mnbt in (None, '') else mnbt,
                separate_object_groups=as_bool(cfg.get('lmcache_server_separate_object_groups')) is True)
            errors.extend(errs)
            warnings.extend(warns)
        spec = cfg.get('vllm_server_speculative_config')
        if isinstance(spec, dict) and as_bool(cfg.get('vllm_server_kv_connector')) is True:
            warnings.append(msg(host, 'vllm_server_speculative_config', spec,
                                'enables speculative decoding with LMCache on a hybrid model, which has produced corrupted output'
                                ' with prefix caching', 'use null unless this combination has been verified'))
    return errors, warnings


def derive(host, n, settings):
    """Derive every N-dependent setting of one host; raises FleetRuleError with all errors.

    Returns a dict with ``chunk_size``, ``max_num_batched_tokens`` (None = leave vLLM's
    default, only for non-hybrid models), ``separate_object_groups``,
    ``kv_transfer_config`` (None when the connector is off), ``warnings``, and for
    convenience ``block_size`` (N), ``hybrid``, ``mamba_cache_mode`` and
    ``enable_prefix_caching``.
    """
    errors = validate_host(host, settings)
    more, warnings = validate_with_n(host, n, settings)
    errors.extend(more)
    if errors:
        raise FleetRuleError(errors)
    n = as_int(n)
    cfg = effective(settings)
    hybrid = is_hybrid(cfg)
    multiple = as_int(cfg.get('lmcache_server_chunk_multiple'))

    explicit = cfg.get('lmcache_server_chunk_size')
    if explicit not in (None, ''):
        size = as_int(explicit)
    else:
        size = default_chunk_size(n, multiple, hybrid)

    mnbt = cfg.get('vllm_server_max_num_batched_tokens')
    if mnbt not in (None, ''):
        mnbt = as_int(mnbt)
    elif hybrid:
        mnbt = default_max_num_batched_tokens(n)
    else:
        mnbt = None

    if as_bool(cfg.get('vllm_server_kv_connector')) is True:
        transfer = kv_transfer_config(cfg.get('lmcache_server_host'), cfg.get('lmcache_server_port'),
                                      cfg.get('vllm_server_lmcache_transfer_mode'), cfg.get('vllm_server_lmcache_mq_timeout'))
    else:
        transfer = None

    return {
        'block_size': n,
        'hybrid': hybrid,
        'chunk_size': size,
        'max_num_batched_tokens': mnbt,
        'separate_object_groups': True if hybrid else as_bool(cfg.get('lmcache_server_separate_object_groups')),
        'mamba_cache_mode': 'align' if hybrid else None,
        'enable_prefix_caching': True if hybrid else as_bool(cfg.get('vllm_server_enable_prefix_caching')),
        'kv_transfer_config': transfer,
        'warnings': warnings,
    }
