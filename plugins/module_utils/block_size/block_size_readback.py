# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""N read back from the running vLLM service, and its drift from the probed N and the unit's flags.

vLLM exports its cache configuration as the labels of the ``vllm:cache_config_info`` gauge
(``CacheConfig.metrics_info()``): ``block_size`` (N once the hybrid alignment ran), ``num_gpu_blocks``
(the KV cache blocks, which is also the Mamba cache blocks M of a hybrid model), ``mamba_cache_mode``
and, from vLLM 0.32, ``prefix_match_unit``. Releases before vLLM's fix report the kernel block size
(16) there for a hybrid model; then, and when the metric is missing, N comes from the service's own
start-up journal (``Setting attention block size to N tokens``, see block_size_journal).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_journal import journal_block_size
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.prometheus_text import parse

CACHE_INFO = 'vllm:cache_config_info'
SHOWN_LABELS = ('block_size', 'num_gpu_blocks', 'mamba_cache_mode', 'prefix_match_unit')
UNALIGNED_BLOCK_SIZE = 16


def _int(value):
    try:
        number = int(str(value))
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def cache_config_info(text):
    """The labels of ``vllm:cache_config_info`` in a /metrics text (engine 0 first), or {}."""
    found = [labels for name, labels, _value in parse(text or '') if name == CACHE_INFO]
    found.sort(key=lambda labels: str(labels.get('engine') or ''))
    return dict(found[0]) if found else {}


def read_back(metrics_text, journal_text=None, hybrid=True, expected_ranks=1, platform='cuda'):
    """``{'n', 'source', 'num_gpu_blocks', 'mamba_cache_mode', 'prefix_match_unit', 'metric_block_size',
    'detail'}``: N as the running service reports it (``source`` metric, journal or None)."""
    info = cache_config_info(metrics_text)
    metric_n = _int(info.get('block_size'))
    out = {'n': None, 'source': None, 'metric_block_size': metric_n,
           'num_gpu_blocks': _int(info.get('num_gpu_blocks')),
           'mamba_cache_mode': info.get('mamba_cache_mode') if info.get('mamba_cache_mode') not in (None, 'None') else None,
           'prefix_match_unit': _int(info.get('prefix_match_unit')), 'detail': ''}
    if metric_n is not None and not (hybrid and metric_n == UNALIGNED_BLOCK_SIZE):
        out.update(n=metric_n, source='metric', detail='%s block_size=%s' % (CACHE_INFO, metric_n))
        return out
    why = '%s is missing' % CACHE_INFO if metric_n is None else \
        '%s reports block_size=%s for a hybrid model (a vLLM before the fix)' % (CACHE_INFO, metric_n)
    if journal_text is None:
        out['detail'] = why
        return out
    result, reason = journal_block_size(journal_text, expected_ranks=expected_ranks, platform=platform)
    if result and result.get('vllm_block_size'):
        out.update(n=int(result['vllm_block_size']), source='journal', detail='%s; the journal says N=%d'
                   % (why, int(result['vllm_block_size'])))
    else:
        out['detail'] = '%s; %s' % (why, reason)
    return out


def drift(host, live, probed_n=None, unit_n=None, chunk_size=None, max_num_batched_tokens=None):
    """Problems (sentences naming the host) where the running N differs from the probed N or the unit's
    flags; [] when they agree or N could not be read back."""
    n = (live or {}).get('n')
    if not n:
        return []
    where = '%s (%s)' % (n, (live or {}).get('source'))
    out = []
    label = 'host %s: ' % host if host else ''
    if probed_n and int(probed_n) != n:
        out.append('%sthe running vLLM reports N=%s but the probe found N=%d; the unit was changed outside the '
                   'collection or vLLM decides N differently now: deploy again' % (label, where, int(probed_n)))
    if unit_n and int(unit_n) != n:
        out.append('%sthe running vLLM reports N=%s but its unit was rendered for N=%d: deploy again'
                   % (label, where, int(unit_n)))
    if chunk_size and int(chunk_size) % n:
        out.append('%sthe LMCache chunk size %d is not a multiple of the running N=%s: deploy again'
                   % (label, int(chunk_size), where))
    if max_num_batched_tokens and int(max_num_batched_tokens) < n:
        out.append('%s--max-num-batched-tokens %d is below the running N=%s: deploy again'
                   % (label, int(max_num_batched_tokens), where))
    return out
