# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``nvidia-smi`` says about a host's GPUs, and whether a vLLM request fits them (pure functions).

- :func:`gpu_facts` reads the GPUs with the collection's one nvidia-smi reader
  (``hardware.gpu_inventory`` with ``GPU_REPORT_FIELDS``), adds the driver and CUDA versions (from the
  ``nvidia-smi`` header) and says plainly when there is no NVIDIA driver (a CPU host is a result, not
  a failure);
- :func:`check_gpu_request` checks a tensor-parallel size and a GPU id list against those facts and
  returns errors that name the host, the variable and a valid value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.hardware import (
    GPU_REPORT_FIELDS,
    GpuQueryError,
    gpu_inventory,
)

_CUDA_RE = re.compile(r'CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)')
_DRIVER_RE = re.compile(r'Driver Version\s*:\s*([0-9]+(?:\.[0-9]+)*)')


def parse_header(text):
    """(driver version, CUDA version) from the plain ``nvidia-smi`` output or ``nvidia-smi -q``."""
    cuda = _CUDA_RE.search(text or '')
    driver = _DRIVER_RE.search(text or '')
    return (driver.group(1) if driver else None), (cuda.group(1) if cuda else None)


def first_line(text):
    for line in (text or '').splitlines():
        if line.strip():
            return line.strip()
    return ''


def no_driver(reason, nvidia_smi=None, output=''):
    """The facts of a host where no NVIDIA driver answers."""
    return {
        'driver_present': False,
        'driver_version': None,
        'cuda_version': None,
        'count': 0,
        'gpus': [],
        'nvidia_smi': nvidia_smi,
        'reason': reason,
        'output': output,
    }


def gpu_facts(run_command, nvidia_smi):
    """The ``fleet_gpus`` fact. ``nvidia_smi`` is the path of the binary, or None when it is absent."""
    if not nvidia_smi:
        return no_driver('no NVIDIA driver: nvidia-smi is not installed on this host')
    try:
        gpus = gpu_inventory(run_command, nvidia_smi, GPU_REPORT_FIELDS)
    except GpuQueryError as e:
        if e.rc is None:
            return no_driver('no NVIDIA driver: %s' % e.msg, nvidia_smi)
        if e.rc == 0:
            return no_driver('no working NVIDIA driver: %s' % e.msg, nvidia_smi)
        output = '\n'.join(part.strip() for part in (e.stdout, e.stderr) if part and part.strip())
        return no_driver('no working NVIDIA driver: %s' % (first_line(output) or e.msg), nvidia_smi, output)
    driver, cuda = None, None
    try:
        rc, out, _err = run_command([nvidia_smi])
        if rc == 0:
            driver, cuda = parse_header(out)
    except OSError:
        pass
    driver = driver or next((g['driver_version'] for g in gpus if g.get('driver_version')), None)
    return {
        'driver_present': True,
        'driver_version': driver,
        'cuda_version': cuda,
        'count': len(gpus),
        'gpus': gpus,
        'nvidia_smi': nvidia_smi,
        'reason': '%d NVIDIA GPU(s), driver %s, CUDA %s' % (len(gpus), driver or '?', cuda or '?'),
        'output': '',
    }


def _version_tuple(text):
    return tuple(int(p) for p in re.findall(r'\d+', str(text or '')))


def _describe(gpus):
    return ', '.join('%s: %s' % (g.get('index'), g.get('name') or '?') for g in gpus) or 'none'


def _example_ids(count, want):
    return '[%s]' % ', '.join('"%d"' % i for i in range(min(count, want)))


def check_gpu_request(host, facts, device='cuda', tensor_parallel_size=1, gpus=None, required_cuda_version=None):
    """``{'errors': [...], 'warnings': [...]}`` for a vLLM that wants ``tensor_parallel_size`` GPUs
    (``gpus``: the ids of ``vllm_server_gpus``, indexes or UUIDs) on a host with these ``facts``.

    CPU hosts (``device`` other than cuda) are not checked."""
    errors, warnings = [], []
    prefix = 'host %s: ' % host if host else ''
    if device != 'cuda':
        return {'errors': errors, 'warnings': warnings}
    facts = facts or {}
    tp = int(tensor_parallel_size or 1)
    wanted = [str(g).strip() for g in (gpus or [])]
    if not facts.get('driver_present'):
        errors.append('%svllm_server_device=cuda but %s; install the NVIDIA driver (nvidia-smi must answer), '
                      'or set vllm_server_device=cpu' % (prefix, facts.get('reason') or 'no NVIDIA driver answers'))
        return {'errors': errors, 'warnings': warnings}
    seen = facts.get('gpus') or []
    count = len(seen)
    if count == 0:
        errors.append('%snvidia-smi answers but lists no GPU; check the driver (nvidia-smi -L) or set '
                      'vllm_server_device=cpu' % prefix)
        return {'errors': errors, 'warnings': warnings}
    if tp > count:
        errors.append('%svllm_server_tensor_parallel_size=%d but nvidia-smi sees %d GPU(s) (%s); use at most %d'
                      % (prefix, tp, count, _describe(seen), count))
    by_index = dict((str(g.get('index')), g) for g in seen)
    by_uuid = dict((str(g.get('uuid')), g) for g in seen if g.get('uuid'))
    selected = []
    if wanted:
        valid = ', '.join(sorted(by_index, key=lambda k: int(k) if k.isdigit() else 0))
        for gpu_id in wanted:
            gpu = by_index.get(gpu_id) or by_uuid.get(gpu_id)
            if gpu is None:
                errors.append('%svllm_server_gpus names GPU %s, which nvidia-smi does not see (GPUs: %s); '
                              'use ids among %s (or their UUIDs)' % (prefix, gpu_id, _describe(seen), valid))
            else:
                selected.append(gpu)
        uuids = [g.get('uuid') or g.get('index') for g in selected]
        duplicates = sorted(set(u for u in uuids if uuids.count(u) > 1), key=str)
        if duplicates:
            errors.append('%svllm_server_gpus names the same GPU more than once (%s); list %d different ids, e.g. %s'
                          % (prefix, ', '.join(str(d) for d in duplicates), tp, _example_ids(count, tp)))
        if len(wanted) != tp:
            errors.append('%svllm_server_gpus lists %d GPU(s) but vllm_server_tensor_parallel_size=%d; list exactly %d '
                          'ids, e.g. %s' % (prefix, len(wanted), tp, tp, _example_ids(count, tp)))
    else:
        selected = sorted(seen, key=lambda g: g.get('index') or 0)[:tp]
    names = sorted(set(g.get('name') or '?' for g in selected))
    if len(names) > 1:
        warnings.append('%sthe GPUs vLLM will use are of different kinds (%s): tensor parallelism runs at the pace of '
                        'the slowest; choose GPUs of one kind in vllm_server_gpus' % (prefix, ', '.join(names)))
    if required_cuda_version and facts.get('cuda_version'):
        if _version_tuple(facts['cuda_version']) < _version_tuple(required_cuda_version):
            errors.append('%sthe NVIDIA driver %s supports CUDA up to %s, but this vLLM needs CUDA %s; upgrade the '
                          'driver, or pin a vllm_server_version built for CUDA %s'
                          % (prefix, facts.get('driver_version') or '?', facts['cuda_version'],
                             required_cuda_version, facts['cuda_version']))
    return {'errors': errors, 'warnings': warnings}


def memory_summary(facts):
    """One short line per GPU for a report: ``0 NVIDIA H200 52.4/140.4 GiB 35%``."""
    lines = []
    for gpu in (facts or {}).get('gpus') or []:
        total = gpu.get('memory_total_mib')
        used = gpu.get('memory_used_mib')
        util = gpu.get('utilization_pct')
        lines.append('%s %s %s/%s GiB%s' % (
            gpu.get('index'), gpu.get('name') or '?',
            '?' if used is None else '%.1f' % (used / 1024.0),
            '?' if total is None else '%.1f' % (total / 1024.0),
            '' if util is None else ' %d%%' % util))
    return lines
