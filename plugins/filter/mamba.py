# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the Mamba cache clamp (documentation in ``plugins/filter/<filter name>.yml``)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import mamba_clamp


def predicted_mamba_blocks(config, prediction, gpus=None, gpu_architecture=None, gpu_memory_utilization=None,
                           tensor_parallel_size=1, model_dir=None, dtype=None):
    """M predicted for a hybrid model on CUDA (a dict; the host plan predicts it itself, this filter shows the
    same computation); never fails: ``mamba_cache_blocks`` is null and ``problem`` says why when it cannot be
    predicted."""
    found = mamba_clamp.host_memory(config, prediction if isinstance(prediction, dict) else {}, gpus, gpu_architecture,
                                    gpu_memory_utilization, tensor_parallel_size, model_dir, dtype)
    return found['mamba'] or {'mamba_cache_blocks': None, 'source': 'predicted',
                              'problem': 'the model is not a hybrid model: no Mamba cache blocks'}


def group_mamba_blocks(own, probe, canary_blocks, canary_inputs, own_inputs, group):
    """The M a probe group's host plans with: the canary's (with group and canary) when the host took the
    group's N and its inputs of M are the canary's, else its own (null when none)."""
    return mamba_clamp.group_blocks(own, probe, canary_blocks, canary_inputs, own_inputs, group)


class FilterModule:
    """lmcache_vllm.fleet Mamba cache filters."""

    def filters(self):
        return {
            'predicted_mamba_blocks': predicted_mamba_blocks,
            'group_mamba_blocks': group_mamba_blocks,
        }
