# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the Mamba cache clamp (documentation in ``plugins/filter/<filter name>.yml``)."""

from __future__ import annotations

import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils import mamba_clamp


def predicted_mamba_blocks(config, prediction, gpus=None, gpu_architecture=None, gpu_memory_utilization=None,
                           tensor_parallel_size=1, model_dir=None, dtype=None):
    """M predicted for a hybrid model on CUDA (a dict); never fails: ``mamba_cache_blocks`` is null and
    ``problem`` says why when it cannot be predicted."""
    if isinstance(gpus, dict):
        gpus = gpus.get('gpus')
    memory, memory_source = mamba_clamp.gpu_memory_mib(gpus, gpu_architecture)
    if memory is None:
        return {'mamba_cache_blocks': None, 'source': 'predicted', 'problem': memory_source}
    try:
        weights = mamba_clamp.weight_bytes(config, model_dir, dtype)
        return mamba_clamp.predict_mamba_blocks(config, prediction, memory, gpu_memory_utilization, weights,
                                                tensor_parallel_size, memory_source)
    except (KeyError, TypeError, ValueError, OSError) as exc:
        return {'mamba_cache_blocks': None, 'source': 'predicted',
                'problem': 'cannot predict the Mamba cache blocks: %s%s' % (type(exc).__name__ + ' ' if isinstance(
                    exc, KeyError) else '', exc)}


def mamba_refusal(text):
    """vLLM's refusal ``max_num_seqs (X) exceeds available Mamba cache blocks (M)`` parsed from a log
    (``{'max_num_seqs', 'mamba_cache_blocks'}``), or null."""
    if isinstance(text, (list, tuple)):
        text = '\n'.join(str(line) for line in text)
    return mamba_clamp.parse_refusal(text)


def mamba_cache_key(fingerprint, inputs):
    """The key a reported M is cached under: the probe fingerprint plus the plan's ``derived.mamba_inputs``."""
    return mamba_clamp.cache_key_of(fingerprint, inputs)


def mamba_cached_blocks(record, key):
    """``{'mamba_cache_blocks': M, 'source': 'cached'}`` from a cache record (a mapping or its JSON) whose key
    matches, else null."""
    if isinstance(record, str):
        try:
            record = json.loads(record)
        except ValueError:
            return None
    blocks = mamba_clamp.cached_blocks(record, key)
    return None if blocks is None else {'mamba_cache_blocks': blocks, 'source': 'cached'}


class FilterModule:
    """lmcache_vllm.fleet Mamba cache filters."""

    def filters(self):
        return {
            'predicted_mamba_blocks': predicted_mamba_blocks,
            'mamba_refusal': mamba_refusal,
            'mamba_cache_key': mamba_cache_key,
            'mamba_cached_blocks': mamba_cached_blocks,
        }
