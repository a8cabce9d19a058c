# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn the journal of a failed vLLM or LMCache unit into plain words (pure functions).

:func:`diagnose` scans the text of a unit's journal (``journalctl -u vllm.service -o cat``) for the start-up
failures we know, and returns one finding per cause: what went wrong, in plain words,
and which role variable to change (with a valid value when the log tells it).
Unknown failures fall back to the last error line of the log.
"""

from __future__ import annotations

import re

ANSI_RE = re.compile(r'\x1b\[[0-9;?]*[ -/]*[@-~]')


# What a finding says about a failure kind is a str.format template over the values of its match: the regex's named
# groups (a trailing digit dropped: alternatives of one regex cannot share a group name, so model2 fills {model}),
# {matched} (the whole match, stripped), {best} (2N-1 for a matched block size N) and the context of the call:
# {memory_var} (the variable that sizes the KV cache on this device), {role} (vllm_server or lmcache_server) and
# {model} (the model given to diagnose, or "the model").
_CHUNK_MULTIPLE_RE = (r'LMCache chunk size (?P<chunk>\d+) must be a multiple of group \d+ tokens_per_block (?P<block>\d+)'
                      r'|LMCache chunk size should be a multiple of vLLM block size'
                      r'|LMCache chunk size must be a multiple of')
_PORT_IN_USE_RE = r'[Aa]ddress already in use'
_TRANSFER_MODE_FIX = ('make lmcache_server_supported_transfer_mode accept vllm_server_lmcache_transfer_mode '
                      '(use lmcache_server_supported_transfer_mode=auto, or set both to the same mode')
_TRANSFER_MODE_VARS = ('lmcache_server_supported_transfer_mode', 'vllm_server_lmcache_transfer_mode')
_GATED_FIX = ('set vllm_server_hf_token to a Hugging Face token of an account that accepted the model\'s terms (it goes '
              'to the unit\'s 0600 environment file only), or point vllm_server_model at a local copy of the model')
_MNBT_FIX = 'set vllm_server_max_num_batched_tokens to at least {block} ({best} = 2N-1 is best) or leave it null'

# (cause, service, regex, what, fix, variables) in priority order; each regex is searched in the ANSI-stripped text.
# service None applies to both units, else only to that one. A row whose templates name a value its match did not
# fill gives way to the next row of the same cause (chunk_size_multiple: with or without the sizes in the log).
_TABLE = [
    # The NVIDIA driver and CUDA: root causes first, the failures they lead to come later in the log.
    ('nvml_mismatch', None,
     r'Failed to initialize NVML: Driver/library version mismatch',
     'the NVIDIA kernel driver and its user-space libraries have different versions (usually a driver upgrade '
     'without a reboot)',
     'reboot the host (or reload the nvidia kernel modules) so that nvidia-smi answers again, then run the deploy '
     'again',
     ()),
    ('nvidia_driver_unreachable', None,
     r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
     r'|Found no NVIDIA driver on your system'
     r'|libcuda\.so\.1: cannot open shared object file'
     r'|Failed to initialize NVML: (?:Unknown Error|Driver Not Loaded)',
     'no NVIDIA driver answers on the host ({matched}): it is not installed, not loaded, or its libraries are missing',
     'install or load the NVIDIA driver (nvidia-smi must answer; after installing it a reboot loads it), '
     'or set vllm_server_device=cpu on a host without NVIDIA GPUs',
     ('vllm_server_device',)),
    ('cuda_driver_too_old', None,
     r'CUDA driver version is insufficient for CUDA runtime version'
     r'|cudaErrorInsufficientDriver'
     r'|The NVIDIA driver on your system is too old'
     r'|forward compatibility was attempted on non supported HW',
     'the NVIDIA driver is older than the CUDA runtime the installed wheels were built for ({matched})',
     'upgrade the NVIDIA driver (vLLM 0.20 and later wheels are built for CUDA 13 and need driver 580 or newer; '
     'nvidia-smi shows the CUDA version a driver supports), or pin vllm_server_version and lmcache_server_version '
     'to releases built for that CUDA version',
     ('vllm_server_version', 'lmcache_server_version')),
    ('no_cuda_device', None,
     r'no CUDA-capable device is detected'
     r'|cudaErrorNoDevice'
     r'|No CUDA GPUs are available',
     'the CUDA runtime sees no GPU ({matched}): CUDA_VISIBLE_DEVICES (from vllm_server_gpus) names none that exists, '
     'the service user may not open the GPU device nodes, or the driver is not loaded',
     'set vllm_server_gpus to GPU ids that nvidia-smi -L lists (lmcache_vllm.fleet.gpu_facts checks them), check the '
     'driver with nvidia-smi, or set vllm_server_device=cpu on a host without NVIDIA GPUs',
     ('vllm_server_gpus', 'vllm_server_device')),
    ('invalid_device_ordinal', None,
     r'CUDA error: invalid device ordinal|cudaErrorInvalidDevice',
     'a GPU index is beyond the GPUs the service sees ({matched})',
     'set vllm_server_gpus to ids that nvidia-smi lists and vllm_server_tensor_parallel_size to at most their number',
     ('vllm_server_gpus', 'vllm_server_tensor_parallel_size')),
    ('cuda_device_busy', None,
     r'CUDA-capable device\(s\) is/are busy or unavailable|cudaErrorDevicesUnavailable',
     'the GPU is busy or unavailable ({matched}): in exclusive-process compute mode another process holds it',
     'stop the other process on that GPU (nvidia-smi lists it), choose another GPU in vllm_server_gpus, or set the '
     'compute mode to Default (nvidia-smi -c DEFAULT)',
     ('vllm_server_gpus',)),
    ('no_kernel_image', None,
     r'no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice',
     "the installed wheels hold no kernels for this GPU's architecture ({matched})",
     'install a vLLM built for this GPU (nvidia-smi --query-gpu=compute_cap shows its compute capability): change '
     'vllm_server_version',
     ('vllm_server_version',)),
    ('mamba_cache_blocks', None,
     r'max_num_seqs \((?P<seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)',
     'max_num_seqs ({seqs}) exceeds the Mamba cache blocks vLLM could allocate ({blocks}): every running sequence needs one',
     'lower vllm_server_max_num_seqs to at most {blocks} or raise {memory_var}',
     ('vllm_server_max_num_seqs', '{memory_var}')),
    ('cpu_hybrid_connector', None,
     r'engine-driven transfer does not support multiple KV transfer groups now'
     r'|migrate_to_shm_and_wrap requires a contiguous tensor',
     'LMCache cannot attach to a hybrid model on a CPU vLLM ({matched}): lmcache 0.5.6 has no CPU path for hybrid KV '
     'layouts',
     'set vllm_server_kv_connector=false on this CPU host (serve without LMCache), or serve the model on a GPU host',
     ('vllm_server_kv_connector',)),
    ('chunk_size_multiple', None, _CHUNK_MULTIPLE_RE,
     'LMCache chunk size {chunk} is not a multiple of vLLM block size {block}',
     'set lmcache_server_chunk_size to null (derived from N) or a multiple of {block}',
     ('lmcache_server_chunk_size', 'lmcache_server_chunk_multiple')),
    ('chunk_size_multiple', None, _CHUNK_MULTIPLE_RE,
     'the LMCache chunk size is not a multiple of vLLM block size',
     'set lmcache_server_chunk_size to null (derived from N) or a multiple of N',
     ('lmcache_server_chunk_size', 'lmcache_server_chunk_multiple')),
    ('max_num_batched_tokens_lmcache', None,
     r'require (?:block_size <= )?max_num_batched_tokens.*?got max_num_batched_tokens=(?P<value>\d+), '
     r'block_size=(?P<block>\d+)',
     'max_num_batched_tokens {value} is below the block size N={block}, so a prefill step cannot advance a whole block',
     _MNBT_FIX,
     ('vllm_server_max_num_batched_tokens',)),
    ('max_num_batched_tokens_vllm', None,
     r'block_size \((?P<block>\d+)\) must be <= max_num_batched_tokens \((?P<value>\d+)\)',
     'vLLM requires max_num_batched_tokens ({value}) >= block size ({block}) in Mamba align mode',
     _MNBT_FIX,
     ('vllm_server_max_num_batched_tokens',)),
    ('shm_permission', None,
     r"PermissionError: \[Errno 13\] Permission denied: '(?P<seg>/lmcache_kv_[^']*)'",
     "the LMCache server may not open vLLM's shared-memory KV segment {seg}: vLLM creates it readable by its own user "
     'only (lmcache_driven transfer on CPU)',
     'run both services as the same user (set lmcache_server_user and lmcache_server_group to vllm_server_user and '
     'vllm_server_group), or use engine_driven transfer (vllm_server_lmcache_transfer_mode=null on CPU and '
     'lmcache_server_supported_transfer_mode=auto)',
     ('lmcache_server_user', 'vllm_server_lmcache_transfer_mode')),
    ('lmcache_no_response', None,
     r'LMCache server did not respond to (?P<op>\w+) within (?P<timeout>[\d.]+) ?s',
     'the LMCache server did not respond to {op} within {timeout}s; the server is usually up but does not accept the '
     "connector's transfer mode",
     _TRANSFER_MODE_FIX + '; unset connector mode means engine_driven on CPU and lmcache_driven on CUDA); a low '
     'vllm_server_lmcache_mq_timeout makes this fail fast',
     _TRANSFER_MODE_VARS),
    ('lmcache_no_handler', None,
     r'No handler registered for operation (?P<op>\w+)',
     'the LMCache server has no handler for {op}: it does not accept the transfer mode the connector asked for',
     _TRANSFER_MODE_FIX + ')',
     _TRANSFER_MODE_VARS),
    ('lmcache_unreachable', None,
     r"Cannot reach the LMCache MP server at '(?P<url>[^']+)'",
     'vLLM could not reach the LMCache server at {url}',
     'check that the LMCache unit is active and that vllm_server_lmcache_host/vllm_server_lmcache_port match '
     'lmcache_server_host/lmcache_server_port',
     ('lmcache_server_port', 'vllm_server_lmcache_port')),
    ('mamba_cache_mode', None,
     r"MambaSpec with mamba_cache_mode='(?P<mode>\w+)'",
     'LMCache cannot serve this model with mamba_cache_mode={mode} (only align keeps reusable state snapshots)',
     'set vllm_server_mamba_cache_mode=align',
     ('vllm_server_mamba_cache_mode',)),
    ('gated_model', None,
     r'Cannot access gated repo for url \S*?/(?P<gated>[\w.-]+/[\w.-]+)/resolve/'
     r'|Access to model (?P<gated2>[\w.-]+/[\w.-]+) is restricted',
     'the model hub refused {gated}: the model is gated and the service has no token with access to it (401/403)',
     _GATED_FIX,
     ('vllm_server_hf_token',)),
    ('gated_model', None,
     r'GatedRepoError|Cannot access gated repo',
     'the model hub refused {model}: the model is gated and the service has no token with access to it (401/403)',
     _GATED_FIX,
     ('vllm_server_hf_token',)),
    ('hub_offline_not_cached', None,
     r'outgoing traffic has been disabled',
     'the service runs offline (HF_HUB_OFFLINE=1 in vllm_server_env) and {model} is not in its Hugging Face cache',
     'fetch the model into the cache first with vllm_server_prefetch_model=true (the deploy does it before the probe, '
     'online), or remove HF_HUB_OFFLINE from vllm_server_env, or point vllm_server_model at a local directory',
     ('vllm_server_prefetch_model', 'vllm_server_env')),
    ('hub_unreachable', None,
     r"HTTPSConnectionPool\(host='(?P<hub>[^']+)', port=\d+\): Max retries exceeded"
     r"|We couldn't connect to '(?P<hub2>[^']+)' to load"
     r'|(?P<hub3>)An error happened while trying to locate the files? on the Hub and we cannot find the requested files '
     r'in the local cache'
     r'|(?P<hub4>)httpx\.ConnectError|(?P<hub5>)httpx\.ConnectTimeout',
     'vLLM could not reach the model hub{hub_at} to fetch {model}, and the model is not in the service\'s Hugging Face cache',
     'give the host a way out (a proxy in vllm_server_env: HTTPS_PROXY and NO_PROXY=127.0.0.1,localhost), or fetch the '
     'model once with vllm_server_prefetch_model=true and run offline with HF_HUB_OFFLINE=1 in vllm_server_env, or '
     'point vllm_server_model at a local directory',
     ('vllm_server_env', 'vllm_server_prefetch_model')),
    ('disk_full', None,
     r"No space left on device: '(?P<path>[^']+)'",
     'the disk holding {path} is full (No space left on device)',
     'free space there (df -h {path_dir}), or move it to a larger disk with {path_var}',
     ('{path_var}',)),
    ('disk_full', None,
     r'No space left on device|Errno 28\b',
     'a disk of the host is full (No space left on device)',
     'free space (df -h; the model cache is under {hf_var}, vLLM\'s compile caches under {role}_home), or move the '
     'model cache to a larger disk with {hf_var}',
     ('{hf_var}', '{role}_home')),
    ('model_not_found', None,
     r"Invalid repository ID or local directory specified: '(?P<model>[^']+)'"
     r"|(?P<model2>\S+) is not a local folder and is not a valid model identifier"
     r"|Repository Not Found for url"
     r"|No supported config format found in (?P<model3>\S+)"
     r"|Can't load the configuration of '(?P<model4>[^']+)'"
     r"|Repo id must be in the form [^:]*: '(?P<model5>[^']+)'"
     r"|LocalEntryNotFoundError"
     r"|Cannot find an appropriate cached snapshot folder",
     'vLLM could not find the model {model}: it is neither a local directory with a config.json nor a hub id it can '
     'reach',
     'set vllm_server_model to an existing local model directory or a reachable hub id '
     '(and vllm_server_hf_token for gated models)',
     ('vllm_server_model',)),
    ('cpu_memory_check', None,
     r'Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less '
     r'than desired CPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)',
     'the CPU memory check failed: only {free} GiB of {total} GiB are free on NUMA node {node}, less than the {want} GiB '
     'that gpu_memory_utilization={util} asks for',
     'lower vllm_server_gpu_memory_utilization (e.g. 0.5) or set vllm_server_cpu_kvcache_space_gb (e.g. 1), '
     'which replaces the check',
     ('vllm_server_gpu_memory_utilization', 'vllm_server_cpu_kvcache_space_gb')),
    ('gpu_memory_check', None,
     r'Free memory on device[^\n]*less than desired GPU memory utilization[^\n]*',
     'there is less free GPU memory than gpu_memory_utilization asks for ({matched})',
     'lower vllm_server_gpu_memory_utilization, or free the GPU (another process uses it)',
     ('vllm_server_gpu_memory_utilization',)),
    ('kv_cache_too_small', None,
     r"To serve at least one request with the models's max seq len \((?P<len>\d+)\)",
     'the KV cache left after loading the model cannot hold one sequence of max_model_len {len}',
     'lower vllm_server_max_model_len or raise {memory_var}',
     ('vllm_server_max_model_len', '{memory_var}')),
    ('no_cache_memory', None,
     r'No available memory for the cache blocks',
     'no memory is left for the KV cache after loading the model',
     'raise {memory_var}, or use more GPUs (vllm_server_tensor_parallel_size)',
     ('{memory_var}', 'vllm_server_tensor_parallel_size')),
    ('out_of_memory', None,
     r'CUDA out of memory\. Tried to allocate (?P<want>[\d.]+ [KMGT]?i?B)\. GPU (?P<gpu>\d+) has a total capacity of '
     r'(?P<total>[\d.]+ [KMGT]?i?B) of which (?P<free>[\d.]+ [KMGT]?i?B) is free',
     'GPU {gpu} ran out of memory while starting: it asked for {want} more with {free} free of {total} '
     '(another process on the GPU holds memory when far less is free than gpu_memory_utilization leaves)',
     'lower vllm_server_gpu_memory_utilization or vllm_server_max_model_len, raise vllm_server_tensor_parallel_size, '
     'or free the GPU (nvidia-smi lists its processes)',
     ('vllm_server_gpu_memory_utilization', 'vllm_server_max_model_len')),
    ('out_of_memory', None,
     r'CUDA out of memory|OutOfMemoryError',
     'the accelerator ran out of memory while starting',
     'lower vllm_server_gpu_memory_utilization or vllm_server_max_model_len, or raise vllm_server_tensor_parallel_size',
     ('vllm_server_gpu_memory_utilization', 'vllm_server_max_model_len')),
    ('port_in_use', 'lmcache', _PORT_IN_USE_RE,
     'an LMCache listening port is already in use by another process',
     'change lmcache_server_port or lmcache_server_http_port to a free port (or stop the other process)',
     ('lmcache_server_port', 'lmcache_server_http_port')),
    ('port_in_use', 'vllm', _PORT_IN_USE_RE,
     'the vLLM port is already in use by another process',
     'change vllm_server_port to a free port (or stop the other process)',
     ('vllm_server_port',)),
    ('max_model_len', None,
     r'User-specified max_model_len \((?P<want>\d+)\) is greater than the derived max_model_len '
     r'\((?:\w+=)?(?P<limit>\d+)',
     'max_model_len {want} is larger than the model allows ({limit})',
     'lower vllm_server_max_model_len to at most {limit} (or leave it null)',
     ('vllm_server_max_model_len',)),
    ('tp_heads', None,
     r'Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel size '
     r'\((?P<tp>\d+)\)',
     'the model has {heads} attention heads, which tensor parallel size {tp} does not divide',
     'set vllm_server_tensor_parallel_size to a divisor of {heads} (and list as many GPUs in vllm_server_gpus)',
     ('vllm_server_tensor_parallel_size',)),
    ('bad_arguments', None,
     r'error: (?:unrecognized arguments: [^\n]*|argument [^\n]*invalid choice[^\n]*|argument [^\n]*invalid [^\n]*value[^\n]*)',
     'the command line was rejected: {matched}',
     'remove or fix the argument in {role}_extra_args (or the variable that sets it)',
     ('{role}_extra_args',)),
    ('exec_missing', None,
     r'status=203/EXEC|Failed at step EXEC spawning',
     'systemd could not execute the service binary (status 203/EXEC)',
     'reinstall: run the deploy again, and check {role}_venv',
     ('{role}_venv',)),
    ('lmcache_incomplete', None,
     r"The 'lmcache server' command requires the full lmcache installation",
     'the lmcache installation lacks its server dependencies or CUDA extensions',
     'reinstall lmcache (check lmcache_server_version, lmcache_server_wheelhouse and lmcache_server_device)',
     ('lmcache_server_version', 'lmcache_server_device')),
    ('start_limit', None,
     r'Start request repeated too quickly|start-limit-hit',
     'systemd stopped restarting the unit after repeated failures (start limit hit)',
     'fix the cause above, then run the deploy again (it resets the unit)',
     ()),
]

RULES = [(cause, service, re.compile(pattern), what, fix, variables)
         for cause, service, pattern, what, fix, variables in _TABLE]

# A cause that adds nothing once one of these is found: the transfer-mode mismatch makes the "Is the server running?"
# follow-ups moot, and a gated, unreachable or disabled hub is why the model was "not found".
SUPERSEDED_BY = {
    'lmcache_unreachable': {'lmcache_no_response', 'lmcache_no_handler', 'shm_permission'},
    'model_not_found': {'gated_model', 'hub_unreachable', 'hub_offline_not_cached'},
}

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


# The roles' default unit names (tests check them against defaults/main.yml), named when the caller gives none.
DEFAULT_UNITS = {'vllm': 'vllm', 'lmcache': 'lmcache-server'}


def unit_file_name(unit, service):
    """``journalctl -u`` argument: the unit given (``vllm`` -> ``vllm.service``), else the role's default unit."""
    name = unit or DEFAULT_UNITS[service]
    return name if '.' in name else name + '.service'


def path_variable(path, service, paths=None):
    """The role variable that moves the directory holding ``path``.

    ``paths`` maps variables to their directories on the host (e.g. the host plan's ``vllm_server_hf_home``); the
    longest one that holds ``path`` wins. Without one that does, a path in a Hugging Face cache is
    ``vllm_server_hf_home``, anything else the service's home.
    """
    best = None
    for variable, directory in (paths or {}).items():
        directory = str(directory or '').rstrip('/')
        if directory and (path == directory or path.startswith(directory + '/')):
            if best is None or len(directory) > len(best[1]):
                best = (variable, directory)
    if best:
        return best[0]
    if '/huggingface' in path or '/models--' in path:
        return 'vllm_server_hf_home'
    return '%s_server_home' % service


def diagnose(text, service='vllm', host='', device='cuda', model=None, unit=None, paths=None):
    """Return a list of findings for the journal ``text`` of a failed unit.

    ``service`` is ``vllm`` or ``lmcache`` (decides which variables a generic cause names); ``unit`` is its systemd
    unit (named in the advice; default the role's); ``paths`` maps role variables to their directories on the host
    (a full disk names the variable that moves the full one, see :func:`path_variable`).
    Each finding is a dict: ``cause`` (rule name, ``unknown`` for the fallback), ``what``
    (plain words), ``fix`` (what to change), ``variables`` (role variables involved),
    ``evidence`` (the log line) and ``message`` (one sentence ``host <h>: <what>; <fix>``).
    """
    clean = strip_ansi(text)
    journal_unit = unit
    unit = 'lmcache' if str(service).startswith('lmcache') else 'vllm'
    context = {'memory_var': _memory_var(device), 'role': unit + '_server', 'model': model or 'the model',
               'hf_var': 'vllm_server_hf_home', '_paths': paths, '_service': unit}
    findings = []
    seen = set()
    for cause, rule_service, regex, what_template, fix_template, variable_templates in RULES:
        if cause in seen or rule_service not in (None, unit):
            continue
        match = regex.search(clean)
        if not match:
            continue
        values = _values(match, context)
        try:
            what, fix = what_template.format(**values), fix_template.format(**values)
        except KeyError:
            continue
        seen.add(cause)
        variables = [template.format(**values) for template in variable_templates]
        line_start = clean.rfind('\n', 0, match.start()) + 1
        line_end = clean.find('\n', match.end())
        evidence = clean[line_start:line_end if line_end >= 0 else len(clean)].strip()
        findings.append(_finding(host, cause, what, fix, variables, evidence))
    found = {f['cause'] for f in findings}
    findings = [f for f in findings if not found & SUPERSEDED_BY.get(f['cause'], set())]
    return findings or [_fallback(host, clean, unit, unit_file_name(journal_unit, unit))]


def _fallback(host, clean, service, unit):
    """The finding for a failure no rule knows: the last error line, and where to read the whole journal."""
    line = last_error_line(clean)
    if line:
        return _finding(host, 'unknown', 'the %s unit failed: %s' % ('LMCache' if service == 'lmcache' else service, line),
                        'read the unit journal (journalctl -u %s) for the full error' % unit, [], line)
    return _finding(host, 'unknown', 'the unit failed without a message in its journal',
                    'read the unit journal (journalctl -u %s) and systemctl status %s' % (unit, unit), [], '')


def _values(match, context):
    """The values a rule's templates may name, for this ``match`` (see the comment above _TABLE)."""
    values = dict(context, matched=match.group(0).strip())
    for name, value in match.groupdict().items():
        if value is not None:
            values[name.rstrip('0123456789')] = value
    if 'block' in values:
        values['best'] = 2 * int(values['block']) - 1
    if 'hub' in values:
        values['hub_at'] = ' at %s' % values['hub'] if values['hub'] else ''
    if 'path' in values:
        values['path_var'] = path_variable(values['path'], context['_service'], context['_paths'])
        values['path_dir'] = values['path'].rsplit('/', 1)[0] or '/'
    return values


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
