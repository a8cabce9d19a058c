# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters reading N back from the running vLLM (documentation in ``plugins/filter/<filter name>.yml``)."""

from __future__ import annotations

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size import block_size_readback


def vllm_block_size_readback(metrics_text, journal=None, hybrid=True, platform='cuda'):
    """N as the running vLLM reports it (its /metrics, else its journal); a dict."""
    if isinstance(journal, (list, tuple)):
        journal = '\n'.join(str(line) for line in journal)
    return block_size_readback.read_back(metrics_text or '', journal, hybrid=hybrid is not False, platform=platform)


def vllm_block_size_drift(live, host='', probed_n=None, unit_n=None, chunk_size=None, max_num_batched_tokens=None):
    """Sentences where the running N differs from the probed N or the unit's flags ([] when they agree)."""
    return block_size_readback.drift(host, live, probed_n=probed_n, unit_n=unit_n, chunk_size=chunk_size,
                                     max_num_batched_tokens=max_num_batched_tokens)


class FilterModule:
    """lmcache_vllm.fleet read-back filters."""

    def filters(self):
        return {
            'vllm_block_size_readback': vllm_block_size_readback,
            'vllm_block_size_drift': vllm_block_size_drift,
        }
