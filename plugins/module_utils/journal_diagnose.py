# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn the journal of a failed vLLM or LMCache unit into plain words (pure functions).

:func:`diagnose` scans the text of ``journalctl -u <unit> -o cat`` for the start-up
failures we know, and returns one finding per cause: what went wrong, in plain words,
and which role variable to change (with a valid value when the log tells it).
Unknown failures fall back to the last error line of the log.
"""

from __future__ import annotations

import re

ANSI_RE = re.compile(r'\x1b\[[0-9;?]*[ -/]*[@-~]')


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _mamba_blocks(m, ctx):
    seqs, blocks = m.group('seqs'), m.group('blocks')
    return ('max_num_seqs (%s) exceeds the Mamba cache blocks vLLM could allocate (%s): every running sequence needs one'
            % (seqs, blocks),
            'lower vllm_server_max_num_seqs to at most %s or raise %s' % (blocks, ctx['memory_var']),
            ['vllm_server_max_num_seqs', ctx['memory_var']])


def _model_missing(m, ctx):
    model = m.groupdict().get('model') or ctx.get('model') or 'the model'
    return ('vLLM could not find the model %s: it is neither a local directory with a config.json nor a hub id it can reach'
            % model,
            'set vllm_server_model to an existing local model directory or a reachable hub id '
            '(and vllm_server_hf_token for gated models)',
            ['vllm_server_model'])


def _chunk_multiple(m, ctx):
    chunk, block = m.groupdict().get('chunk'), m.groupdict().get('block')
    if chunk and block:
        what = 'LMCache chunk size %s is not a multiple of vLLM block size %s' % (chunk, block)
        fix = ('set lmcache_server_chunk_size to null (derived from N) or a multiple of %s, '
               'and check that lmcache_server_block_size is the N vLLM logs' % block)
    else:
        what = 'the LMCache chunk size is not a multiple of vLLM block size'
        fix = 'set lmcache_server_chunk_size to null (derived from N) or a multiple of N'
    return what, fix, ['lmcache_server_chunk_size', 'lmcache_server_chunk_multiple']


def _mnbt_lmcache(m, ctx):
    value, block = m.group('value'), m.group('block')
    best = 2 * int(block) - 1
    return ('max_num_batched_tokens %s is below the block size N=%s, so a prefill step cannot advance a whole block'
            % (value, block),
            'set vllm_server_max_num_batched_tokens to at least %s (%d = 2N-1 is best) or leave it null' % (block, best),
            ['vllm_server_max_num_batched_tokens'])


def _mnbt_vllm(m, ctx):
    block, value = m.group('block'), m.group('value')
    best = 2 * int(block) - 1
    return ('vLLM requires max_num_batched_tokens (%s) >= block size (%s) in Mamba align mode' % (value, block),
            'set vllm_server_max_num_batched_tokens to at least %s (%d = 2N-1 is best) or leave it null' % (block, best),
            ['vllm_server_max_num_batched_tokens'])


def _no_response(m, ctx):
    return ('the LMCache server did not respond to %s within %ss; the server is usually up but does not accept the '
            "connector's transfer mode" % (m.group('op'), m.group('timeout')),
            'make lmcache_server_supported_transfer_mode accept vllm_server_lmcache_transfer_mode '
            '(use lmcache_server_supported_transfer_mode=auto, or set both to the same mode; unset connector mode means '
            'engine_driven on CPU and lmcache_driven on CUDA); a low vllm_server_lmcache_mq_timeout makes this fail fast',
            ['lmcache_server_supported_transfer_mode', 'vllm_server_lmcache_transfer_mode'])


def _no_handler(m, ctx):
    return ('the LMCache server has no handler for %s: it does not accept the transfer mode the connector asked for'
            % m.group('op'),
            'make lmcache_server_supported_transfer_mode accept vllm_server_lmcache_transfer_mode '
            '(use lmcache_server_supported_transfer_mode=auto, or set both to the same mode)',
            ['lmcache_server_supported_transfer_mode', 'vllm_server_lmcache_transfer_mode'])


def _unreachable(m, ctx):
    return ('vLLM could not reach the LMCache server at %s' % m.group('url'),
            'check that the LMCache unit is active and that vllm_server_lmcache_host/vllm_server_lmcache_port match '
            'lmcache_server_host/lmcache_server_port',
            ['lmcache_server_port', 'vllm_server_lmcache_port'])


def _cpu_hybrid(m, ctx):
    return ('LMCache cannot attach to a hybrid model on a CPU vLLM (%s): lmcache 0.5.6 has no CPU path for hybrid KV layouts'
            % m.group(0).strip(),
            'set vllm_server_kv_connector=false on this CPU host (serve without LMCache), or serve the model on a GPU host',
            ['vllm_server_kv_connector'])


def _cpu_memory(m, ctx):
    what = ('the CPU memory check failed: only %s GiB of %s GiB are free on NUMA node %s, less than the %s GiB that '
            'gpu_memory_utilization=%s asks for' % (m.group('free'), m.group('total'), m.group('node'), m.group('want'), m.group('util')))
    return (what,
            'lower vllm_server_gpu_memory_utilization (e.g. 0.5) or set vllm_server_cpu_kvcache_space_gb (e.g. 1), '
            'which replaces the check',
            ['vllm_server_gpu_memory_utilization', 'vllm_server_cpu_kvcache_space_gb'])


def _gpu_memory(m, ctx):
    return ('there is less free GPU memory than gpu_memory_utilization asks for (%s)' % m.group(0).strip(),
            'lower vllm_server_gpu_memory_utilization, or free the GPU (another process uses it)',
            ['vllm_server_gpu_memory_utilization'])


def _kv_too_small(m, ctx):
    return ('the KV cache left after loading the model cannot hold one sequence of max_model_len %s' % m.group('len'),
            'lower vllm_server_max_model_len or raise %s' % ctx['memory_var'],
            ['vllm_server_max_model_len', ctx['memory_var']])


def _no_cache_memory(m, ctx):
    return ('no memory is left for the KV cache after loading the model',
            'raise %s, or use more GPUs (vllm_server_tensor_parallel_size)' % ctx['memory_var'],
            [ctx['memory_var'], 'vllm_server_tensor_parallel_size'])


def _oom(m, ctx):
    return ('the accelerator ran out of memory while starting',
            'lower vllm_server_gpu_memory_utilization or vllm_server_max_model_len, or raise vllm_server_tensor_parallel_size',
            ['vllm_server_gpu_memory_utilization', 'vllm_server_max_model_len'])


def _port_in_use(m, ctx):
    if ctx['service'] == 'lmcache':
        return ('an LMCache listening port is already in use by another process',
                'change lmcache_server_port or lmcache_server_http_port to a free port (or stop the other process)',
                ['lmcache_server_port', 'lmcache_server_http_port'])
    return ('the vLLM port is already in use by another process',
            'change vllm_server_port to a free port (or stop the other process)',
            ['vllm_server_port'])


def _mamba_mode(m, ctx):
    return ('LMCache cannot serve this model with mamba_cache_mode=%s (only align keeps reusable state snapshots)'
            % m.group('mode'),
            'set vllm_server_mamba_cache_mode=align',
            ['vllm_server_mamba_cache_mode'])


def _tp_heads(m, ctx):
    return ('the model has %s attention heads, which tensor parallel size %s does not divide' % (m.group('heads'), m.group('tp')),
            'set vllm_server_tensor_parallel_size to a divisor of %s (and list as many GPUs in vllm_server_gpus)'
            % m.group('heads'),
            ['vllm_server_tensor_parallel_size'])


def _bad_args(m, ctx):
    var = 'lmcache_server_extra_args' if ctx['service'] == 'lmcache' else 'vllm_server_extra_args'
    return ('the command line was rejected: %s' % m.group(0).strip(),
            'remove or fix the argument in %s (or the variable that sets it)' % var,
            [var])


def _exec_missing(m, ctx):
    venv = 'lmcache_server_venv' if ctx['service'] == 'lmcache' else 'vllm_server_venv'
    return ('systemd could not execute the service binary (status 203/EXEC)',
            'reinstall: run the deploy again, and check %s' % venv,
            [venv])


def _lmcache_incomplete(m, ctx):
    return ('the lmcache installation lacks its server dependencies or CUDA extensions',
            'reinstall lmcache (check lmcache_server_version, lmcache_server_wheelhouse and lmcache_server_device)',
            ['lmcache_server_version', 'lmcache_server_device'])


def _max_model_len(m, ctx):
    return ('max_model_len %s is larger than the model allows (%s)' % (m.group('want'), m.group('limit')),
            'lower vllm_server_max_model_len to at most %s (or leave it null)' % m.group('limit'),
            ['vllm_server_max_model_len'])


def _shm_permission(m, ctx):
    return ("the LMCache server may not open vLLM's shared-memory KV segment %s: vLLM creates it readable by its own user "
            'only (lmcache_driven transfer on CPU)' % m.group('seg'),
            'run both services as the same user (set lmcache_server_user and lmcache_server_group to vllm_server_user and '
            'vllm_server_group), or use engine_driven transfer (vllm_server_lmcache_transfer_mode=null on CPU and '
            'lmcache_server_supported_transfer_mode=auto)',
            ['lmcache_server_user', 'vllm_server_lmcache_transfer_mode'])


def _start_limit(m, ctx):
    return ('systemd stopped restarting the unit after repeated failures (start limit hit)',
            'fix the cause above, then run the deploy again (it resets the unit)',
            [])


# (name, regex, explain) in priority order; each regex is searched in the ANSI-stripped text.
RULES = [
    ('mamba_cache_blocks',
     re.compile(r'max_num_seqs \((?P<seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)'), _mamba_blocks),
    ('cpu_hybrid_connector',
     re.compile(r'engine-driven transfer does not support multiple KV transfer groups now'
                r'|migrate_to_shm_and_wrap requires a contiguous tensor'), _cpu_hybrid),
    ('chunk_size_multiple',
     re.compile(r'LMCache chunk size (?P<chunk>\d+) must be a multiple of group \d+ tokens_per_block (?P<block>\d+)'
                r'|LMCache chunk size should be a multiple of vLLM block size'
                r'|LMCache chunk size must be a multiple of'), _chunk_multiple),
    ('max_num_batched_tokens_lmcache',
     re.compile(r'require (?:block_size <= )?max_num_batched_tokens.*?got max_num_batched_tokens=(?P<value>\d+), '
                r'block_size=(?P<block>\d+)'), _mnbt_lmcache),
    ('max_num_batched_tokens_vllm',
     re.compile(r'block_size \((?P<block>\d+)\) must be <= max_num_batched_tokens \((?P<value>\d+)\)'), _mnbt_vllm),
    ('shm_permission',
     re.compile(r"PermissionError: \[Errno 13\] Permission denied: '(?P<seg>/lmcache_kv_[^']*)'"), _shm_permission),
    ('lmcache_no_response',
     re.compile(r'LMCache server did not respond to (?P<op>\w+) within (?P<timeout>[\d.]+) ?s'), _no_response),
    ('lmcache_no_handler',
     re.compile(r'No handler registered for operation (?P<op>\w+)'), _no_handler),
    ('lmcache_unreachable',
     re.compile(r"Cannot reach the LMCache MP server at '(?P<url>[^']+)'"), _unreachable),
    ('mamba_cache_mode',
     re.compile(r"MambaSpec with mamba_cache_mode='(?P<mode>\w+)'"), _mamba_mode),
    ('model_not_found',
     re.compile(r"Invalid repository ID or local directory specified: '(?P<model>[^']+)'"
                r"|(?P<model2>\S+) is not a local folder and is not a valid model identifier"
                r"|Repository Not Found for url"
                r"|No supported config format found in (?P<model3>\S+)"
                r"|Can't load the configuration of '(?P<model4>[^']+)'"
                r"|Repo id must be in the form [^:]*: '(?P<model5>[^']+)'"
                r"|LocalEntryNotFoundError"
                r"|Cannot find an appropriate cached snapshot folder"), _model_missing),
    ('cpu_memory_check',
     re.compile(r'Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less '
                r'than desired CPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)'), _cpu_memory),
    ('gpu_memory_check',
     re.compile(r'Free memory on device[^\n]*less than desired GPU memory utilization[^\n]*'), _gpu_memory),
    ('kv_cache_too_small',
     re.compile(r"To serve at least one request with the models's max seq len \((?P<len>\d+)\)"), _kv_too_small),
    ('no_cache_memory',
     re.compile(r'No available memory for the cache blocks'), _no_cache_memory),
    ('out_of_memory',
     re.compile(r'CUDA out of memory|OutOfMemoryError'), _oom),
    ('port_in_use',
     re.compile(r'[Aa]ddress already in use'), _port_in_use),
    ('max_model_len',
     re.compile(r'User-specified max_model_len \((?P<want>\d+)\) is greater than the derived max_model_len '
                r'\((?:\w+=)?(?P<limit>\d+)'), _max_model_len),
    ('tp_heads',
     re.compile(r'Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel size '
                r'\((?P<tp>\d+)\)'), _tp_heads),
    ('bad_arguments',
     re.compile(r'error: (?:unrecognized arguments: [^\n]*|argument [^\n]*invalid choice[^\n]*|argument [^\n]*invalid [^\n]*value[^\n]*)'),
     _bad_args),
    ('exec_missing',
     re.compile(r'status=203/EXEC|Failed at step EXEC spawning'), _exec_missing),
    ('lmcache_incomplete',
     re.compile(r"The 'lmcache server' command requires the full lmcache installation"), _lmcache_incomplete),
    ('start_limit',
     re.compile(r'Start request repeated too quickly|start-limit-hit'), _start_limit),
]

ERROR_LINE_RE = re.compile(r'(Error|Exception|error:|FAILED|Traceback)')


def strip_ansi(text):
    return ANSI_RE.sub('', text or '')


def _memory_var(device):
    if device == 'cpu':
        return 'vllm_server_cpu_kvcache_space_gb'
    return 'vllm_server_gpu_memory_utilization'


def last_error_line(text):
    """The last line that looks like an error (or the last non-empty line)."""
    lines = [line.strip() for line in strip_ansi(text).splitlines() if line.strip()]
    for line in reversed(lines):
        if ERROR_LINE_RE.search(line) and not line.startswith('Traceback'):
            return line
    return lines[-1] if lines else ''


def diagnose(text, service='vllm', host='', device='cuda', model=None):
    """Return a list of findings for the journal ``text`` of a failed unit.

    ``service`` is ``vllm`` or ``lmcache`` (decides which variables a generic cause names).
    Each finding is a dict: ``cause`` (rule name, ``unknown`` for the fallback), ``what``
    (plain words), ``fix`` (what to change), ``variables`` (role variables involved),
    ``evidence`` (the log line) and ``message`` (one sentence ``host <h>: <what>; <fix>``).
    """
    clean = strip_ansi(text)
    ctx = {'service': 'lmcache' if str(service).startswith('lmcache') else 'vllm',
           'memory_var': _memory_var(device), 'model': model}
    findings = []
    seen = set()
    for name, regex, explain in RULES:
        match = regex.search(clean)
        if not match or name in seen:
            continue
        seen.add(name)
        if name == 'model_not_found':
            groups = match.groupdict()
            model_name = (groups.get('model') or groups.get('model2') or groups.get('model3') or groups.get('model4')
                          or groups.get('model5'))
            ctx_model = dict(ctx, model=model_name or model)
            what, fix, variables = _model_missing(_NamedMatch({'model': ctx_model['model']}), ctx_model)
        else:
            what, fix, variables = explain(match, ctx)
        line_start = clean.rfind('\n', 0, match.start()) + 1
        line_end = clean.find('\n', match.end())
        evidence = clean[line_start:line_end if line_end >= 0 else len(clean)].strip()
        findings.append(_finding(host, name, what, fix, variables, evidence))
    # When the transfer-mode mismatch is found, the "Is the server running?" follow-ups add nothing.
    if any(f['cause'] in ('lmcache_no_response', 'lmcache_no_handler', 'shm_permission') for f in findings):
        findings = [f for f in findings if f['cause'] != 'lmcache_unreachable']
    if not findings:
        line = last_error_line(clean)
        if line:
            findings.append(_finding(host, 'unknown', 'the %s unit failed: %s' % (ctx['service'] if ctx['service'] != 'lmcache' else 'LMCache', line),
                                     'read the unit journal (journalctl -u <unit>) for the full error', [], line))
        else:
            findings.append(_finding(host, 'unknown', 'the unit failed without a message in its journal',
                                     'read the unit journal (journalctl -u <unit>) and systemctl status', [], ''))
    return findings


class _NamedMatch:
    def __init__(self, groups):
        self._groups = groups

    def groupdict(self):
        return dict(self._groups)

    def group(self, name):
        return self._groups.get(name)


def _finding(host, cause, what, fix, variables, evidence):
    prefix = 'host %s: ' % host if host else ''
    return {
        'cause': cause,
        'what': what,
        'fix': fix,
        'variables': list(variables),
        'evidence': evidence,
        'message': '%s%s; %s' % (prefix, what, fix),
    }


def summary(findings):
    """One plain-text paragraph of all findings' messages."""
    return ' | '.join(f['message'] for f in findings)
